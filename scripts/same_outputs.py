"""Do two commits make the same outputs and MLflow record? (issue 40: "nothing moves but the code").

    python scripts/same_outputs.py BEFORE AFTER [--env test] [--workdir /tmp/same-outputs]
    python scripts/same_outputs.py --folders BEFORE_PROJECT AFTER_PROJECT   # two finished runs (e.g. default runs)

For each git revision: a worktree of it, a project folder (its ``conf/``, ``pyproject.toml``, an empty MLflow
store), one ``kedro run --env <env> --runner SequentialRunner`` with that revision's ``src/`` first on
``PYTHONPATH``; then the two runs are compared:

- every saved catalog file (version folders dropped from the path): the same set; tables (parquet) equal as
  data frames, JSON equal as values, text and images byte for byte — except the outputs that record when and by
  which commit they were made (``report.html``, ``run_claims``, ``run_timings`` and the activation provenance
  columns), whose differences are listed apart, and table columns of wall time (``seconds``, ``train_seconds``);
- the MLflow run: the same metric keys, each value equal (timing and memory metrics listed apart), the same
  parameters and the same artifact paths.

Prints one line per difference and a summary; exits 1 when anything but the expected run-specific items differs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
VERSION = re.compile(r"/\d{4}-\d{2}-\d{2}T\d{2}\.\d{2}\.\d{2}\.\d{3}Z/")
RUN_SPECIFIC = ("report.html", "run_claims", "run_timings", "kedro_pipeline_events")  # commit / time inside
TIMING = re.compile(r"seconds|_s$|time|peak_rss", re.IGNORECASE)  # wall time and memory of this run


def run_at(revision: str, folder: Path, env: str) -> Path:
    """A project folder with one finished run of ``revision``."""
    tree, project = folder / "tree", folder / "project"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(tree), revision],
        check=True,
        capture_output=True,
    )
    project.mkdir()
    for name in ("pyproject.toml", ".telemetry"):
        if (tree / name).exists():
            shutil.copy(tree / name, project / name)
    shutil.copytree(tree / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    (project / "src").mkdir()
    environment = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1", "KEDRO_DISABLE_TELEMETRY": "1"}
    print(f"{revision}: kedro run --env {env} in {project}", flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--env", env, "--runner", "SequentialRunner"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
    )
    (folder / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode:
        raise SystemExit(f"{revision}: the run failed; see {folder / 'run.log'}")
    return project


def saved_files(project: Path) -> dict[str, Path]:
    return {
        VERSION.sub("/", "/" + str(path.relative_to(project / "data"))).lstrip("/"): path
        for path in sorted((project / "data").rglob("*"))
        if path.is_file()
    }


def same_file(a: Path, b: Path) -> bool:
    if a.suffix == ".parquet":
        left, right = pd.read_parquet(a), pd.read_parquet(b)
        provenance = [c for c in left.columns if c.startswith(("activations_version", "spec_")) or TIMING.search(c)]
        try:
            pd.testing.assert_frame_equal(
                left.drop(columns=provenance), right.drop(columns=provenance, errors="ignore")
            )
        except AssertionError:
            return False
        return True
    if a.suffix == ".json":
        return json.loads(a.read_text()) == json.loads(b.read_text())
    return a.read_bytes() == b.read_bytes()


def mlflow_record(project: Path) -> tuple[dict[str, float], dict[str, str], list[str]]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "thinkalike"]
    (run,) = client.search_runs([experiment.experiment_id])

    def artifacts(path: str | None = None) -> list[str]:
        found = []
        for item in client.list_artifacts(run.info.run_id, path):
            found.extend(artifacts(item.path) if item.is_dir else [item.path])
        return found

    return dict(run.data.metrics), dict(run.data.params), sorted(artifacts())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--env", default="test")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/same-outputs"))
    parser.add_argument(
        "--folders",
        action="store_true",
        help="BEFORE and AFTER are project folders that each hold one finished run: compare them",
    )
    args = parser.parse_args()
    if args.folders:
        raise SystemExit(compare([Path(args.before), Path(args.after)], f"{args.before} -> {args.after}"))
    shutil.rmtree(args.workdir, ignore_errors=True)
    projects = [
        run_at(revision, args.workdir / label, args.env)
        for label, revision in (("before", args.before), ("after", args.after))
    ]
    status = compare(projects, f"{args.before} -> {args.after}, env {args.env}")
    for project in projects:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(project.parent / "tree")], capture_output=True
        )
    raise SystemExit(status)


def compare(projects: list[Path], label: str) -> int:
    """Prints the differences of two finished project folders' outputs and MLflow records; 1 when any is not
    run-specific, else 0."""
    problems, expected = [], []
    files = [saved_files(project) for project in projects]
    for name in sorted(set(files[0]) ^ set(files[1])):
        problems.append(f"file only {'before' if name in files[0] else 'after'}: {name}")
    for name in sorted(set(files[0]) & set(files[1])):
        if not same_file(files[0][name], files[1][name]):
            (expected if any(part in name for part in RUN_SPECIFIC) else problems).append(f"file differs: {name}")
    (metrics_a, params_a, artifacts_a), (metrics_b, params_b, artifacts_b) = map(mlflow_record, projects)
    for key in sorted(set(metrics_a) ^ set(metrics_b)):
        problems.append(f"metric only {'before' if key in metrics_a else 'after'}: {key}")
    for key in sorted(set(metrics_a) & set(metrics_b)):
        if metrics_a[key] != metrics_b[key]:
            (expected if TIMING.search(key) else problems).append(
                f"metric differs: {key} {metrics_a[key]!r} -> {metrics_b[key]!r}"
            )
    for key in sorted(set(params_a) | set(params_b)):
        if params_a.get(key) != params_b.get(key):
            problems.append(f"parameter differs: {key} {params_a.get(key)!r} -> {params_b.get(key)!r}")
    for path in sorted(set(artifacts_a) ^ set(artifacts_b)):
        problems.append(f"artifact only {'before' if path in artifacts_a else 'after'}: {path}")
    for line in problems:
        print("DIFFERENT", line)
    for line in expected:
        print("run-specific", line)
    print(
        f"{len(files[1])} files, {len(metrics_b)} metrics, {len(params_b)} parameters, {len(artifacts_b)} artifacts; "
        f"{len(problems)} differences, {len(expected)} run-specific ({label})"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    main()
