"""``python -m thinkalike.replicates``: the default run's experiments over k independent replicates, and the
papers' questions decided on them by the analysis plan (conf/base/analysis_plan.yml).

Replicate ``r`` is ``kedro run --env replicates --params replicate=<r>`` (every seed but the data's moved by ``r ×
1000``: :mod:`thinkalike.replicate_seeds`; replicate 0 is the default run) in its own project folder
``<workdir>/replicate-<r>`` (``pyproject.toml`` and ``conf/`` copied, its own ``data/``; MLflow runs go to this
project's store, each tagged with its ``replicate`` parameter and, as the ``replicates`` summary run, with the
work directory: ``thinkalike.replicate_group``). k is ``replicates.count`` of the environment
(``conf/replicates``: 3), or ``--count``. Replicates are independent: ``--parallel N`` runs N at once (default 1 —
each run's DaskRunner already keeps every core busy, so on a small machine running them side by side only shares
the same cores). A replicate that finished before (its ``replicate.json``) is read again, not rerun, unless
``--rerun``; a replicate that stopped part-way resumes with ``--only-missing-outputs`` (nothing saved is lost).

Then the findings of every replicate are collected from its saved outputs into ``docs/findings.json`` (``--repo``):
each replicate's numbers and the scorecard, every question's parts decided over the replicates by the plan's rule
(:mod:`thinkalike.reports.findings.scorecard`, :mod:`thinkalike.analysis.rule`); ``--write`` also rewrites the
region of ``docs/findings.md``. An MLflow run named ``replicates`` gets the scorecard's verdicts. An environment whose
``replicates.column`` is ``real`` or ``real_nli`` answers the scorecard's real-model column instead
(:mod:`thinkalike.findings_cli`).

``--roundoff`` also runs a *round-off run*: replicate 0's seeds again with another CPU's float kernels
(:func:`other_kernels`), in ``<workdir>/roundoff``, compared with replicate 0 but not counted as a replicate (its seeds
are no new draw). Thread counts are no such stand-in (torch splits its CPU GEMMs over rows, not over the sums, so
a training loop at 1 and 2 threads gives bit-identical weights); other kernels are:
``ATEN_CPU_CAPABILITY=avx2`` (torch's own vectorised kernels for an AVX2 machine instead of AVX-512) with
``MKL_CBWR=COMPATIBLE`` (MKL's GEMMs in their portable code path) — what a run on another x86 CPU gets.
``--set-env KEY=VALUE`` (repeatable) sets an environment variable for every run.

    python -m thinkalike.replicates --write                 # k seed replicates: about k default runs
    python -m thinkalike.findings_cli --replicates data/replicates --roundoff data/replicates/roundoff \
        --write                                             # the docs again, from the saved outputs
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from thinkalike.provenance import RUN_RECORD, git_state, run_record, write_text_atomically

logger = logging.getLogger(__name__)

ENV = "replicates"
DEFAULT_WORKDIR = Path("data/replicates")
RUNNER = "thinkalike.runners.DaskRunner"
#: Where each environment's run time is stated (said before the replicates start).
COST_SAID = {
    ENV: "README: about 9–10 min on 2 cores",
    "real": "docs/real-models.md: about 5 min idle, 10–13 min beside other work, on 2 cores",
    "real_nli": "docs/real-models.md: about 20 min on 2 idle cores",
}
ROUNDOFF = "roundoff"  # the round-off replicate's folder under the work directory


def replicate_count(project: Path, env: str) -> int:
    """``replicates.count`` of the environment's parameters (a ``ValueError`` naming it when it is not a positive
    integer)."""
    from thinkalike.pipelines.parameters import configured_parameters

    count = (configured_parameters(project, env).get("replicates") or {}).get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"replicates.count (conf/{env}): expected a positive integer, got {count!r}")
    return count


def replicate_pipelines(project: Path, env: str) -> list[str]:
    """``replicates.pipelines`` of the environment's parameters: the pipelines each replicate runs (empty: every
    one, Kedro's default); a ``ValueError`` naming it when it is not a list of names."""
    from thinkalike.pipelines.parameters import configured_parameters

    names = (configured_parameters(project, env).get("replicates") or {}).get("pipelines") or []
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"replicates.pipelines (conf/{env}): expected a list of pipeline names, got {names!r}")
    return names


def replicate_folder(workdir: Path, replicate: int) -> Path:
    return workdir / f"replicate-{replicate}"


def prepare_project(project: Path, folder: Path) -> Path:
    """``folder`` as a project of its own: ``pyproject.toml`` and ``conf/`` (without ``conf/local``) copied fresh
    from ``project`` (its saved ``data/`` kept), and ``conf/local/mlflow.yml`` sending its MLflow runs to
    ``project``'s store."""
    from thinkalike.run_record.tracking import anchored_tracking_uri, tracking_settings

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(project / "pyproject.toml", folder / "pyproject.toml")
    if (project / ".telemetry").exists():
        shutil.copy(project / ".telemetry", folder / ".telemetry")
    shutil.rmtree(folder / "conf", ignore_errors=True)
    shutil.copytree(project / "conf", folder / "conf", ignore=shutil.ignore_patterns("local"))
    (folder / "conf" / "local").mkdir()
    (folder / "src").mkdir(exist_ok=True)  # the package is the installed one
    base = yaml.safe_load((project / "conf" / "base" / "mlflow.yml").read_text()) or {}
    settings = tracking_settings(base)
    mlflow = {**base.get("mlflow", {}), "tracking_uri": anchored_tracking_uri(settings.tracking_uri, project)}
    (folder / "conf" / "local" / "mlflow.yml").write_text(yaml.safe_dump({"mlflow": mlflow}, sort_keys=False))
    return folder


def kedro_command(env: str, replicate: int, resume: bool, pipelines: Sequence[str] = ()) -> list[str]:
    """The replicate's ``kedro run`` (``pipelines``: its ``--pipelines``; empty: every one)."""
    script = Path(sys.executable).with_name("kedro")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "kedro"]
    command += ["run", "--env", env, "--runner", RUNNER, "--params", f"replicate={replicate}"]
    command += ["--pipelines", ",".join(pipelines)] if pipelines else []
    return command + (["--only-missing-outputs"] if resume else [])


def run_replicate(
    project: Path,
    workdir: Path,
    env: str,
    replicate: int,
    extra_environment: dict[str, str],
    folder: Path | None = None,
) -> dict[str, Any]:
    """One replicate's ``kedro run`` in its folder (``folder``, default ``workdir/replicate-<r>``; log: ``run.log``
    there); its record, also saved as ``replicate.json`` when it succeeded."""

    folder = folder or replicate_folder(workdir, replicate)
    resume = (folder / "data").exists()
    prepare_project(project, folder)
    command = kedro_command(env, replicate, resume, replicate_pipelines(project, env))
    from thinkalike.run_record.tracking import REPLICATE_GROUP_VARIABLE

    # the tag that links the replicates' MLflow runs with each other and with the summary run ``replicates``
    group = {REPLICATE_GROUP_VARIABLE: str(Path(workdir).resolve())}
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", **group, **extra_environment}
    settings = " ".join(f"{key}={value}" for key, value in extra_environment.items())
    logger.info(
        "replicate %d: %s in %s%s (log: %s)",
        replicate,
        "resuming" if resume else "running",
        folder,
        f" with {settings}" if settings else "",
        folder / "run.log",
    )
    started = time.perf_counter()
    with open(folder / "run.log", "a") as log:
        returncode = subprocess.run(
            command, cwd=folder, env=environment, stdout=log, stderr=subprocess.STDOUT
        ).returncode
    record = {
        "replicate": replicate,
        "returncode": returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "finished_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command[1:],
        "environment": extra_environment,
        **git_state(project),
    }
    if returncode == 0:
        write_text_atomically(folder / RUN_RECORD, json.dumps(record, indent=1) + "\n")
    logger.info(
        "replicate %d: %s after %.0f s",
        replicate,
        "done" if returncode == 0 else f"failed ({returncode})",
        record["seconds"],
    )
    return record


def run_replicates(
    project: Path,
    workdir: Path,
    env: str,
    count: int,
    parallel: int,
    extra_environment: dict[str, str],
    rerun: bool,
    first: int = 0,
) -> list[dict[str, Any]]:
    """Replicates ``first`` … ``first + count − 1`` (those finished before reused unless ``rerun``), ``parallel`` at
    a time. The analysis plan's deciding replicates start past its pilot's (conf/base/analysis_plan.yml:
    ``deciding.first_replicate``)."""
    records: dict[int, dict[str, Any]] = {}
    todo = []
    numbers = range(first, first + count)
    for replicate in numbers:
        folder = replicate_folder(workdir, replicate)
        done = None if rerun else run_record(folder)
        if done is not None:
            logger.info(
                "replicate %d: finished before (%s, commit %s): read again, not rerun (--rerun runs it)",
                replicate,
                done.get("finished_at"),
                str(done.get("git_commit"))[:12],
            )
            records[replicate] = done
        else:
            if rerun and folder.exists():
                shutil.rmtree(folder / "data", ignore_errors=True)
                (folder / RUN_RECORD).unlink(missing_ok=True)
            todo.append(replicate)
    if todo:
        logger.info(
            "running %d replicate(s) of conf/%s, %d at a time: each takes about as long as one `kedro run --env %s` "
            "(%s)",
            len(todo),
            env,
            parallel,
            env,
            COST_SAID.get(env, "its run time is not measured here"),
        )
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        for record in pool.map(lambda r: run_replicate(project, workdir, env, r, extra_environment), todo):
            records[record["replicate"]] = record
    return [records[r] for r in numbers]


def other_kernels(capability: str | None = None) -> dict[str, str]:
    """The environment that makes this machine compute with another CPU's float kernels: torch's AVX2 kernels where it
    runs AVX-512 (``capability``: torch's, by default), else its portable ones; MKL's GEMMs in their compatible path."""
    if capability is None:
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
    return {"ATEN_CPU_CAPABILITY": "avx2" if capability == "AVX512" else "default", "MKL_CBWR": "COMPATIBLE"}


def run_roundoff(
    project: Path, workdir: Path, env: str, extra_environment: dict[str, str], rerun: bool
) -> dict[str, Any]:
    """The round-off replicate (module docstring) in ``workdir/roundoff``: reused when it finished before."""
    folder = workdir / ROUNDOFF
    done = None if rerun else run_record(folder)
    if done is not None:
        logger.info("round-off replicate: finished before (%s): read again, not rerun", done.get("finished_at"))
        return done
    if rerun:
        shutil.rmtree(folder / "data", ignore_errors=True)
    return run_replicate(project, workdir, env, 0, {**other_kernels(), **extra_environment}, folder=folder)


def environment_settings(pairs: Sequence[str]) -> dict[str, str]:
    """``["KEY=VALUE", …]`` as a dict; a ``ValueError`` naming the first that is not ``KEY=VALUE``."""
    settings = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip() or not key.replace("_", "").isalnum():
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m thinkalike.replicates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="the Kedro project (default: cwd)")
    parser.add_argument("--env", default=ENV, help=f"configuration environment (default: {ENV})")
    parser.add_argument("--count", type=int, help="replicates (default: replicates.count of the environment)")
    parser.add_argument(
        "--first",
        type=int,
        default=0,
        help="the first replicate's number (default 0, the default run's seeds; the plan's deciding ones: deciding.first_replicate of conf/base/analysis_plan.yml)",
    )
    parser.add_argument("--workdir", type=Path, help=f"where the replicates' projects go (default: {DEFAULT_WORKDIR})")
    parser.add_argument("--parallel", type=int, default=1, help="replicates run at once (default 1)")
    parser.add_argument(
        "--set-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the runs (repeatable; a round-off replicate)",
    )
    parser.add_argument(
        "--roundoff",
        action="store_true",
        help="also run replicate 0 with another CPU's float kernels and compare it (not a replicate)",
    )
    parser.add_argument("--rerun", action="store_true", help="run replicates that finished before again")
    parser.add_argument("--repo", type=Path, help="where docs/findings.json and README.md are (default: the project)")
    parser.add_argument("--write", action="store_true", help="also replace the README's findings region")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    project = args.project.resolve()
    if args.parallel < 1:
        print(f"error: --parallel: expected a positive integer, got {args.parallel}", file=sys.stderr)
        return 2
    try:
        extra_environment = environment_settings(args.set_env)
    except ValueError as error:
        print(f"error: --set-env: {error}", file=sys.stderr)
        return 2
    try:
        count = args.count if args.count is not None else replicate_count(project, args.env)
        if count < 1:
            raise ValueError(f"--count: expected a positive integer, got {count}")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    workdir = (args.workdir or project / DEFAULT_WORKDIR).resolve()
    if args.first < 0:
        print(f"error: --first: expected a replicate number ≥ 0, got {args.first}", file=sys.stderr)
        return 2
    records = run_replicates(
        project, workdir, args.env, count, args.parallel, extra_environment, args.rerun, first=args.first
    )
    failed = [str(replicate_folder(workdir, r["replicate"]) / "run.log") for r in records if r.get("returncode") != 0]
    if args.roundoff:
        roundoff = run_roundoff(project, workdir, args.env, extra_environment, args.rerun)
        if roundoff.get("returncode") != 0:
            failed.append(str(workdir / ROUNDOFF / "run.log"))
    if failed:
        print(f"error: {len(failed)} run(s) failed; their logs: " + ", ".join(failed), file=sys.stderr)
        return 1
    from thinkalike.findings_cli import write_replicate_findings

    command = (
        "python -m thinkalike.replicates"
        + (f" --first {args.first} --count {count}" if args.first else "")
        + (" --roundoff" if args.roundoff else "")
        + (" --write" if args.write else "")
    )
    return write_replicate_findings(
        [replicate_folder(workdir, r["replicate"]) for r in records],
        args.env,
        (args.repo or project).resolve(),
        args.write,
        records=records,
        roundoff=workdir / ROUNDOFF if args.roundoff else None,
        command=command,
    )


if __name__ == "__main__":
    sys.exit(main())
