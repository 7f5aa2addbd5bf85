"""Each default in one place (issue 57, item 1): conf/base states every setting the pipelines read, the typed settings
agree with it, and the docs quote it.

Each section is parsed the way the pipelines parse it (its ``<section>_section`` function) into its *typed view*:
the section's model, with each settings dictionary (``stitching.settings``, ``zoo.training`` …) replaced by the
settings object the code builds from it (``StitchSettings``, ``TrainingConfig`` …). Then, for every leaf of
conf/base:

- **read**: changing its value changes the typed view, or is refused (a key nothing reads would change neither);
- **one default**: removing it leaves the typed view as it was, or is refused (the key is required): a code default
  that differs from conf/base's value fails here, where it would otherwise decide silently for whoever leaves the key
  out (an environment, a notebook, a test).

The settings classes that two sections share (``CKASettings``: ``cka`` and ``nli.cka``; ``TrainingConfig``:
``zoo.training`` and ``nli.encoder.training``; ``FinetuneConfig``: ``embedding.finetune.settings`` and
``nli.finetune``) take their defaults from the first; the second states every key in conf/base
(``tests/pipelines/test_configured_settings.py``), so its own values never fall back to the first's.
"""

from __future__ import annotations

import copy
import os
import re
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from thinkalike.pipelines.activations.schema import activations_section
from thinkalike.pipelines.cka.schema import cka_settings
from thinkalike.pipelines.corpus.schema import corpus_section
from thinkalike.pipelines.embedding.schema import embedding_section
from thinkalike.pipelines.mlem.schema import validate_mlem
from thinkalike.pipelines.nli.schema import nli_section
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.scaling.schema import scaling_section
from thinkalike.pipelines.specs import pipeline_specs
from thinkalike.pipelines.stitching.schema import stitching_section
from thinkalike.pipelines.zoo.schema import validate_zoo

ROOT = Path(__file__).resolve().parents[1]
SCALING_ANALYSIS = {"family", "twins", "architectures"}  # scaling's own keys; the rest is ScalingSettings'


def _corpus(run: RunSettings) -> tuple[Any, ...]:
    section = corpus_section(run)
    return section.model_dump(exclude={"grammar"}), section.grammar_config()


def _zoo(run: RunSettings) -> tuple[Any, ...]:
    section = validate_zoo(run.raw("zoo"), corpus_section(run))
    return section.model_dump(exclude={"training"}), section.training


def _stitching(run: RunSettings) -> tuple[Any, ...]:
    section = stitching_section(run)
    return section.model_dump(exclude={"settings"}), section.stitch_settings()


def _mlem(run: RunSettings) -> tuple[Any, ...]:
    section = validate_mlem(run.raw("mlem"))
    return section.model_dump(exclude={"fit"}), section.fit_settings()


def _embedding(run: RunSettings) -> tuple[Any, ...]:
    section = embedding_section(run)
    return section.model_dump(exclude={"finetune": {"settings"}}), section.finetune.config()


def _nli(run: RunSettings) -> tuple[Any, ...]:
    section = nli_section(run)
    assert section is not None
    dumped = section.model_dump(exclude={"pairs": True, "finetune": True, "cka": True, "encoder": {"training"}})
    return (
        dumped,
        section.pairs_config(),
        section.finetune_config((0, 0)),
        section.cka_settings(),
        section.encoder.training,
    )


def _scaling(run: RunSettings) -> tuple[Any, ...]:
    section = scaling_section(run)
    return section.model_dump(include=SCALING_ANALYSIS), section.settings(), section.family_settings()


#: section → its typed view (module docstring)
VIEWS: dict[str, Callable[[RunSettings], tuple[Any, ...]]] = {
    "corpus": _corpus,
    "zoo": _zoo,
    "activations": lambda run: (activations_section(run).model_dump(),),
    "cka": lambda run: (cka_settings(run).model_dump(),),
    "stitching": _stitching,
    "mlem": _mlem,
    "embedding": _embedding,
    "nli": _nli,
    "scaling": _scaling,
}

#: Sections whose settings class another section's defaults serve (module docstring): removing one of their keys
#: falls back to the other section's value, so only the reading is checked here.
SECONDARY = ("nli.cka", "nli.encoder.training", "nli.finetune")

#: What is not a setting with a default, and why.
NOT_DEFAULTS = {
    "nli.encoder.architecture": "the encoder's shape, passed to its library's config (as zoo.models' architectures)",
    "cka.measures.names": "the measures to run: no code default (an empty list is CKA alone)",
    "cka.measures.options": "each measure's keyword options, checked against the measure's own signature",
    "cka.measures.calibration.measures": "MeasureSettings() runs no measure, so it calibrates none",
}


def _collections() -> set[str]:
    """The keys whose values are collections of named entries (models, pairs, groups): data, not defaults."""
    return {
        f"{spec.section}.{key}" for spec in pipeline_specs().values() if spec.section for key in spec.replaced_whole
    }


def _leaves(node: Any, path: str, skip: set[str]) -> Iterator[str]:
    if path in skip:
        return
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}", skip)
    else:
        yield path


def _get(parameters: dict[str, Any], path: str) -> Any:
    node: Any = parameters
    for key in path.split("."):
        node = node[key]
    return node


def _with(parameters: dict[str, Any], path: str, value: Any = None, *, remove: bool = False) -> dict[str, Any]:
    changed = copy.deepcopy(parameters)
    *parents, last = path.split(".")
    node = changed
    for key in parents:
        node = node[key]
    if remove:
        del node[last]
    else:
        node[last] = value
    return changed


def _changed(value: Any) -> Any:
    """Another value of the same kind (the validators may refuse it: that counts as read)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2 if value else 0.5
    if isinstance(value, str):
        return value + "_changed"
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else value * 2
    if value is None:
        return 1
    return {"changed": 1}


def _view(section: str, parameters: dict[str, Any]) -> tuple[Any, ...] | Exception:
    try:
        return VIEWS[section](RunSettings(parameters))
    except (ValueError, TypeError) as error:  # ParameterError and pydantic's ValidationError are ValueErrors
        return error


@pytest.fixture(scope="module")
def base_parameters() -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return configured_parameters(ROOT, "base")


def _section_leaves(base_parameters: dict[str, Any], section: str, skip: set[str]) -> list[str]:
    return list(_leaves(base_parameters[section], section, skip))


@pytest.mark.parametrize("section", sorted(VIEWS))
def test_every_conf_base_key_is_read(base_parameters, section):
    base = _view(section, base_parameters)
    assert not isinstance(base, Exception), base
    skip = _collections() | {"nli.encoder.architecture"}
    unread = [
        leaf
        for leaf in _section_leaves(base_parameters, section, skip)
        if _view(section, _with(base_parameters, leaf, _changed(_get(base_parameters, leaf)))) == base
    ]
    assert not unread, f"conf/base keys that change nothing the {section} pipelines read: {unread}"


@pytest.mark.parametrize("section", sorted(VIEWS))
def test_no_code_default_differs_from_conf_base(base_parameters, section):
    base = _view(section, base_parameters)
    skip = _collections() | set(SECONDARY) | set(NOT_DEFAULTS)
    differing = {}
    for leaf in _section_leaves(base_parameters, section, skip):
        without = _view(section, _with(base_parameters, leaf, remove=True))
        if not isinstance(without, Exception) and without != base:
            differing[leaf] = _get(base_parameters, leaf)
    assert not differing, (
        f"a code default differs from conf/base's value (conf/base's shown): {differing}; make them one value"
    )


def test_a_planted_second_default_is_found(base_parameters, monkeypatch):
    """The check above fails on a code default that differs: StitchSettings' steps moved off conf/base's (a subclass
    with another default, built from the settings conf/base sets)."""
    from thinkalike.stitching import StitchSettings

    class Planted(StitchSettings):
        steps: int = 151

    def planted(run: RunSettings) -> tuple[Any, ...]:
        section = stitching_section(run)
        return section.model_dump(exclude={"settings"}), Planted(**section.settings.model_dump(exclude_unset=True))

    monkeypatch.setitem(VIEWS, "stitching", planted)
    base = _view("stitching", base_parameters)
    without = _view("stitching", _with(base_parameters, "stitching.settings.steps", remove=True))
    assert not isinstance(without, Exception) and without != base
    assert _view("stitching", _with(base_parameters, "stitching.settings.steps", 149)) != base


#: A dotted conf key in backticks, then (within the sentence, before another key) "default <value>": a number,
#: true, false or null (prose such as "default corpus.n_ctx" or "the default run" is not a quoted value).
DOCS_DEFAULT = re.compile(
    r"`((?:corpus|zoo|activations|cka|stitching|mlem|embedding|nli|scaling)(?:\.[a-z_0-9]+)+)`"
    r"[^`.]{0,200}?\bdefault:? (-?[0-9][0-9.e+\-]*|true|false|null)(?=[\s),;:]|\.\s|$)"
)


def _docs_defaults() -> list[tuple[str, str, str]]:
    pages = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    found = []
    for page in pages:
        for match in DOCS_DEFAULT.finditer(page.read_text()):
            found.append((str(page.relative_to(ROOT)), match.group(1), match.group(2)))
    return found


def test_the_docs_quote_conf_bases_defaults(base_parameters):
    quoted = _docs_defaults()
    assert len(quoted) >= 2, quoted  # the pattern still finds the docs' quotes
    wrong = []
    for page, key, said in quoted:
        try:
            value = _get(base_parameters, key)
        except (KeyError, TypeError):
            wrong.append(f"{page}: `{key}` is not a conf/base key")
            continue
        if yaml.safe_load(said) != value:
            wrong.append(f"{page}: `{key}` default {said}, conf/base {value!r}")
    assert not wrong, wrong


def test_the_docs_check_finds_a_planted_wrong_default(base_parameters):
    planted = "`stitching.phi_seeds` trains each φ once per seed (default 2)."
    ((key, said),) = [(m.group(1), m.group(2)) for m in DOCS_DEFAULT.finditer(planted)]
    assert key == "stitching.phi_seeds" and yaml.safe_load(said) != _get(base_parameters, key)


#: Section models (their YAML sections), walked for fields that conf/base leaves out.
def _section_models() -> dict[str, type[BaseModel]]:
    from thinkalike.pipelines.activations.schema import ActivationParameters
    from thinkalike.pipelines.cka.schema import CKAParameters
    from thinkalike.pipelines.corpus.schema import CorpusParameters
    from thinkalike.pipelines.embedding.schema import EmbeddingParameters
    from thinkalike.pipelines.mlem.schema import MLEMParameters
    from thinkalike.pipelines.nli.schema import NLIParameters
    from thinkalike.pipelines.scaling.schema import ScalingParameters
    from thinkalike.pipelines.stitching.schema import StitchingParameters
    from thinkalike.pipelines.zoo.schema import ZooParameters

    return {
        "corpus": CorpusParameters,
        "zoo": ZooParameters,
        "activations": ActivationParameters,
        "cka": CKAParameters,
        "stitching": StitchingParameters,
        "mlem": MLEMParameters,
        "embedding": EmbeddingParameters,
        "nli": NLIParameters,
        "scaling": ScalingParameters,
    }


#: Model fields that have no key of their own in conf/base, and why.
NOT_IN_CONF = {
    "cka.estimation": "the section's flat estimation keys, CKASettings' fields (test_configured_settings)",
    "stitching.settings.exclude_special_targets": "stitching.exclude_special_targets, a level up, sets it",
    "nli.finetune.head_seed": "set per copy from nli.seed (copy_seeds); refused in nli.finetune",
    "nli.finetune.data_seed": "set per copy from nli.seed (copy_seeds); refused in nli.finetune",
    "zoo.training.seed": "each model's own zoo.models.<name>.seed; refused in zoo.training",
    "nli.encoder.training.seed": "nli.encoder.seed; refused in nli.encoder.training",
    "nli.cka.pooling": "fixed by the nli pipeline (token rows of one tokenizer); refused in nli.cka",
    "nli.cka.exclude_special_tokens": "fixed by the nli pipeline (special tokens left out); refused in nli.cka",
}


def _unstated(model: type[BaseModel], values: Any, path: str, collections: set[str]) -> Iterator[str]:
    for name, field in model.model_fields.items():
        key = f"{path}.{name}"
        if key in NOT_IN_CONF or key in collections:
            continue
        if not isinstance(values, dict) or name not in values:
            yield key
            continue
        for candidate in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel) and isinstance(values[name], dict):
                yield from _unstated(candidate, values[name], key, collections)
                break


def test_every_section_field_has_a_conf_base_value(base_parameters):
    collections = _collections()
    unstated = [
        key
        for section, model in _section_models().items()
        for key in _unstated(model, base_parameters[section], section, collections)
    ]
    assert not unstated, f"fields conf/base does not state (their code default decides unseen): {unstated}"
