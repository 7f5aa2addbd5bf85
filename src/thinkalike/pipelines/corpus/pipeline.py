"""``corpus``: the offline language, its tokenizer and packed token sequences (nodes in namespace ``corpus``: one
box in kedro-viz, one task on a cluster; the datasets keep their names).

The zoo's evaluation sequences (``evaluation_sequences``, ``evaluation_index``: the
evaluation texts packed with the corpus tokenizer) are built only when some zoo model's
activations are extracted (``activations.include_zoo`` with zoo models, or a ``zoo:`` spec in
``activations.models``); other models pack ``evaluation_texts`` with their own tokenizers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.corpus import nodes
from thinkalike.pipelines.corpus.schema import corpus_section
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import CORPUS
from thinkalike.pipelines.run_settings import RunSettings


def packs_for_zoo(parameters: Mapping[str, Any]) -> bool:
    """Whether any model whose activations are extracted is a zoo model (uses the corpus tokenizer)."""
    from thinkalike.pipelines.activations.schema import configured_models  # the activations schema imports ours

    return any(spec.startswith("zoo:") for spec in configured_models(parameters).values())


def create_pipeline(run: RunSettings) -> Pipeline:
    """The corpus nodes, each with the ``corpus`` section parsed once here
    (:func:`~thinkalike.pipelines.corpus.schema.corpus_section`); the zoo's evaluation packing only when
    :func:`packs_for_zoo`."""
    parameters = run.parameters
    settings = run.parsed(corpus_section)
    describe_inputs = ["sentences", "train_sequences", "heldout_sequences", "tokenizer", "evaluation_texts"]
    nodes_ = [
        Node(
            with_fixed_arguments(nodes.generate_corpus, settings=settings),
            None,
            "sentences",
            name="generate_corpus",
            namespace=CORPUS,
        ),
        Node(
            with_fixed_arguments(nodes.split_corpus, settings=settings),
            "sentences",
            ["train_sentences", "heldout_sentences"],
            name="split_corpus",
            namespace=CORPUS,
        ),
        Node(
            with_fixed_arguments(nodes.build_evaluation_texts, settings=settings),
            "heldout_sentences",
            "evaluation_texts",
            name="build_evaluation_texts",
            namespace=CORPUS,
        ),
        Node(
            with_fixed_arguments(nodes.fit_tokenizer, settings=settings),
            "train_sentences",
            "tokenizer",
            name="fit_tokenizer",
            namespace=CORPUS,
        ),
        Node(
            with_fixed_arguments(nodes.pack_language_model_data, settings=settings),
            ["train_sentences", "heldout_sentences", "tokenizer"],
            ["train_sequences", "heldout_sequences"],
            name="pack_language_model_data",
            namespace=CORPUS,
        ),
    ]
    if packs_for_zoo(parameters):
        nodes_.append(
            Node(
                with_fixed_arguments(nodes.pack_evaluation_data, settings=settings),
                ["evaluation_texts", "tokenizer"],
                ["evaluation_sequences", "evaluation_index"],
                name="pack_evaluation_data",
                namespace=CORPUS,
            )
        )
        describe_inputs.append("evaluation_index")
    nodes_.append(
        Node(nodes.describe_corpus, describe_inputs, "corpus_statistics", name="describe_corpus", namespace=CORPUS)
    )
    return Pipeline(nodes_)
