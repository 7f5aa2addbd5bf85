"""``scaling``: one node (``summarise_scaling``, namespace ``models.scaling``) over the ``cka`` pipeline's tables of
the family's pairs (:mod:`thinkalike.pipelines.scaling.family`; the ``cka`` pipeline computes those pairs too).
Empty when the parameters have no ``scaling`` section or (``family: auto``) fewer than 3 GPT-NeoX zoo models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.cka.pairs import all_cka_pairs, pair_dataset
from thinkalike.pipelines.namespaces import group_namespace
from thinkalike.pipelines.scaling import nodes
from thinkalike.pipelines.scaling.family import scaling_plan

OUTPUTS = ["scaling_members", "scaling_pairs", "scaling_summary", "scaling_figure"]


def create_pipeline(parameters: Mapping[str, Any]) -> Pipeline:
    plan = scaling_plan(parameters)
    if plan is None:
        return Pipeline([])
    computed = all_cka_pairs(parameters)
    pairs = [pair if pair in computed else pair[::-1] for pair in plan.pairs()]
    tables = [pair_dataset(a, b, "cka_table") for a, b in pairs]
    return Pipeline([Node(bind(nodes.summarise_scaling, plan=plan, pairs=pairs), ["params:scaling", *tables], OUTPUTS,
                          name="summarise_scaling", namespace=group_namespace("scaling"))])
