"""The README's findings region (between :data:`START_MARKER` and :data:`END_MARKER`) and the digest of the source
it was generated from (:func:`source_digest`: the git-tracked files of ``src/`` and ``conf/base/``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

START_MARKER = "<!-- findings:start -->"


END_MARKER = "<!-- findings:end -->"


#: What decides the numbers: the git-tracked files under these folders (:func:`source_digest`).
DIGEST_FOLDERS: tuple[str, ...] = ("src", "conf/base")


REGENERATE = (
    "regenerate the findings from the replicates' saved outputs: `python -m thinkalike.findings_cli "
    "--replicates data/replicates --write` (after `python -m thinkalike.replicates`; writes "
    "docs/findings.json and the README region)"
)


def tracked_files(root: str | os.PathLike, folders: Sequence[str] = DIGEST_FOLDERS) -> list[str]:
    """The git-tracked files under ``folders`` of the repository at ``root`` (POSIX paths, sorted);
    ``RuntimeError`` when ``root`` is not a git work tree."""
    import subprocess

    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--", *folders], check=True, capture_output=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise RuntimeError(f"{root} is not a git work tree ({error})") from error
    return sorted(path for path in listed.decode().split("\0") if path)


def source_digest(root: str | os.PathLike, folders: Sequence[str] = DIGEST_FOLDERS) -> str:
    """SHA-256 over the path and the working-tree content of every git-tracked file under ``folders`` (a tracked
    file deleted from the work tree counts as such): the code and configuration that decide the numbers."""
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    for path in tracked_files(root, folders):
        file = Path(root) / path
        content = file.read_bytes() if file.is_file() else b"\0deleted\0"
        digest.update(path.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
    return digest.hexdigest()


def readme_region(text: str) -> str | None:
    """The generated text between the markers (without the newline after the start marker), or ``None``."""
    start, end = text.find(START_MARKER + "\n"), text.find(END_MARKER)
    if start < 0 or end < start:
        return None
    return text[start + len(START_MARKER) + 1 : end]


def replace_region(text: str, rendered: str) -> str:
    """``text`` with the region between the markers replaced by ``rendered``. Without markers (the first
    generation), the hand-written paragraphs are replaced: from the line starting "The default run (measured" to
    the last line before the next heading after "What the default run finds"; ``ValueError`` if neither is
    found."""
    block = f"{START_MARKER}\n{rendered}{END_MARKER}"
    if readme_region(text) is not None:
        start, end = text.find(START_MARKER), text.find(END_MARKER) + len(END_MARKER)
        return text[:start] + block + text[end:]
    lines = text.split("\n")
    try:
        first = next(i for i, line in enumerate(lines) if line.startswith("The default run (measured"))
        finds = next(i for i in range(first, len(lines)) if lines[i].startswith("What the default run finds"))
        heading = next(i for i in range(finds, len(lines)) if lines[i].startswith("#"))
    except StopIteration:
        raise ValueError(
            f"README has neither the markers {START_MARKER} … {END_MARKER} nor the hand-written "
            "findings paragraphs to replace"
        ) from None
    last = heading
    while last > finds and not lines[last - 1].strip():
        last -= 1
    return "\n".join([*lines[:first], block, *lines[last:]])
