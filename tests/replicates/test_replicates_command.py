"""``python -m thinkalike.replicates`` and ``findings_cli --replicates``: each replicate in its own project folder
with this project's MLflow store, finished replicates read again rather than rerun, and the findings of several
replicates merged into claims (without running: the tiny project's saved outputs stand in for replicates)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from thinkalike.provenance import run_record
from thinkalike.replicates import (
    environment_settings,
    kedro_command,
    main,
    other_kernels,
    prepare_project,
    run_replicates,
    run_roundoff,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_replicate_folder_is_a_project_whose_mlflow_runs_go_to_this_projects_store(tmp_path):
    folder = prepare_project(ROOT, tmp_path / "replicate-1")
    assert (folder / "pyproject.toml").exists() and (folder / "conf" / "base" / "catalog.yml").exists()
    mlflow = yaml.safe_load((folder / "conf" / "local" / "mlflow.yml").read_text())["mlflow"]
    assert mlflow["tracking_uri"] == f"sqlite:///{ROOT / 'mlflow.db'}" and mlflow["experiment"] == "thinkalike"
    command = kedro_command("replicates", 1, resume=False)
    assert (
        command[-6:]
        == ["--env", "replicates", "--runner", "thinkalike.runners.DaskRunner", "--params", "replicate=1"][-6:]
    )
    assert kedro_command("replicates", 1, resume=True)[-1] == "--only-missing-outputs"


def test_finished_replicates_are_read_again_not_rerun(tmp_path, caplog):
    workdir = tmp_path / "replicates"
    for replicate in range(2):
        (workdir / f"replicate-{replicate}").mkdir(parents=True)
        (workdir / f"replicate-{replicate}" / "replicate.json").write_text(
            json.dumps({"replicate": replicate, "returncode": 0, "seconds": 600.0 + replicate})
        )
    with caplog.at_level("INFO"):
        records = run_replicates(ROOT, workdir, "replicates", 2, 1, {}, rerun=False)
    assert [r["seconds"] for r in records] == [600.0, 601.0]
    assert "read again, not rerun" in caplog.text
    assert run_record(workdir / "replicate-0")["replicate"] == 0 and run_record(tmp_path) is None


def test_bad_settings_are_one_line_errors_before_any_run(tmp_path, capsys):
    assert environment_settings(["A=1", "MKL_CBWR=COMPATIBLE"]) == {"A": "1", "MKL_CBWR": "COMPATIBLE"}
    with pytest.raises(ValueError, match="expected KEY=VALUE, got 'oops'"):
        environment_settings(["oops"])
    assert main(["--project", str(ROOT), "--set-env", "oops", "--workdir", str(tmp_path)]) == 2
    assert main(["--project", str(ROOT), "--count", "0", "--workdir", str(tmp_path)]) == 2
    assert main(["--project", str(ROOT), "--parallel", "0", "--workdir", str(tmp_path)]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == [
        "error: --set-env: expected KEY=VALUE, got 'oops'",
        "error: --count: expected a positive integer, got 0",
        "error: --parallel: expected a positive integer, got 0",
    ]
    assert not list(tmp_path.iterdir())  # nothing started


def test_the_replicates_claims_status_goes_to_an_mlflow_run(tmp_path):
    from mlflow import MlflowClient

    from thinkalike.findings_cli import log_claim_status

    (tmp_path / "conf" / "base").mkdir(parents=True)
    (tmp_path / "conf" / "base" / "mlflow.yml").write_text(
        "mlflow: {tracking_uri: 'sqlite:///mlflow.db', experiment: thinkalike}\n"
    )
    document = {
        "git_commit": "abc",
        "replicates": [{}, {}, {}],
        "claims": [
            {"id": "cka.a", "status": "holds", "margin": [0.2, 0.1, 0.3]},
            {"id": "nli.b", "status": "mixed", "margin": [0.2, -0.1, None]},
        ],
    }
    log_claim_status(document, tmp_path, "/work/data/replicates")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("thinkalike").experiment_id])
    assert len(runs) == 1 and runs[0].info.run_name == "replicates" and runs[0].data.tags["replicates"] == "3"
    assert runs[0].data.tags["thinkalike.replicate_group"] == "/work/data/replicates"  # the replicates' runs' tag
    assert runs[0].data.metrics == {"holds/cka.a": 1.0, "claims/cka.a": 0.1, "holds/nli.b": 0.0, "claims/nli.b": -0.1}


def test_the_round_off_replicate_uses_another_cpus_kernels_and_is_reused_once_finished(tmp_path):
    assert other_kernels("AVX512") == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"}
    assert other_kernels("AVX2")["ATEN_CPU_CAPABILITY"] == "default"  # never the machine's own kernels
    (tmp_path / "roundoff").mkdir()
    (tmp_path / "roundoff" / "replicate.json").write_text(
        json.dumps({"replicate": 0, "returncode": 0, "environment": other_kernels("AVX512")})
    )
    assert run_roundoff(ROOT, tmp_path, "replicates", {}, rerun=False)["environment"]["MKL_CBWR"] == "COMPATIBLE"
