"""``nli``: generalizing vs heuristic NLI copies, localized by layer (Brown et al. 2023 §4).

Namespaces (:mod:`thinkalike.pipelines.namespaces`): ``models.nli`` holds the pairs, the summaries and the
report; ``models.nli.encoder`` the pretrained encoder; ``models.nli.<copy>`` one fine-tuned copy (its
weights, config, curve, accuracy, predictions); ``models.nli.identity_stitching.<copy>`` the identity stitching of
that copy into every other.
``kedro run --pipelines nli --namespaces models.nli.copy_03`` fine-tunes and stitches one copy.

Reads the corpus pipeline's ``train_sequences``, ``heldout_sequences`` and ``tokenizer``.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from thinkalike.cka.settings import CKASettings
from thinkalike.nli.analysis import copy_names
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import group_namespace, namespaced_node
from thinkalike.pipelines.nli import nodes
from thinkalike.pipelines.nli.schema import ZOO_ENCODER, NLIParameters, nli_section
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.runners.settings import GPU_WORK

NLI = group_namespace("nli")
ENCODER = f"{NLI}.encoder"
# f's identity stitching into every other copy: its own box, since it reads every copy's outputs (in the copy's
# box, kedro-viz would see boxes feeding each other model_output -> models, a cycle of layers)
STITCH = f"{NLI}.identity_stitching"
COPY_OUTPUTS = ["classifier_weights", "classifier_config", "training_curve", "accuracy", "predictions"]
PAIRS = f"{NLI}.pairs"
ENCODER_WEIGHTS = [f"{ENCODER}.model_weights", f"{ENCODER}.model_config"]  # the pretrained encoder's saved files


def _node(function, inputs: list[str], outputs: list[str], *, name: str, namespace: str, gpu: bool = False) -> Node:
    """:func:`namespaced_node`, with a single output named as a string (the function returns it bare); ``gpu``:
    tagged :data:`~thinkalike.runners.settings.GPU_WORK` (training, fine-tuning, stitching)."""
    tags = [GPU_WORK] if gpu else []
    node_inputs = inputs or None  # make_pairs reads no dataset: its settings are bound
    if len(outputs) == 1:
        return Node(function, node_inputs, f"{namespace}.{outputs[0]}", name=name, namespace=namespace, tags=tags)
    return namespaced_node(function, node_inputs, outputs, name=name, namespace=namespace, tags=tags)


def copy_dataset(copy: str, dataset: str) -> str:
    """``models.nli.<copy>.<dataset>``."""
    return f"{NLI}.{copy}.{dataset}"


def create_pipeline(run: RunSettings) -> Pipeline:
    """Pairs → encoder → copies → groups (→ sweep) → stitching per copy → CKA → report (module docstring).

    The ``nli`` section is parsed once per run (:func:`~thinkalike.pipelines.nli.schema.nli_section`, a
    :class:`~thinkalike.pipelines.schema.ParameterError` naming the key otherwise) and bound into the nodes as
    ``settings``; the CKA settings (``nli.cka`` with token rows) are built once and bound as ``cka``."""
    settings = run.parsed(nli_section)
    if settings is None:
        return Pipeline([])
    cka = settings.cka_settings()
    names = copy_names(settings.n_copies)
    return Pipeline(
        [
            *_encoder_nodes(settings),
            *_copy_nodes(settings, names),
            *_group_nodes(settings, names),
            *_stitching_nodes(settings, names),
            *_closing_nodes(settings, cka, names),
        ]
    )


def tokenizer_input(settings: NLIParameters) -> str:
    """The tokenizer the copies read: the corpus's for the zoo encoder, else the imported checkpoint's own."""
    return "tokenizer" if settings.encoder.source == ZOO_ENCODER else f"{ENCODER}.tokenizer"


def _encoder_nodes(settings: NLIParameters) -> list[Node]:
    """The pairs (``make_pairs``) and the encoder every copy starts from: pretrained on the grammar
    (``pretrain_encoder``) or a real checkpoint imported (``import_pretrained_encoder``)."""
    pairs = _node(
        with_fixed_arguments(nodes.make_pairs, settings=settings), [], ["pairs"], name="make_pairs", namespace=NLI
    )
    if settings.encoder.source != ZOO_ENCODER:
        return [
            pairs,
            _node(
                with_fixed_arguments(nodes.import_pretrained_encoder, settings=settings),
                [],
                ["model_weights", "model_config", "training_curve", "tokenizer"],
                name="import_pretrained_encoder",
                namespace=ENCODER,
            ),
        ]
    return [
        pairs,
        _node(
            with_fixed_arguments(nodes.pretrain_encoder, settings=settings),
            ["train_sequences", "heldout_sequences", "tokenizer"],
            ["model_weights", "model_config", "training_curve"],
            name="pretrain_encoder",
            namespace=ENCODER,
            gpu=True,
        ),
    ]


def _copy_nodes(settings: NLIParameters, names: list[str]) -> list[Node]:
    """One ``finetune_copy`` per copy, in its own namespace (:data:`COPY_OUTPUTS`)."""
    return [
        _node(
            with_fixed_arguments(nodes.finetune_copy, settings=settings, name=name, index=index),
            [PAIRS, tokenizer_input(settings), *ENCODER_WEIGHTS],
            COPY_OUTPUTS,
            name="finetune_copy",
            namespace=f"{NLI}.{name}",
            gpu=True,
        )
        for index, name in enumerate(names)
    ]


def _group_nodes(settings: NLIParameters, names: list[str]) -> list[Node]:
    """The copies' accuracies summarised into groups (``summarise_accuracy``) and the fraction sweep
    (``sweep_fractions``)."""
    accuracies = [copy_dataset(name, "accuracy") for name in names]
    return [
        _node(
            with_fixed_arguments(nodes.summarise_accuracy, settings=settings),
            [PAIRS, f"{ENCODER}.training_curve", *accuracies, *[copy_dataset(n, "training_curve") for n in names]],
            ["accuracy", "groups", "accuracy_figure", "training_curves"],
            name="summarise_accuracy",
            namespace=NLI,
        ),
        _node(
            with_fixed_arguments(nodes.sweep_fractions, settings=settings),
            [f"{NLI}.groups", tokenizer_input(settings), *ENCODER_WEIGHTS],
            ["sweep"],
            name="sweep_fractions",
            namespace=NLI,
        ),
    ]


def _stitching_nodes(settings: NLIParameters, names: list[str]) -> list[Node]:
    """One ``stitch_from_copy`` per copy: its identity stitching into every other copy, in its own namespace."""
    weights = [copy_dataset(name, "classifier_weights") for name in names]
    configs = [copy_dataset(name, "classifier_config") for name in names]
    predictions = [copy_dataset(name, "predictions") for name in names]
    return [
        _node(
            with_fixed_arguments(nodes.stitch_from_copy, settings=settings, model_f=name, names=names),
            [PAIRS, tokenizer_input(settings), *weights, *configs, *predictions],
            ["identity_stitch_table"],
            name="stitch_from_copy",
            namespace=f"{STITCH}.{name}",
            gpu=True,
        )
        for name in names
    ]


def _closing_nodes(settings: NLIParameters, cka: CKASettings, names: list[str]) -> list[Node]:
    """The stitching summary (``summarise_stitching``), the copies' CKA (``compare_copies_cka``) and the report
    (``write_report``); ``cka`` (``nli.cka`` with token rows) bound into the last two."""
    weights = [copy_dataset(name, "classifier_weights") for name in names]
    configs = [copy_dataset(name, "classifier_config") for name in names]
    return [
        _node(
            with_fixed_arguments(nodes.summarise_stitching, settings=settings),
            [f"{NLI}.groups", *[f"{STITCH}.{n}.identity_stitch_table" for n in names]],
            ["stitching", "stitching_groups", "stitching_figure"],
            name="summarise_stitching",
            namespace=NLI,
        ),
        _node(
            with_fixed_arguments(nodes.compare_copies_cka, settings=settings, cka=cka, names=names),
            [PAIRS, tokenizer_input(settings), f"{NLI}.groups", *weights, *configs],
            [
                "cka_tables",
                "cka_distances",
                "cka_distance_figure",
                "cka_group_distances",
                "cka_group_curves",
                "cka_group_curves_figure",
            ],
            name="compare_copies_cka",
            namespace=NLI,
        ),
        _node(
            with_fixed_arguments(nodes.write_report, settings=settings, cka=cka),
            [
                f"{NLI}.{d}"
                for d in ("accuracy", "groups", "sweep", "stitching_groups", "cka_group_curves", "cka_group_distances")
            ],
            ["report", "figures_plotly"],
            name="write_report",
            namespace=NLI,
        ),
    ]
