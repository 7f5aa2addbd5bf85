"""The layers of docs/layout.md hold: import-linter's contracts in pyproject.toml ([tool.importlinter]) — the maths
packages import no Kedro and no MLflow, measures no models, reports no pipelines, and nothing imports upward (every
import counts, at module level or inside a function)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_are_kept():
    pytest.importorskip("importlinter", reason='the contracts need the dev extra: pip install -e ".[dev]"')
    checked = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
    assert "Contracts: 5 kept, 0 broken." in checked.stdout
