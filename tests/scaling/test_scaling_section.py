"""The ``scaling`` section's typed model (thinkalike.pipelines.scaling.schema) and the family settings it hands to
thinkalike.scaling.membership."""

from __future__ import annotations

from dataclasses import fields

import pytest

from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.scaling.schema import SCALING_KEYS, ScalingParameters, validate_scaling
from thinkalike.scaling.analysis import ScalingSettings
from thinkalike.scaling.membership import AUTO, FamilySettings


def test_the_section_holds_the_family_settings_and_every_analysis_setting():
    assert SCALING_KEYS == (*(f.name for f in fields(FamilySettings)), *(f.name for f in fields(ScalingSettings)))
    assert validate_scaling({}).family_settings() == FamilySettings()
    assert validate_scaling({}).settings() == ScalingSettings()


def test_typed_settings_are_the_ones_membership_and_the_analysis_read():
    section = {"family": ["a", "b", "c"], "twins": {"c": "d"}, "band": [0.5, 0.75], "seed": 3}
    typed = validate_scaling(section)
    assert typed.family_settings() == FamilySettings(("a", "b", "c"), {"c": "d"}, {})
    assert typed.settings() == ScalingSettings(band=(0.5, 0.75), seed=3)
    assert ScalingParameters().family == AUTO


def test_a_bad_type_names_its_key():
    with pytest.raises(ParameterError, match=r"^scaling\.max_blocks"):
        validate_scaling({"max_blocks": "4"})
    with pytest.raises(ParameterError, match=r"^scaling\.familly: unknown parameter"):
        validate_scaling({"familly": []})
