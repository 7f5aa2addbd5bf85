"""``python -m thinkalike.findings_cli``: the project's findings — claims with their margins — from saved
outputs (the documentation page ``docs/findings.md``).

* ``--replicates DIR [--roundoff DIR2] [--write]``: every replicate project ``DIR/replicate-<r>`` that
  ``python -m thinkalike.replicates`` ran (their latest saved outputs; ``--env``: the environment they ran with,
  default ``replicates``) → ``docs/findings.json`` under ``--repo``: each replicate's collected numbers
  (:func:`~thinkalike.reports.findings.collect_findings`) and the merged claims (one margin per replicate, a status),
  with the commit, date, machine and command; ``--roundoff DIR2`` adds what a run of DIR2 (replicate 0's seeds, other
  float round-off: ``--set-env ATEN_CPU_CAPABILITY=avx2 --set-env MKL_CBWR=COMPATIBLE``) moves against replicate 0 —
  a comparison, not a replicate (same seeds: no new draw). ``--write`` also replaces the region between the markers
  of the findings page ``docs/findings.md`` with :func:`~thinkalike.reports.findings.render_document`. An MLflow run
  named ``replicates`` gets each proposition's smallest margin (``claims/<id>``) and status (``holds/<id>``).
* ``--claims``: prints ``{"claims": [...]}`` as pure JSON on stdout (logs go to stderr) — every claim of the
  project's (``--project``) latest run with its margin and quoted numbers.
* ``--check``: checks that run against the repository's ``docs/findings.json``: each scorecard part's estimate
  within its prediction interval from the committed replicates (:mod:`thinkalike.analysis.prediction`); prints
  what moved (``--json``: every row as JSON) and exits 1 when anything did.
* ``--render``: makes the scorecard and the claims again from the replicates' numbers saved in the repository's
  ``docs/findings.json`` (rewriting its ``scorecard`` and ``claims``) and rewrites the findings page's region from
  them (collects and runs nothing): after the claims or the renderer changed.
* None of these: one project's latest run as a one-replicate document (as before replicates).

Each section's numbers are the ones its pipeline saved (``<section>_findings``, :func:`saved_sections`); only
outputs older than those datasets, and the run timings, are collected here. A table never saved (its pipeline was
not run) is left out, and its section says so.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from thinkalike.analysis import prediction
from thinkalike.analysis.plan import PLAN_PATH
from thinkalike.provenance import file_at_commit, git_state, run_record, write_text_atomically
from thinkalike.reports.experiments import ReportOutline, estimates_dataset, findings_dataset
from thinkalike.reports.findings import (
    END_MARKER,
    START_MARKER,
    claims_of,
    collect_errors,
    collect_findings,
    findings_document,
    missing_tables,
    rederived,
    render_document,
    replace_region,
    roundoff_comparison,
    source_digest,
)
from thinkalike.reports.findings.claims import HOLDS, single_run
from thinkalike.reports.findings.scorecard import committed_effects, run_estimates, verdict_metrics

logger = logging.getLogger(__name__)

FINDINGS_JSON = Path("docs/findings.json")
#: The documentation page whose region between the markers holds the rendered findings (was README.md's region).
FINDINGS_PAGE = Path("docs/findings.md")
#: A findings page made from nothing (no page yet): a title and the markers; the prose around them is hand-written.
NEW_PAGE = "# Findings\n\n{block}\n"


def project_outline() -> ReportOutline:
    """The project's report outline: its pipelines' sections (:func:`thinkalike.pipelines.specs.report_outline`),
    which say what is read, collected and claimed."""
    from thinkalike.pipelines.specs import report_outline  # the pipelines declare the sections: imported when used

    return report_outline()


def open_catalog(
    project: Path, env: str | None = None, runtime_params: dict[str, Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """The project's catalog and parameters (no run: the session only loads the context)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(project)
    session = KedroSession.create(project_path=project, env=env, runtime_params=runtime_params)
    with session:  # (its __enter__ is typed as returning AbstractSession, which has no load_context)
        context = session.load_context()
        return context.catalog, dict(context.params)


def _load(catalog: Any, name: str) -> Any | None:
    from kedro.io import DatasetError

    try:
        return catalog.load(name)
    except DatasetError as error:  # never saved (its pipeline did not run) or not in the catalog
        logger.info("findings: %s not loaded (%s)", name, str(error).splitlines()[0])
        return None


def load_tables(catalog: Any, parameters: dict[str, Any]) -> dict[str, Any]:
    """The latest version of every table :func:`collect_findings` reads, every zoo model's saved config
    (``model_configs``) and the parameters; tables that were never saved are left out."""
    tables: dict[str, Any] = {"parameters": parameters}
    for name in project_outline().tables:
        value = _load(catalog, name)
        if value is not None:
            tables[name] = value
    summary = tables.get("zoo_summary")
    models = list(summary["model"]) if summary is not None else list((parameters.get("zoo") or {}).get("models") or {})
    configs = {
        str(model): config for model in models if (config := _load(catalog, f"models.{model}.model_config")) is not None
    }
    tables["model_configs"] = configs
    return tables


#: Where the run timings are saved, one folder per run (conf/base/catalog.yml's ``run_timings``, versioned).
RUN_TIMINGS = Path("data/08_reporting/run_timings.parquet")


def fullest_run_timings(project: Path) -> Any | None:
    """The saved run timings of the project's run that timed the most pipelines (the newest among equals), or
    ``None`` without any: a later partial run (``--pipelines embedding``, to add an output) saves timings of its
    own pipelines only, and the findings quote the whole run's."""
    import pandas as pd

    versions = sorted((project / RUN_TIMINGS).glob(f"*/{RUN_TIMINGS.name}"))
    tables = [pd.read_parquet(path) for path in versions]
    if not tables:
        return None
    return max(reversed(tables), key=lambda table: table["pipeline"].nunique() if "pipeline" in table else 0)


def project_findings(project: Path, env: str | None, replicate: int | None = None) -> dict[str, Any]:
    """The findings of a project's latest saved outputs (``replicate``: the ``--params replicate=<r>`` it ran with);
    the run timings of its fullest run (:func:`fullest_run_timings`)."""
    runtime = None if replicate is None else {"replicate": replicate}
    catalog, parameters = open_catalog(project, env, runtime)
    tables = load_tables(catalog, parameters)
    timings = fullest_run_timings(project)
    if timings is not None:
        tables["run_timings"] = timings
    return collect_findings(tables, project_outline(), saved_sections(catalog))


def saved_sections(catalog: Any) -> dict[str, Any]:
    """The latest saved numbers of every section its pipeline saves
    (:func:`~thinkalike.reports.experiments.findings_dataset`); a section never saved (outputs older than those
    datasets, or its pipeline never ran) is left out, so :func:`collect_findings` collects it from the tables and
    the log says so."""
    saved = {}
    for section in project_outline().saved_sections:
        value = _load(catalog, findings_dataset(section.section))
        if value is not None:
            saved[section.section] = value
        else:
            logger.info(
                "findings: %s collected from its tables (no saved %s)",
                section.section,
                findings_dataset(section.section),
            )
    return saved


def saved_estimates(catalog: Any) -> dict[str, float] | None:
    """The run's estimates as its method pipelines saved them (``<section>_estimates``,
    :func:`~thinkalike.reports.experiments.estimates_dataset`), ``<row key>/<part>`` → estimate; None when a section
    whose numbers were saved has no saved estimates (outputs older than those datasets)."""
    estimates: dict[str, float] = {}
    for section in project_outline().saved_sections:
        if _load(catalog, findings_dataset(section.section)) is None:
            continue
        rows = _load(catalog, estimates_dataset(section.section))
        if rows is None:
            logger.info(
                "estimates: no saved %s; the estimates are made from the findings", estimates_dataset(section.section)
            )
            return None
        estimates |= {f"{row['question']}/{row['part']}": float(row["estimate"]) for row in rows}
    return estimates


def replicate_folders(workdir: Path) -> list[Path]:
    """Every ``workdir/replicate-<r>`` folder, by replicate number (the deciding replicates start past the
    pilot's, e.g. at 10)."""
    numbered = [
        (int(path.name.removeprefix("replicate-")), path)
        for path in workdir.glob("replicate-*")
        if path.is_dir() and path.name.removeprefix("replicate-").isdigit()
    ]
    return [path for _, path in sorted(numbered)]


def document_of(
    findings: list[dict[str, Any]], runs: list[dict[str, Any] | None], root: Path, command: str
) -> dict[str, Any]:
    """docs/findings.json's content: the replicates' findings and claims with the digest, the commit, when they were
    collected and the command that regenerates them. The real-model columns' replicates of the document already at
    ``root`` are kept (they are other draws, of other models), and ``analysis_plan.earlier`` names each plan that a
    replicate of the document (these or the kept ones) was run under and that is not the plan now
    (:func:`plans_run_under`)."""
    kept = {}
    source = root / FINDINGS_JSON
    if source.is_file():
        before = json.loads(source.read_text(encoding="utf-8"))
        kept = {key: before[key] for key in REPLICATES_KEY.values() if before.get(key)}
    made = findings_document(
        findings,
        project_outline(),
        runs,
        kept.get(REPLICATES_KEY[REAL_COLUMN]),
        with_claims=False,
        real_nli=kept.get(REPLICATES_KEY[REAL_NLI_COLUMN]),
    )
    run_by = [{"run": run} for run in runs] + [e for entries in kept.values() for e in entries]
    earlier = plans_run_under(run_by, root, made["analysis_plan"]["sha256"])
    if earlier:
        made["analysis_plan"] = {**made["analysis_plan"], "earlier": earlier}
    return {
        **made,
        "source_digest": source_digest(root),
        **git_state(root),
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
    }


def plans_run_under(entries: Sequence[dict[str, Any]], root: Path, now: str) -> list[dict[str, str]]:
    """The analysis plans (sha256 and commit, in order of first use) that the replicates ``entries`` were run under,
    read from git at each run's ``git_commit``, other than the plan ``now`` (its sha256); a commit git does not have
    is left out (its run record names it)."""
    seen: dict[str, dict[str, str]] = {}
    for entry in entries:
        commit = str((entry.get("run") or {}).get("git_commit") or "")
        text = file_at_commit(root, commit, PLAN_PATH) if commit else None
        digest = hashlib.sha256(text).hexdigest() if text is not None else None
        if digest and digest != now and digest not in seen:
            seen[digest] = {"git_commit": commit, "sha256": digest}
    return list(seen.values())


def log_claim_status(document: dict[str, Any], repo: Path, group: str | None = None) -> None:
    """An MLflow run ``replicates`` in the project's store: the scorecard's verdicts (``verdict/<row>``, only here: one
    run has none), each claim's smallest margin over the replicates
    (``claims/<id>``, beside a run's own margin when compared) and status (``holds/<id>``: 1 or 0), and the claims as
    an artifact; ``group``: the replicates' work directory, the tag the replicates' runs share
    (:data:`thinkalike.run_record.tracking.REPLICATE_GROUP_TAG`). A store that cannot be used is one log line, not a failure
    (the findings are written either way)."""
    try:
        import mlflow
        import yaml

        from thinkalike.run_record.tracking import REPLICATE_GROUP_TAG, anchored_tracking_uri, tracking_settings

        config = yaml.safe_load((repo / "conf" / "base" / "mlflow.yml").read_text())
        settings = tracking_settings(config)
        if not settings.enabled:
            return
        client = mlflow.MlflowClient(tracking_uri=anchored_tracking_uri(settings.tracking_uri, repo))
        experiment = client.get_experiment_by_name(settings.experiment)
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(settings.experiment)
        run = client.create_run(
            experiment_id,
            run_name="replicates",
            tags={
                "replicates": str(len(document["replicates"])),
                "git_commit": str(document.get("git_commit")),
                **({REPLICATE_GROUP_TAG: group} if group else {}),
            },
        )
        metrics = []
        for claim in document.get("claims") or []:
            margins = [m for m in claim["margin"] if m is not None]
            metrics.append(mlflow.entities.Metric(f"holds/{claim['id']}", float(claim["status"] == HOLDS), 0, 0))
            if margins:
                metrics.append(mlflow.entities.Metric(f"claims/{claim['id']}", float(min(margins)), 0, 0))
        for name, value in verdict_metrics(document.get("scorecard") or []).items():
            metrics.append(mlflow.entities.Metric(name, value, 0, 0))
        for start in range(0, len(metrics), 900):
            client.log_batch(run.info.run_id, metrics=metrics[start : start + 900])
        client.log_text(run.info.run_id, json.dumps(document["scorecard"], indent=1), "scorecard.json")
        client.set_terminated(run.info.run_id)
        logger.info("MLflow run %s (replicates): the scorecard's verdicts", run.info.run_id)
    except Exception as error:  # noqa: BLE001 — tracking is a convenience here; the JSON is the record
        logger.warning("claims' status not logged to MLflow: %s", str(error).splitlines()[0])


#: ``replicates.column`` of an environment whose replicates answer the scorecard's real-model column (conf/real).
REAL_COLUMN = "real"
#: ``replicates.column`` of conf/real_nli: its replicates answer the real-model column's NLI row.
REAL_NLI_COLUMN = "real_nli"
#: The key of docs/findings.json that holds each real column's replicates.
REPLICATES_KEY = {REAL_COLUMN: "real_replicates", REAL_NLI_COLUMN: "real_nli_replicates"}


def replicate_column(project: Path, env: str) -> str | None:
    """``replicates.column`` of the environment's parameters: ``real`` when its replicates answer the scorecard's
    real-model column of docs/findings.json (beside the default run's replicates) rather than make the document,
    ``real_nli`` when they answer that column's NLI row; None (the default) otherwise; a ``ValueError`` naming it for
    another value."""
    from thinkalike.pipelines.parameters import configured_parameters

    column = (configured_parameters(project, env).get("replicates") or {}).get("column")
    if column is not None and column not in REPLICATES_KEY:
        raise ValueError(
            f"replicates.column (conf/{env}): expected one of {list(REPLICATES_KEY)} or null, got {column!r}"
        )
    return column


def write_replicate_findings(
    folders: list[Path],
    env: str | None,
    repo: Path,
    write: bool,
    records: Sequence[dict[str, Any] | None] | None = None,
    roundoff: Path | None = None,
    command: str = "python -m thinkalike.replicates --write",
) -> int:
    """docs/findings.json (and with ``write`` the region of the page docs/findings.md) from the replicates in
    ``folders``; 0, or 1 when a section could not be collected (then the page is not written)."""
    column = replicate_column(repo, env) if env else None
    if column in REPLICATES_KEY and not (repo / FINDINGS_JSON).is_file():
        print(
            f"error: the real-model column needs {repo / FINDINGS_JSON} (the default replicates) first", file=sys.stderr
        )
        return 2
    findings = []
    for replicate, folder in enumerate(folders):
        logger.info("replicate %d: collecting the findings of %s", replicate, folder)
        findings.append(project_findings(folder, env, replicate))
    runs = list(records) if records is not None else [run_record(folder) for folder in folders]
    if column in REPLICATES_KEY:
        return write_real_column(findings, runs, repo, write, REPLICATES_KEY[column])
    comparison = None
    if roundoff is not None:  # a comparison, not a replicate: its seeds are replicate 0's, so it is no new draw
        logger.info("round-off run: collecting the findings of %s", roundoff)
        other = project_findings(roundoff, env, 0)
        record = {**(run_record(roundoff) or {}), "roundoff": True}
        setting = " ".join(f"{key}={value}" for key, value in (record.get("environment") or {}).items())
        comparison = roundoff_comparison(findings[0], other, setting or "another run", project_outline())
    document = document_of(findings, runs, repo, command)
    if comparison is not None:
        document["roundoff"] = comparison
    write_json(document, repo / FINDINGS_JSON)
    decided = sum(
        row["verdict_word"] not in ("inconclusive", "not testable", "one run") for row in document["scorecard"]
    )
    print(
        f"wrote {repo / FINDINGS_JSON}: {len(folders)} replicate(s), {len(document['scorecard'])} questions, {decided} "
        f"decided (commit {(document['git_commit'] or 'none')[:12]}{' + uncommitted changes' if document['git_dirty'] else ''})"
    )
    errors = [e for f in findings for e in collect_errors(f)]
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    missing = sorted({m for f in findings for m in missing_tables(f)})
    if missing:
        print("not in the outputs (their sections say so): " + ", ".join(missing), file=sys.stderr)
    if errors:
        print(f"{FINDINGS_PAGE} was not written: a table did not have what the findings need", file=sys.stderr)
        return 1
    log_claim_status(document, repo, str(folders[0].parent.resolve()) if folders else None)
    if write:
        changed = write_page(repo / FINDINGS_PAGE, render_document(document, project_outline()))
        print(f"{'updated' if changed else 'unchanged'}: {repo / FINDINGS_PAGE}")
    return 0


def write_real_column(
    findings: list[dict[str, Any]],
    runs: Sequence[dict[str, Any] | None],
    repo: Path,
    write: bool,
    key: str = REPLICATES_KEY[REAL_COLUMN],
) -> int:
    """The real checkpoints' replicates into docs/findings.json (``key``: ``real_replicates``, or
    ``real_nli_replicates`` for conf/real_nli's) and its scorecard's real-model column, the default replicates'
    findings kept as they are (and with ``write`` the page's region); 0, or 1 when a section could not be collected
    (nothing is written then)."""
    errors = [e for f in findings for e in collect_errors(f)]
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        print(f"{FINDINGS_JSON} was not written: a table did not have what the findings need", file=sys.stderr)
        return 1
    source = repo / FINDINGS_JSON
    entries = [
        {"replicate": (run or {}).get("replicate", index), "run": run, "findings": found}
        for index, (found, run) in enumerate(zip(findings, runs, strict=True))
    ]
    document = rederived({**json.loads(source.read_text(encoding="utf-8")), key: entries}, project_outline())
    write_json(document, source)
    answered = sum(row["real"]["verdict_word"] != "not testable" for row in document["scorecard"])
    print(f"wrote {source}: the scorecard's real-model column from {len(entries)} replicate(s), {answered} rows asked")
    if write:
        changed = write_page(repo / FINDINGS_PAGE, render_document(document, project_outline()))
        print(f"{'updated' if changed else 'unchanged'}: {repo / FINDINGS_PAGE}")
    return 0


def write_json(document: dict[str, Any], path: Path) -> None:
    write_text_atomically(
        path, json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    )


def write_page(path: Path, rendered: str) -> bool:
    """Replaces the region between the markers of the findings page (one quick read-modify-write; a page that does
    not exist yet is made with a title and the markers); whether the file changed."""
    text = path.read_text(encoding="utf-8") if path.exists() else None
    updated = (
        replace_region(text, rendered)
        if text is not None
        else NEW_PAGE.format(block=f"{START_MARKER}\n{rendered}{END_MARKER}")
    )
    if updated != text:
        write_text_atomically(path, updated)
    return updated != text


def render_page(repo: Path) -> int:
    """``--render``: the findings page's region from ``repo``'s docs/findings.json alone; 0, or 2 without the JSON."""
    source = repo / FINDINGS_JSON
    if not source.is_file():
        print(f"error: --render: no {source} (--replicates … --write makes it)", file=sys.stderr)
        return 2
    document = rederived(json.loads(source.read_text(encoding="utf-8")), project_outline())
    write_json(document, source)
    changed = write_page(repo / FINDINGS_PAGE, render_document(document, project_outline()))
    print(f"{'updated' if changed else 'unchanged'}: {repo / FINDINGS_PAGE} (from {source})")
    return 0


def claims_and_check(project: Path, repo: Path, env: str | None, claims: bool, check: bool, as_json: bool) -> int:
    """``--claims`` / ``--check``: the latest run's claims as pure JSON on stdout (every log line of the collection,
    Kedro's included, goes to stderr), and/or its check against the committed findings: each scorecard part's
    estimate of this run within its prediction interval from the committed replicates' effects
    (:mod:`thinkalike.analysis.prediction`: Bonferroni over the K parts checked, so an honest rerun fails with
    probability ≤ 5 %); a short table of what moved (on stderr when the claims JSON has stdout; as JSON on stdout with
    ``--json``); 1 when a number moved out of its interval, 2 without docs/findings.json."""
    source = repo / FINDINGS_JSON
    if check and not source.is_file():
        print(f"error: --check: no {source} to check against", file=sys.stderr)
        return 2
    with contextlib.redirect_stdout(sys.stderr):  # Kedro's console handler binds to sys.stdout when it is configured
        findings = project_findings(project, env)
        estimates = saved_estimates(open_catalog(project, env)[0]) if check else None
    if claims:
        run = single_run(claims_of(findings, project_outline()))
        print(json.dumps({"claims": run}, indent=1, ensure_ascii=False, allow_nan=False))
    if not check:
        return 0
    committed, resolutions = committed_effects(json.loads(source.read_text(encoding="utf-8"))["scorecard"])
    rows = prediction.check(committed, estimates if estimates is not None else run_estimates(findings), resolutions)
    moved = [row for row in rows if row.moved]
    if as_json and not claims:
        print(json.dumps({"checked": [vars(row) for row in rows]}, indent=1, ensure_ascii=False, allow_nan=False))
    else:
        lines = [f"checked {len(rows)} scorecard estimates against docs/findings.json's replicates: {len(moved)} moved"]
        lines += [f"  {r.name}: {r.value:+.6g}, expected {r.mean:+.6g} ± {r.half_width:.3g}" for r in moved]
        print("\n".join(lines), file=sys.stderr if claims else sys.stdout)
    return 1 if moved else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m thinkalike.findings_cli", description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="the Kedro project (default: cwd)")
    parser.add_argument(
        "--env",
        default=None,
        help="configuration environment of the run(s) (default: Kedro's; with --replicates: replicates)",
    )
    parser.add_argument(
        "--repo",
        type=Path,
        default=None,
        help="the git work tree whose docs/findings.json and docs/findings.md are written (default: the project)",
    )
    parser.add_argument("--replicates", type=Path, help="the folder of the replicates' projects (data/replicates)")
    parser.add_argument("--roundoff", type=Path, help="a replicate-0 project with other round-off, to compare")
    parser.add_argument("--claims", action="store_true", help="print the latest run's claims as JSON")
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the latest run's findings, margins and quoted numbers against docs/findings.json (exit 1 if any moved)",
    )
    parser.add_argument("--json", action="store_true", help="with --check: the check's rows as JSON on stdout")
    parser.add_argument("--write", action="store_true", help="also replace the region of docs/findings.md")
    parser.add_argument(
        "--render",
        action="store_true",
        help="only rewrite the region of docs/findings.md from docs/findings.json (collects nothing)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    project = args.project.resolve()
    repo = (args.repo or project).resolve()
    if args.render:
        if args.claims or args.replicates is not None or args.roundoff is not None or args.write:
            parser.error("--render takes only --repo (or --project): it renders the saved docs/findings.json")
        return render_page(repo)
    if args.claims or args.check:
        return claims_and_check(project, repo, args.env, args.claims, args.check, args.json)
    try:
        source_digest(repo)
    except RuntimeError as error:
        print(f"error: {error}; --repo must name the git work tree of the code that ran", file=sys.stderr)
        return 2
    if args.replicates is not None:
        folders = replicate_folders(args.replicates.resolve())
        if not folders:
            print(
                f"error: --replicates: no {args.replicates}/replicate-0 (python -m thinkalike.replicates makes them)",
                file=sys.stderr,
            )
            return 2
        if args.roundoff is not None and not (args.roundoff / "conf").is_dir():
            print(f"error: --roundoff: {args.roundoff} is not a replicate's project folder", file=sys.stderr)
            return 2
        command = (
            f"python -m thinkalike.findings_cli --replicates {args.replicates}"
            + (f" --roundoff {args.roundoff}" if args.roundoff else "")
            + (" --write" if args.write else "")
        )
        return write_replicate_findings(
            folders, args.env or "replicates", repo, args.write, roundoff=args.roundoff, command=command
        )
    return write_replicate_findings(
        [project],
        args.env,
        repo,
        args.write,
        records=[None],
        command="python -m thinkalike.findings_cli" + (" --write" if args.write else ""),
    )


if __name__ == "__main__":
    sys.exit(main())
