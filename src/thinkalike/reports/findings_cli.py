"""``python -m thinkalike.reports.findings_cli [--project PATH] [--env ENV] [--repo PATH] [--write]``: the README's
findings from a project's latest saved outputs.

Opens the Kedro project at PATH (default: the current directory) with its catalog (``--env``: the configuration
environment the run used; default: Kedro's), loads the latest version of every table
:data:`thinkalike.reports.findings.TABLES` names (a table never saved — its pipeline was not run — is left out,
and its paragraph says so), every zoo model's saved config and the parameters, and writes ``docs/findings.json``
under the repository (``--repo``, default: PATH): the numbers
(:func:`~thinkalike.reports.findings.collect_findings`), ``source_digest`` (the SHA-256 of the git-tracked files
under ``src/`` and ``conf/base/``: :func:`~thinkalike.reports.findings.source_digest`) and, for information, the
git commit and whether those files differ from it. With ``--write`` it also replaces the README's region between
the markers with :func:`~thinkalike.reports.findings.render_findings` (one read-modify-write of README.md). The
tests (``tests/reports/test_findings.py``) check that the README region is what the JSON renders to and that the
JSON's digest is that of the current code.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from thinkalike.reports.findings import (
    TABLES,
    collect_errors,
    collect_findings,
    missing_tables,
    render_findings,
    replace_region,
    source_digest,
)

logger = logging.getLogger(__name__)

FINDINGS_JSON = Path("docs/findings.json")
README = Path("README.md")


def open_catalog(project: Path, env: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The project's catalog and parameters (no run: the session only loads the context)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(project)
    with KedroSession.create(project_path=project, env=env) as session:
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
    for name in TABLES:
        value = _load(catalog, name)
        if value is not None:
            tables[name] = value
    summary = tables.get("zoo_summary")
    models = list(summary["model"]) if summary is not None else list((parameters.get("zoo") or {}).get("models") or {})
    configs = {str(model): config for model in models
               if (config := _load(catalog, f"models.{model}.model_config")) is not None}
    tables["model_configs"] = configs
    return tables


def git_state(root: Path) -> dict[str, Any]:
    """The commit checked out at ``root`` and whether the files the digest covers differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout

    try:
        return {"git_commit": git("rev-parse", "HEAD").strip(),
                "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "src", "conf/base").strip())}
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": None, "git_dirty": None}


def findings_document(tables: dict[str, Any], root: Path) -> dict[str, Any]:
    """docs/findings.json's content: the findings with the digest, the commit and when they were collected."""
    return {**collect_findings(tables), "source_digest": source_digest(root), **git_state(root),
            "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_json(document: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n",
                    encoding="utf-8")


def write_readme(path: Path, rendered: str) -> bool:
    """Replaces the README region (one quick read-modify-write); whether the file changed."""
    text = path.read_text(encoding="utf-8")
    updated = replace_region(text, rendered)
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m thinkalike.reports.findings_cli", description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="the Kedro project (default: cwd)")
    parser.add_argument("--env", default=None, help="configuration environment of the run (default: Kedro's)")
    parser.add_argument("--repo", type=Path, default=None,
                        help="the git work tree whose src/ and conf/base/ are digested and whose docs/findings.json "
                             "and README.md are written (default: the project)")
    parser.add_argument("--write", action="store_true", help="also replace the README region")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    project = args.project.resolve()
    repo = (args.repo or project).resolve()
    try:
        source_digest(repo)
    except RuntimeError as error:
        print(f"error: {error}; --repo must name the git work tree of the code that ran", file=sys.stderr)
        return 2
    catalog, parameters = open_catalog(project, args.env)
    document = findings_document(load_tables(catalog, parameters), repo)
    write_json(document, repo / FINDINGS_JSON)
    print(f"wrote {repo / FINDINGS_JSON} (source digest {document['source_digest'][:12]}, commit "
          f"{(document['git_commit'] or 'none')[:12]}{' + uncommitted changes' if document['git_dirty'] else ''})")
    missing = missing_tables(document)
    if missing:
        print("not in the outputs (their paragraphs say so): " + ", ".join(missing), file=sys.stderr)
    errors = collect_errors(document)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        print("the README was not written: a table did not have what the findings need", file=sys.stderr)
        return 1
    if args.write:
        changed = write_readme(repo / README, render_findings(document))
        print(f"{'updated' if changed else 'unchanged'}: {repo / README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
