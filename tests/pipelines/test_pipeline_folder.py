"""A pipeline is one folder that declares itself (issue 40, item 1).

A copy of the project (its conf, and its source under ``src/``, imported instead of the installed package) gets
one new folder, ``src/thinkalike/pipelines/toy/``, whose ``SPEC`` declares its builder, its section ``toy``, the
check of that section, the MLflow rule of its output, its datasets' prefix and its report section (an experiment,
its table, its numbers and a claim); and ``conf/base/parameters_toy.yml`` and ``conf/base/catalog_toy.yml``. No
other file is changed. Then, in that copy, ``kedro registry list`` lists it, a bad ``toy.value`` is refused before
any node with the key named, and ``kedro run --pipelines toy,report`` runs it, logs its metric to MLflow and writes
a report with its section and its claim (issue 51, item 1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipelines.conftest import PROJECT_ROOT, make_project_copy

TOY_PIPELINE = '''"""A toy pipeline: ``toy.value`` doubled."""

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.specs import PipelineSpec
from thinkalike.output_rules import named
from thinkalike.reports.experiments import Experiment, KeyNumber, ReportSection
from thinkalike.reports.findings.claims import greater


def double(toy):
    return {"doubled": 2.0 * toy["value"]}


def create_pipeline(run):
    return Pipeline([Node(double, "params:toy", "toy_result", name="double_toy")])


def check_toy(run):
    value = (run.raw("toy") or {}).get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParameterError(f"toy.value: must be a number, got {value!r}")


def _log(recorder, output):
    recorder.log_metrics({"toy.doubled": output.data["doubled"]}, what=output.name)


def collect_toy(run):
    return {"value": 21.0, "doubled": run.tables["toy_result"]["doubled"]}


def claims_toy(findings):
    toy = findings.get("toy") or {}
    return [greater("toy.doubled_above_value", "the doubled value {doubled} is above the value {value}",
                    toy.get("doubled"), toy.get("value"), doubled=toy.get("doubled"), value=toy.get("value"))]


REPORT = ReportSection(
    "toy",
    Experiment("toy", "A toy experiment", "Is twice the value above it?", ("toy",), "toy", ("toy_result",),
               numbers=(KeyNumber("twice the value", ("toy.doubled",), "1"),)),
    tables=("toy_result",),
    collect=collect_toy,
    claims=claims_toy,
)

SPEC = PipelineSpec("toy", create_pipeline, stage=90, section="toy", check=check_toy,
                    rules=(named(["toy_result"], _log),), dataset_prefixes=("toy_",), report=(REPORT,))
'''

TOY_CATALOG = """toy_result:
  type: thinkalike.io.atomic.JSONDataset
  filepath: data/08_reporting/toy_result.json
"""


@pytest.fixture(scope="module")
def toy_project(tmp_path_factory) -> Path:
    project = make_project_copy(tmp_path_factory.mktemp("toy_project"))
    shutil.copytree(
        PROJECT_ROOT / "src" / "thinkalike",
        project / "src" / "thinkalike",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    folder = project / "src" / "thinkalike" / "pipelines" / "toy"
    folder.mkdir()
    (folder / "__init__.py").write_text(TOY_PIPELINE)
    (project / "conf" / "base" / "parameters_toy.yml").write_text("toy:\n  value: 21\n")
    (project / "conf" / "base" / "catalog_toy.yml").write_text(TOY_CATALOG)
    return project


def kedro(project: Path, *arguments: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PYTHONPATH": str(project / "src"),
        "HF_HUB_OFFLINE": "1",
        "KEDRO_DISABLE_TELEMETRY": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "kedro", *arguments],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_toy_pipeline_folder_is_registered_validated_run_and_logged(toy_project):
    listed = kedro(toy_project, "registry", "list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "- toy" in listed.stdout
    refused = kedro(
        toy_project, "run", "--pipelines", "toy", "--runner", "SequentialRunner", "--params", "toy.value=oops"
    )
    assert refused.returncode != 0
    assert "toy.value: must be a number, got 'oops'" in refused.stdout + refused.stderr
    assert "Running node" not in refused.stdout + refused.stderr
    ran = kedro(toy_project, "run", "--pipelines", "toy,report", "--runner", "SequentialRunner")
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    _the_report_has_the_toys_section_and_claim(toy_project)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{toy_project / 'mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "thinkalike"]
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.metrics["toy.doubled"] == 42.0


def _the_report_has_the_toys_section_and_claim(toy_project: Path) -> None:
    import json

    page = (toy_project / "data" / "08_reporting" / "latest" / "report.html").read_text(encoding="utf-8")
    assert "<section id='toy' class='experiment'>" in page
    assert "A toy experiment" in page and "Is twice the value above it?" in page
    assert "The doubled value 42.00 is above the value 21.00." in page  # its claim, shown in its section
    (claims_file,) = (toy_project / "data" / "08_reporting").glob("run_claims.json/*/run_claims.json")
    claims = {c["id"]: c for c in json.loads(claims_file.read_text())["claims"]}
    assert claims["toy.doubled_above_value"]["margin"] == 21.0
