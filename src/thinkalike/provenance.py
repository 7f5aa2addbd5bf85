"""Where saved results come from, and writing them safely (no Kedro): the git commit of a work tree, the record a
finished run leaves in its project folder, and a text file written through a temporary file and a rename so that it
is never left half-written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any


def git_state(root: Path) -> dict[str, Any]:
    """The commit checked out at ``root`` and whether the files under ``src/`` and ``conf/base/`` differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout

    try:
        return {
            "git_commit": git("rev-parse", "HEAD").strip(),
            "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "src", "conf/base").strip()),
        }
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": None, "git_dirty": None}


def file_at_commit(root: Path, commit: str, path: Path) -> bytes | None:
    """The bytes of ``path`` as committed at ``commit`` in the repository at ``root``; None where git or that commit
    is not there (a clone without that history)."""
    try:
        return subprocess.run(
            ["git", "-C", str(root), "show", f"{commit}:{path.as_posix()}"], check=True, capture_output=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def write_text_atomically(path: Path, text: str) -> None:
    """``text`` to ``path`` through a temporary file beside it and a rename: never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


#: The record a finished replicate leaves in its project folder (``python -m thinkalike.replicates``).
RUN_RECORD = "replicate.json"


def run_record(folder: Path) -> dict[str, Any] | None:
    """The record of a run that finished in ``folder`` (:data:`RUN_RECORD`), or ``None``."""
    path = folder / RUN_RECORD
    return json.loads(path.read_text()) if path.exists() else None
