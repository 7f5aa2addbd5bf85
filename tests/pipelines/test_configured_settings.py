"""Every setting the pipelines pass to a settings dataclass is written in conf/base, so that one file per section
shows every knob (issue 57, item 1: the first step). The fields the pipelines fix themselves are listed with why."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from thinkalike.cka.settings import CKASettings
from thinkalike.language.grammar import GrammarConfig
from thinkalike.language.nli import PairsConfig
from thinkalike.mlem.fit import MLEMSettings
from thinkalike.models.finetune import FinetuneConfig
from thinkalike.models.training import TrainingConfig
from thinkalike.pipelines.nli.schema import validate_nli
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.scaling.analysis import ScalingSettings
from thinkalike.stitching.train import StitchSettings

ROOT = Path(__file__).resolve().parents[2]

#: (settings class, dotted conf/base section, fields the pipeline sets itself and why)
SECTIONS: list[tuple[type, str, dict[str, str]]] = [
    (CKASettings, "cka", {}),
    (CKASettings, "nli.cka", {"pooling": "token rows, fixed", "exclude_special_tokens": "fixed: left out"}),
    (GrammarConfig, "corpus.grammar", {}),
    (TrainingConfig, "zoo.training", {"seed": "each model's own zoo.models.<m>.seed"}),
    (TrainingConfig, "nli.encoder.training", {"seed": "nli.encoder.seed"}),
    (FinetuneConfig, "embedding.finetune.settings", {}),
    (FinetuneConfig, "nli.finetune", {"head_seed": "per copy, from nli.seed", "data_seed": "per copy, from nli.seed"}),
    (MLEMSettings, "mlem.fit", {}),
    (
        StitchSettings,
        "stitching.settings",
        {"exclude_special_targets": "stitching.exclude_special_targets, a level up"},
    ),
    (ScalingSettings, "scaling", {}),
    (PairsConfig, "nli.pairs", {}),
]


def _section(parameters: dict[str, Any], path: str) -> dict[str, Any]:
    node: Any = parameters
    for key in path.split("."):
        node = node[key]
    return node


@pytest.fixture(scope="module")
def base_parameters() -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return configured_parameters(ROOT, "base")


@pytest.mark.parametrize(("settings", "path", "fixed"), SECTIONS, ids=[path for _, path, _ in SECTIONS])
def test_every_field_the_pipeline_passes_is_written_in_conf_base(base_parameters, settings, path, fixed):
    section = _section(base_parameters, path)
    names = settings.model_fields if issubclass(settings, BaseModel) else [f.name for f in dataclasses.fields(settings)]
    missing = [name for name in names if name not in section and name not in fixed]
    assert not missing, f"conf/base {path} does not state {missing} ({settings.__name__}'s code default decides)"


def test_nli_cka_takes_its_permutations_from_configuration(base_parameters):
    nli = dict(base_parameters["nli"])
    assert validate_nli(nli).cka_settings().n_permutations == nli["cka"]["n_permutations"] == 0
    nli["cka"] = {**nli["cka"], "n_permutations": 7}
    assert validate_nli(nli).cka_settings().n_permutations == 7
