"""The code's habits, checked: ruff's lint (the rules of pyproject's [tool.ruff.lint]) finds nothing in the
project. The type check (mypy, pyproject's [tool.mypy]) is a step of its own in .ci/run and the README's test
command: from a cold cache it takes about a minute, more than a test should."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


PATHS = ("src", "tests", "benchmarks", "scripts", "notebooks")
RUFF_CHECKS = {
    "lint": ["check", "--no-cache", "--output-format", "concise"],
    "format": ["format", "--check", "--no-cache"],  # `ruff format` applies it
}


@pytest.mark.parametrize("check", sorted(RUFF_CHECKS))
def test_ruff_finds_nothing(check):
    if importlib.util.find_spec("ruff") is None:
        pytest.skip('ruff comes with the dev extra: pip install -e ".[dev]"')
    command = [sys.executable, "-m", "ruff", *RUFF_CHECKS[check], *PATHS]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{' '.join(command[2:])}:\n{result.stdout}{result.stderr}"
