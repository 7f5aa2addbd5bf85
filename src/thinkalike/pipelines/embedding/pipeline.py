"""``embedding``: Dar et al. 2022 — parameters read in the vocabulary space, keep-k invertibility, layer
alignment, fine-tune differences and zero-shot stitching.

Namespaces (:mod:`thinkalike.pipelines.namespaces`):

* ``models.embedding.<model>`` — per model: ``read_parameters`` (FF keys/values and heads as tokens, the
  knowledge lookup, a markdown report), ``measure_keep_k`` (keep-k scores, residual states from
  ``models.<model>.activations``) and ``key_value_overlap`` (top-k Jaccard of corresponding key/value vectors
  against random pairings, appendix B) and ``token_structure`` (part-of-speech coherence of the vectors' top-k
  tokens against random token sets and Gaussian vectors, §3; empty for a model without the corpus tokenizer); for
  a model in ``embedding.finetune.models`` also ``finetune_top_layers``
  (fine-tuned classifier, ΔW / head readings, feature-token fractions);
* ``models.embedding.<a>__<b>`` — ``align_layers`` for a pair of ``embedding.alignment.pairs`` (cka.pairs
  syntax), ``zero_shot_stitch`` for an entry ``[a, b]`` of ``embedding.zero_shot.pairs`` (a fine-tuned);
* ``models.embedding`` — ``summarise_embedding``: the tables above gathered across models and pairs, the
  summary figures and every model's keep-k and every pair's alignment figures (folders of PNGs). It reads
  every per-model and per-pair output but the fine-tuned classifiers (read by ``zero_shot_stitch``), so kedro-viz
  draws them inside their boxes.

Settings: the ``embedding`` section is parsed once here
(:class:`~thinkalike.pipelines.embedding.schema.EmbeddingParameters`, where its defaults live) and bound to every
node as ``settings``; the nodes that fine-tune or stitch also get the ``corpus`` section, parsed once
(``corpus_section``), as ``corpus``. No node reads a ``params:`` input.

Models: ``embedding.models`` (null: every model of the activations pipeline — zoo models and
``activations.models`` specs). ``kedro run --pipelines embedding --namespaces models.embedding.gelu_4l``
reads one model.
"""

from __future__ import annotations

import logging

from kedro.pipeline import Node, Pipeline

from thinkalike.models.sources import zoo_target
from thinkalike.pipelines.corpus.schema import CorpusParameters, corpus_section
from thinkalike.pipelines.embedding import nodes
from thinkalike.pipelines.embedding.schema import EmbeddingParameters, EmbeddingPlan, plan_embedding
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import (
    group_namespace,
    model_dataset,
    namespaced_node,
    pair_namespace,
)
from thinkalike.pipelines.parameters import section
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import validate_section
from thinkalike.runners.settings import GPU_WORK

logger = logging.getLogger(__name__)

EMBEDDING = "embedding"
READ_OUTPUTS = ["embedding_vectors", "embedding_head_pairs", "embedding_lookup", "embedding_report"]
KEEP_K_OUTPUTS = ["keep_k_scores"]
OVERLAP_OUTPUTS = ["key_value_overlap"]
TOKEN_STRUCTURE_OUTPUTS = ["token_structure"]
FINETUNE_OUTPUTS = [
    "finetuned_weights",
    "finetuned_config",
    "finetune_curve",
    "finetune_top_tokens",
    "feature_fractions",
]
ALIGN_OUTPUTS = ["alignment_similarity", "alignment_matches"]
SUMMARY_OUTPUTS = [
    "embedding_keep_k",
    "embedding_alignment",
    "embedding_feature_fractions",
    "embedding_zero_shot",
    "embedding_alignment_figure",
    "embedding_zero_shot_figure",
    "embedding_keep_k_figures",
    "embedding_alignment_figures",
    "embedding_alignment_similarity",
    "embedding_readings",
    "embedding_head_interactions",
    "embedding_lookups",
    "embedding_reports",
    "embedding_finetune_curves",
    "embedding_finetune_top_tokens",
    "embedding_key_value_overlap",
    "embedding_token_structure",
]
#: What the summary reads of each model, pair and fine-tuned model (it gathers them: kedro-viz draws them in boxes).
MODEL_TABLES = [
    "keep_k_scores",
    "embedding_vectors",
    "embedding_head_pairs",
    "embedding_lookup",
    "embedding_report",
    "key_value_overlap",
    "token_structure",
]
PAIR_TABLES = ["alignment_matches", "alignment_similarity"]
FINETUNE_TABLES = ["feature_fractions", "finetune_curve", "finetune_top_tokens"]


def model_box(model: str) -> str:
    """``models.embedding.<model>``."""
    return f"{group_namespace(EMBEDDING)}.{model}"


def zoo_sources(model: str) -> list[str]:
    """A zoo model's weights, config and the corpus tokenizer."""
    return [model_dataset(model, "model_weights"), model_dataset(model, "model_config"), "tokenizer"]


def sources(model: str, spec: str) -> list[str]:
    """What building ``model``'s handle reads: zoo datasets, or nothing (a spec loads itself)."""
    target = zoo_target(spec)
    return zoo_sources(target) if target is not None else []


def model_pipeline(model: str, spec: str, settings: EmbeddingParameters, corpus: CorpusParameters | None) -> Pipeline:
    """Readings and keep-k of one model in ``models.embedding.<model>``, and its fine-tuning when ``corpus`` is
    given (the parsed corpus section, for a model of ``embedding.finetune.models``)."""
    box, own = model_box(model), sources(model, spec)
    steps = (  # (node function, inputs, outputs, name): each bound to this model's settings, name and spec
        (nodes.read_model, own, READ_OUTPUTS, "read_parameters"),
        (nodes.measure_keep_k, [model_dataset(model, "activations"), *own], KEEP_K_OUTPUTS, "measure_keep_k"),
        (nodes.key_value_overlap, own, OVERLAP_OUTPUTS, "key_value_overlap"),
        (nodes.token_structure, own, TOKEN_STRUCTURE_OUTPUTS, "token_structure"),
    )
    built = [
        namespaced_node(
            with_fixed_arguments(function, settings=settings, model=model, spec=spec),
            inputs,
            outputs,
            name=name,
            namespace=box,
        )
        for function, inputs, outputs, name in steps
    ]
    if corpus is not None:
        target = zoo_target(spec)
        assert target is not None  # validate_embedding fine-tunes zoo models only
        built.append(
            namespaced_node(
                with_fixed_arguments(nodes.finetune_model, settings=settings, corpus=corpus, model=model),
                [*zoo_sources(target)[:2], "tokenizer", "train_sentences"],
                FINETUNE_OUTPUTS,
                name="finetune_top_layers",
                namespace=box,
                tags=[GPU_WORK],
            )
        )
    return Pipeline(built)


def create_pipeline(run: RunSettings) -> Pipeline:
    """Per model, per alignment pair and per zero-shot pair nodes, then ``summarise_embedding``; the ``embedding``
    section (and, when a model is fine-tuned, the ``corpus`` section) parsed once and bound to the nodes."""
    parameters = run.parameters
    if not section(parameters, EMBEDDING):
        return Pipeline([])
    embedding = validate_section(EmbeddingParameters, section(parameters, EMBEDDING), EMBEDDING)
    plan = plan_embedding(embedding, parameters)  # what cannot be read is left out here and refused at run start
    for note in plan.notes:
        logger.info("%s", note)
    models = plan.models
    if not models:
        return Pipeline([])
    tuned = set(plan.finetuned)
    corpus = run.parsed(corpus_section) if tuned else None  # n_ctx of fine-tuning and stitching
    pipeline = sum(
        (model_pipeline(model, spec, embedding, corpus if model in tuned else None) for model, spec in models.items()),
        Pipeline([]),
    )
    for node in _align_nodes(plan, embedding):
        pipeline += Pipeline([node])
    for node in _zero_shot_nodes(plan, embedding, corpus):
        pipeline += Pipeline([node])
    return pipeline + Pipeline([_summary_node(plan)])


def _align_nodes(plan: EmbeddingPlan, embedding: EmbeddingParameters) -> list[Node]:
    """``align_layers`` of each alignment pair of ``plan``, in the pair's namespace (it reads both models)."""
    models, built = plan.models, []
    for first, second in plan.pairs:
        inputs_a, inputs_b = sources(first, models[first]), sources(second, models[second])
        built.append(
            namespaced_node(
                with_fixed_arguments(
                    nodes.align_pair,
                    settings=embedding,
                    model_a=first,
                    spec_a=models[first],
                    model_b=second,
                    spec_b=models[second],
                    n_sources_a=len(inputs_a),
                ),
                [*inputs_a, *inputs_b],
                ALIGN_OUTPUTS,
                name="align_layers",
                namespace=pair_namespace(EMBEDDING, first, second),
            )
        )
    return built


def _zero_shot_nodes(
    plan: EmbeddingPlan, embedding: EmbeddingParameters, corpus: CorpusParameters | None
) -> list[Node]:
    """``zero_shot_stitch`` of each zero-shot pair ``[a, b]`` of ``plan`` (a fine-tuned), in the pair's namespace."""
    return [
        namespaced_node(
            with_fixed_arguments(
                nodes.zero_shot_pair, settings=embedding, corpus=corpus, model_a=first, model_b=second
            ),
            [
                f"{model_box(first)}.finetuned_weights",
                f"{model_box(first)}.finetuned_config",
                "heldout_sentences",
                "tokenizer",
                *zoo_sources(first)[:2],
                *zoo_sources(plan.models[second][4:])[:2],
            ],
            ["zero_shot_accuracy"],
            name="zero_shot_stitch",
            namespace=pair_namespace(EMBEDDING, first, second),
        )
        for first, second in plan.zero_shot
    ]


def _summary_node(plan: EmbeddingPlan) -> Node:
    """``summarise_embedding``: every model's, pair's, fine-tuned model's and zero-shot pair's tables gathered."""
    models, pairs, finetuned, zero_shot = plan.models, plan.pairs, list(plan.finetuned), plan.zero_shot
    tables = (
        [f"{model_box(m)}.{table}" for table in MODEL_TABLES for m in models]
        + [f"{pair_namespace(EMBEDDING, a, b)}.{table}" for table in PAIR_TABLES for a, b in pairs]
        + [f"{model_box(m)}.{table}" for table in FINETUNE_TABLES for m in finetuned]
        + [f"{pair_namespace(EMBEDDING, a, b)}.zero_shot_accuracy" for a, b in zero_shot]
    )
    return Node(
        with_fixed_arguments(
            nodes.summarise_embedding,
            models=list(models),
            pairs=[tuple(pair) for pair in pairs],
            finetuned=finetuned,
            n_zero_shot=len(zero_shot),
        ),
        tables,
        SUMMARY_OUTPUTS,
        name="summarise_embedding",
        namespace=group_namespace(EMBEDDING),
    )
