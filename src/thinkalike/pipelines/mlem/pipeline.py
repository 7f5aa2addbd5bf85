"""``mlem``: one node per model (namespace ``models.mlem.<model>``), then ``summarise_mlem``.

Models are the ``activations`` pipeline's (:func:`configured_models`): every zoo model and any
``hf:`` / ``gguf:`` / ``tl:`` model, whose words are pooled from their own tokens.
``kedro run --pipelines mlem --namespaces models.mlem.gelu_2l`` fits one model's layers.
"""

from __future__ import annotations

import logging

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations.schema import configured_models_of
from thinkalike.pipelines.corpus.schema import CorpusParameters, corpus_section
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.mlem import nodes
from thinkalike.pipelines.mlem.schema import MLEMParameters, validate_mlem
from thinkalike.pipelines.namespaces import MODELS, model_dataset
from thinkalike.pipelines.run_settings import RunSettings

MLEM = "mlem"
MODEL_OUTPUTS = ["mlem_profile", "mlem_rsa_distances"]
SUMMARY_OUTPUTS = [
    "mlem_profiles",
    "mlem_feature_similarity",
    "mlem_rsa_similarity",
    "mlem_mds",
    "mlem_similarity_figure",
    "mlem_similarity_plotly",
    "mlem_mds_figure",
    "mlem_mds_plotly",
    "mlem_profile_figures",
    "mlem_profile_figures_plotly",
]
FEATURE_TABLE = "evaluation_texts"  # the grammar sentences (with their labels) whose activations were extracted

logger = logging.getLogger(__name__)


def grammar_sentences_replaced(corpus: CorpusParameters, settings: MLEMParameters) -> bool:
    """True when ``corpus.natural_text.use: replace`` leaves no grammar sentence (no linguistic labels) to fit
    (the controlled stimuli, ``mlem.stimuli: controlled``, are kept whatever the natural text)."""
    natural_text = corpus.natural_text
    return bool(natural_text.path) and natural_text.use == "replace" and settings.stimuli != "controlled"


def activation_datasets(model: str) -> list[str]:
    """The catalog names of ``model``'s activation store and token index (the ``activations`` pipeline's outputs)."""
    return [model_dataset(model, "activations"), model_dataset(model, "activation_index")]


def mlem_namespace(model: str | None = None) -> str:
    """``models.mlem`` (the summary's namespace), or ``models.mlem.<model>`` (one model's fits)."""
    return f"{MODELS}.{MLEM}" if model is None else f"{MODELS}.{MLEM}.{model}"


def model_pipeline(model: str, settings: MLEMParameters) -> Pipeline:
    """MLEM of every layer of ``model`` in namespace ``models.mlem.<model>``."""
    namespace = mlem_namespace(model)
    node = Node(
        with_fixed_arguments(nodes.fit_model, settings=settings, model=model),
        [*activation_datasets(model), FEATURE_TABLE],
        [f"{namespace}.{output}" for output in MODEL_OUTPUTS],
        name="fit_mlem",
        namespace=namespace,
    )
    return Pipeline([node])


def create_pipeline(run: RunSettings) -> Pipeline:
    """One :func:`model_pipeline` per configured model, then ``summarise_mlem`` (namespace ``models.mlem``), which
    also draws every model's profile figure (so kedro-viz draws each model's outputs inside its box). The ``mlem``
    section is parsed once here (:func:`~thinkalike.pipelines.mlem.schema.validate_mlem`; what it must agree with
    in other sections is :func:`~thinkalike.pipelines.mlem.schema.check_mlem`'s before a run) and bound to every
    node."""
    parameters = run.parameters
    if not parameters.get(MLEM):
        return Pipeline([])
    settings = validate_mlem(parameters[MLEM])
    models = list(run.parsed(configured_models_of))
    if not models:
        return Pipeline([])
    if grammar_sentences_replaced(run.parsed(corpus_section), settings):
        logger.warning(
            "mlem: corpus.natural_text.use is 'replace', so the evaluation texts carry no grammar "
            "features to fit; the mlem pipeline is empty"
        )
        return Pipeline([])
    per_model = sum((model_pipeline(model, settings) for model in models), Pipeline([]))
    tables = [f"{mlem_namespace(model)}.mlem_profile" for model in models] + [
        f"{mlem_namespace(model)}.mlem_rsa_distances" for model in models
    ]
    summary = Node(
        with_fixed_arguments(nodes.summarise_mlem, settings=settings),
        tables,
        SUMMARY_OUTPUTS,
        name="summarise_mlem",
        namespace=mlem_namespace(),
    )
    return per_model + Pipeline([summary])
