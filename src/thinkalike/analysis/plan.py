"""The pre-registered analysis plan, ``conf/base/analysis_plan.yml``, as typed models (no Kedro).

The plan names, per question and column (``zoo``: the zoo's seed replicates; ``real``: the real checkpoints'),
its parts — each with its reference (what 0 means), its smallest effect of interest ``delta`` and that delta's
basis — which parts are primary, the estimand in words, its scale and the gates it stands behind. The code that
computes each part's effect (:mod:`thinkalike.reports.findings.scorecard`) must produce exactly the plan's parts;
the plan's file is hashed (:func:`plan_digest`) into ``docs/findings.json`` so a reader can tell which plan decided.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Where the plan lives in the repository.
PLAN_PATH = Path("conf/base/analysis_plan.yml")

Column = Literal["zoo", "real"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlannedPart(_Strict):
    """One part: ``reference`` (what its 0 is, and the source), ``delta`` (> 0, in the part's units), ``basis``
    (``paper …`` or ``resolution …``) and whether it is ``deterministic`` given what a replicate varies."""

    reference: str
    delta: float = Field(gt=0)
    basis: str
    deterministic: bool = False

    @property
    def resolution_based(self) -> bool:
        """Whether δ is the measurement's resolution (its "absent" reads "below our resolution")."""
        return self.basis.startswith("resolution")


class PlannedColumn(_Strict):
    """A question in one column: the ``estimand`` and ``scale`` in words, the ``primary`` parts (deciding the row),
    every part, and the ``gates`` (names in :attr:`AnalysisPlan.gates`)."""

    estimand: str
    scale: str
    primary: tuple[str, ...] = Field(min_length=1)
    parts: dict[str, PlannedPart]
    gates: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _primary_are_parts(self) -> PlannedColumn:
        missing = [name for name in self.primary if name not in self.parts]
        if missing:
            raise ValueError(f"primary parts {missing} are not among the parts {list(self.parts)}")
        return self


class PaperClaim(_Strict):
    """The paper's sentence, where it is and its number (or that it gives none)."""

    sentence: str
    location: str
    number: str


class PlannedQuestion(_Strict):
    paper: PaperClaim
    zoo: PlannedColumn | None = None
    real: PlannedColumn | None = None

    def column(self, name: Column) -> PlannedColumn | None:
        return self.zoo if name == "zoo" else self.real


class PlannedGate(_Strict):
    """A precondition: its ``value`` per replicate in words, the ``threshold`` it must clear, and its ``source``."""

    description: str
    value: str
    threshold: float
    source: str


class PilotRecord(_Strict):
    commit: str
    zoo_replicates: tuple[int, ...]
    real_replicates: tuple[int, ...]


class DecidingRecord(_Strict):
    first_replicate: int = Field(ge=1)
    zoo_replicates: int = Field(ge=2)


class Amendment(_Strict):
    """A change to the plan after the deciding replicates of its ``column`` began: what changed and what data, if
    any, had been seen (``before``: the data it was fixed before)."""

    date: str
    question: str
    column: Column
    what: str
    before: str


class AnalysisPlan(_Strict):
    """The whole plan (the file's module comment says what each field means)."""

    version: int
    pilot: PilotRecord
    deciding: DecidingRecord
    amendments: tuple[Amendment, ...] = ()
    exclusions: str
    exploratory_rule: str
    gates: dict[str, PlannedGate]
    questions: dict[str, PlannedQuestion]

    @model_validator(mode="after")
    def _gates_exist(self) -> AnalysisPlan:
        for key, question in self.questions.items():
            for name in ("zoo", "real"):
                column = question.column(name)
                unknown = [g for g in (column.gates if column else ()) if g not in self.gates]
                if unknown:
                    raise ValueError(
                        f"questions.{key}.{name}.gates: unknown gates {unknown} (known: {list(self.gates)})"
                    )
        return self

    @model_validator(mode="after")
    def _deciding_seeds_are_new(self) -> AnalysisPlan:
        if self.deciding.first_replicate <= max(self.pilot.zoo_replicates, default=-1):
            raise ValueError("deciding.first_replicate: the deciding replicates must not reuse a pilot seed")
        return self


def load_plan(path: Path) -> AnalysisPlan:
    """The plan at ``path`` (a one-line ``ValueError`` naming the file when it is missing or malformed)."""
    if not path.is_file():
        raise ValueError(f"{path}: the analysis plan is missing")
    try:
        return AnalysisPlan.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (yaml.YAMLError, ValueError) as error:
        first = str(error).splitlines()
        raise ValueError(f"{path}: not a valid analysis plan: {' '.join(first[:3])}") from error


def plan_digest(path: Path) -> str:
    """The sha256 of the plan file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_plan_path() -> Path:
    """The repository's plan, found from this source file (an editable install) — the default of the findings'
    commands; a plan elsewhere is passed explicitly."""
    return Path(__file__).resolve().parents[3] / PLAN_PATH
