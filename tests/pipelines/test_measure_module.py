"""A measure is one module (issue 57, item 3): a copy of the project gets one new file,
``src/thinkalike/measures/toy_rv.py``, whose ``MEASURES`` declares the RV coefficient (Robert and Escoufier 1976:
biased linear CKA) — its name, kind, invariances, cost, the rows it needs. No other file is changed. Then, in that
copy, the registry lists it; the registry's tests of every declared invariance and symmetry run on it and pass; and
``kedro run --pipelines cka,report`` computes it for every pair and layer pair (``cka.measures.names: all``), grounds
it (``measure_grounding``) and shows it in the report's measure panels.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.pipelines.conftest import PROJECT_ROOT

TOY_MEASURE = '''"""The RV coefficient (Robert and Escoufier 1976), biased linear CKA:
RV(X, Y) = ‖XcᵀYc‖²_F / (‖XcᵀXc‖_F · ‖YcᵀYc‖_F), Xc, Yc the column-centred inputs."""

import numpy as np

from thinkalike.measures.inputs import paired_activations
from thinkalike.measures.measure import SHAPE_INVARIANCES, Measure


def rv_coefficient(x, y):
    x, y = paired_activations(x, y, measure="toy_rv", min_tokens=2)
    xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
    cross = np.sum((xc.T @ yc) ** 2)
    return float(cross / np.sqrt(np.sum((xc.T @ xc) ** 2) * np.sum((yc.T @ yc) ** 2)))


MEASURES = (
    Measure("toy_rv", rv_coefficient, "similarity", False, SHAPE_INVARIANCES, "n·d²", True, min_tokens=2, order=200),
)
'''


def _environment(project: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(project / "src"), "HF_HUB_OFFLINE": "1", "KEDRO_DISABLE_TELEMETRY": "1"}


@pytest.fixture(scope="module")
def toy_measure_project(tiny_project_as_run, tmp_path_factory) -> Path:
    project = tmp_path_factory.mktemp("toy_measure") / "project"
    shutil.copytree(tiny_project_as_run, project)
    shutil.copytree(
        PROJECT_ROOT / "src" / "thinkalike",
        project / "src" / "thinkalike",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (project / "src" / "thinkalike" / "measures" / "toy_rv.py").write_text(TOY_MEASURE, encoding="utf-8")
    return project


def test_a_toy_measure_module_is_registered_tested_computed_grounded_and_reported(toy_measure_project):
    project = toy_measure_project
    listed = subprocess.run(
        [sys.executable, "-c", "from thinkalike.measures.registry import MEASURE_NAMES; print(*MEASURE_NAMES)"],
        env=_environment(project),
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split()[-1] == "toy_rv" and "cka" in listed.stdout.split()  # last: its order is 200

    # the registry's own tests of declared invariances and symmetry run on the new measure, by its name alone
    tests = project / "registry_tests"
    tests.mkdir()
    shutil.copy(PROJECT_ROOT / "tests" / "measures" / "test_registry.py", tests / "test_registry.py")
    checked = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-k", "toy_rv", str(tests)],
        cwd=project,
        env=_environment(project),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout[-2000:]
    assert "3 passed" in checked.stdout  # the invariances, the symmetry and the options model, each on toy_rv

    ran = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--env", "test", "--pipelines", "cka,report"],
        cwd=project,
        env=_environment(project),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    reporting = project / "data" / "08_reporting"
    (measures_file,) = sorted(reporting.glob("similarity_measures.parquet/*/similarity_measures.parquet"))[-1:]
    measures = pd.read_parquet(measures_file)
    toy = measures[measures["measure"] == "toy_rv"]
    assert set(zip(toy["model_a"], toy["model_b"])) == set(zip(measures["model_a"], measures["model_b"]))
    itself = toy["model_a"] == toy["model_b"]
    assert itself.any() and (~itself).any()
    assert toy.loc[itself, "matched_mean"].to_numpy() == pytest.approx(1.0, abs=1e-9)  # a layer with itself: RV = 1
    assert ((toy.loc[~itself, "matched_mean"] > 0) & (toy.loc[~itself, "matched_mean"] < 1)).all()
    (grounding_file,) = sorted(reporting.glob("measure_grounding.parquet/*/measure_grounding.parquet"))[-1:]
    assert "toy_rv" in set(pd.read_parquet(grounding_file)["measure"])
    (page,) = sorted(reporting.glob("report.html/*/report.html"))[-1:]
    assert "toy_rv (similarity), matched-layer mean" in page.read_text(encoding="utf-8")  # its measure panel
