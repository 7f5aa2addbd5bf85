"""``scaling``: one node (``summarise_scaling``, namespace ``models.scaling``) over the ``cka`` pipeline's tables of
the family's pairs (:mod:`thinkalike.pipelines.scaling.plan`; the ``cka`` pipeline computes those pairs too).
Empty when the parameters have no ``scaling`` section or (``family: auto``) fewer than 3 GPT-NeoX zoo models."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations.schema import configured_models_of
from thinkalike.pipelines.cka.pairs import all_cka_pairs, pair_dataset
from thinkalike.pipelines.cka.schema import cka_settings
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import group_namespace
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.scaling import nodes
from thinkalike.pipelines.scaling.plan import scaling_plan
from thinkalike.pipelines.scaling.schema import scaling_section

OUTPUTS = ["scaling_members", "scaling_pairs", "scaling_summary", "scaling_figure"]


def create_pipeline(run: RunSettings) -> Pipeline:
    """The scaling node, with the family (:func:`~thinkalike.pipelines.scaling.plan.scaling_plan`) and the
    ``scaling`` section's analysis settings (:class:`~thinkalike.scaling.analysis.ScalingSettings`, of the section
    parsed once per run)
    bound; its inputs are the cka pipeline's tables of the family's pairs (each pair as the cka pipeline orders it)."""
    plan = scaling_plan(run)
    if plan is None:
        return Pipeline([])
    settings = run.parsed(scaling_section).settings()
    computed = all_cka_pairs(run, run.parsed(cka_settings).pairs, run.parsed(configured_models_of))
    pairs = [pair if pair in computed else pair[::-1] for pair in plan.pairs()]
    tables = [pair_dataset(a, b, "cka_table") for a, b in pairs]
    return Pipeline(
        [
            Node(
                with_fixed_arguments(nodes.summarise_scaling, settings=settings, plan=plan, pairs=pairs),
                tables,
                OUTPUTS,
                name="summarise_scaling",
                namespace=group_namespace("scaling"),
            )
        ]
    )
