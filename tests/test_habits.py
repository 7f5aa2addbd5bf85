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


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip('ruff comes with the dev extra: pip install -e ".[dev]"')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "src",
            "tests",
            "benchmarks",
            "scripts",
            "notebooks",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"ruff check:\n{result.stdout}{result.stderr}"


def test_ruff_format_changes_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip('ruff comes with the dev extra: pip install -e ".[dev]"')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--check",
            "--no-cache",
            "src",
            "tests",
            "benchmarks",
            "scripts",
            "notebooks",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"ruff format --check (run `ruff format` to apply):\n{result.stdout}{result.stderr}"
