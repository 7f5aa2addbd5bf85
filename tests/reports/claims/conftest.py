"""The claims tests' realistic input: the collected findings of a real default run, kept as a fixture file
(``data/findings_default_run.json``: replicate 0's findings in docs/findings.json as generated at commit 9506025,
with every key the claims read), so regenerating docs/findings.json cannot change what these tests decide.

:func:`findings_of` reads either format of a findings document: the old one (the findings dict itself: ``"cka"``,
``"stitching"``, …) or the one with claims (``{"claims": [...], "replicates": [{"findings": {...}}, ...], ...}``),
whose first replicate's findings it returns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

#: The collected findings of the default run the claims tests decide on.
DEFAULT_RUN = Path(__file__).resolve().parent / "data" / "findings_default_run.json"


def findings_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """The findings dict of a findings document: the first replicate's findings when it has ``replicates``, else the
    document itself (the format before claims)."""
    if "replicates" in document:
        return dict(document["replicates"][0]["findings"])
    return dict(document)


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def default_run_findings(path: Path = DEFAULT_RUN) -> dict[str, Any]:
    """The default run's findings (:data:`DEFAULT_RUN`), parsed afresh on each call: the caller may change them."""
    return findings_of(json.loads(_text(path)))


@pytest.fixture
def default_run() -> dict[str, Any]:
    """:func:`default_run_findings` as a fixture (a fresh copy per test)."""
    return default_run_findings()
