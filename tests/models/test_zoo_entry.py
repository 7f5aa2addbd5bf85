"""A zoo entry's objective and depth have one reader (thinkalike.models.zoo_entry), which the zoo's schema, its
trainer and the findings share."""

from __future__ import annotations

import pytest

from thinkalike.models.zoo_entry import DEFAULT_OBJECTIVE, OBJECTIVES, objective_of, zoo_depth


def test_an_entry_without_an_objective_is_causal_everywhere():
    from thinkalike.pipelines.zoo.schema import ZooModelParameters

    assert objective_of({}) == DEFAULT_OBJECTIVE == "causal" and objective_of({"objective": "masked"}) == "masked"
    assert ZooModelParameters.model_fields["objective"].default == DEFAULT_OBJECTIVE
    assert set(OBJECTIVES) == {"causal", "masked"}


@pytest.mark.parametrize(
    ("entry", "depth"),
    [
        ({"architecture": {"n_layers": 3}}, 3),  # TransformerLens
        ({"architecture": {"num_hidden_layers": 4}}, 4),  # transformers
        ({"architecture": {}}, None),
        ({}, None),
        (None, None),
        ({"architecture": {"n_layers": True}}, None),
    ],
)
def test_the_depth_is_read_from_either_librarys_key(entry, depth):
    assert zoo_depth(entry) == depth
