"""Which pipeline saved a dataset comes from the pipelines' own specs (``dataset_prefixes``), the longest matching
prefix winning: the report lists an output under its pipeline without a list of its own."""

from __future__ import annotations

import pytest

from thinkalike.pipelines.specs import pipeline_specs, producing_pipeline


@pytest.mark.parametrize(
    ("name", "pipeline"),
    [
        ("models.cka.gelu_2l__solu_2l.cka_table", "cka"),  # longer than the zoo's "models."
        ("models.nli.accuracy", "nli"),
        ("models.gelu_2l.model_config", "zoo"),
        ("cka_distances", "cka"),
        ("measure_grounding", "cka"),
        ("embedding_keep_k", "embedding"),
        ("scaling_summary", "scaling"),
        ("corpus_statistics", "corpus"),
        ("nothing_like_it", "?"),
    ],
)
def test_a_dataset_is_listed_under_the_pipeline_of_its_longest_prefix(name, pipeline):
    assert producing_pipeline(name) == pipeline


def test_no_two_pipelines_declare_the_same_prefix():
    declared = [prefix for spec in pipeline_specs().values() for prefix in spec.dataset_prefixes]
    assert declared and len(declared) == len(set(declared))
