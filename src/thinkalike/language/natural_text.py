"""Reading natural text into the same sentence table shape as the grammar's.

Natural text has no feature labels: its categorical features are "none", its per-word parts
of speech "X" and roles "other", its verb/subject indices -1, and ``source`` is "natural".
Tables can therefore be concatenated with grammar tables and packed by
:func:`thinkalike.language.packing.pack_evaluation_sequences`; give ``first_id`` above the
grammar's largest ``sentence_id`` so that ids do not collide.

A path ``package:<name>`` names a text the package ships (:data:`SHIPPED_TEXTS`, in ``thinkalike/language/texts/``):
``package:everyday_english.txt`` is 70 lines of everyday English written for the project (``conf/real`` reads it),
found wherever the package is installed, whatever the working directory.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Literal

import pandas as pd

from thinkalike.language.grammar import FEATURE_VALUES, NONE, SENTENCE_COLUMNS

#: The parameter that names the file (thinkalike.pipelines.corpus.schema.NaturalTextParameters); errors start with it.
PATH_PARAMETER = "corpus.natural_text.path"

#: The prefix of a path that names a text the package ships.
SHIPPED_PREFIX = "package:"

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def read_natural_text(path: str | Path, mode: Literal["lines", "plain"] = "lines") -> list[str]:
    """Read documents from a UTF-8 text file, whitespace-normalised.

    ``mode="lines"``: one document per line, blank lines skipped. ``mode="plain"``: running
    text, split into paragraphs at blank lines and each paragraph into sentences after
    ``.``, ``!`` or ``?`` followed by whitespace; each sentence is a document.
    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a file without text, each message
    starting with the parameter that names the file (:data:`PATH_PARAMETER`) and naming the path, and
    ``ValueError`` for an unknown mode.
    """
    if mode not in ("lines", "plain"):
        raise ValueError(f"mode must be 'lines' or 'plain', got {mode!r}")
    path = shipped_text(str(path)) if str(path).startswith(SHIPPED_PREFIX) else Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{PATH_PARAMETER}: natural text file not found: {str(path)!r} (relative paths are read from the "
            f"working directory, {Path.cwd()})"
        )
    content = path.read_text(encoding="utf-8")
    if mode == "lines":
        chunks = content.splitlines()
    else:
        chunks = [
            sentence
            for paragraph in _PARAGRAPH_BREAK.split(content)
            for sentence in _SENTENCE_END.split(paragraph.strip())
        ]
    documents = [" ".join(chunk.split()) for chunk in chunks]
    documents = [document for document in documents if document]
    if not documents:
        raise ValueError(f"{PATH_PARAMETER}: natural text file {str(path)!r} contains no text")
    return documents


def shipped_texts() -> list[str]:
    """The names of the texts the package ships (``package:<name>``)."""
    folder = resources.files("thinkalike.language") / "texts"
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".txt"))


def shipped_text(path: str) -> Path:
    """The file of ``package:<name>``; ``FileNotFoundError`` naming :data:`PATH_PARAMETER` and the shipped texts for
    a name the package does not ship."""
    name = path.removeprefix(SHIPPED_PREFIX)
    if name not in shipped_texts():
        raise FileNotFoundError(
            f"{PATH_PARAMETER}: the package ships no text {name!r} (shipped: "
            f"{', '.join(SHIPPED_PREFIX + n for n in shipped_texts())})"
        )
    return Path(str(resources.files("thinkalike.language") / "texts" / name))


def natural_text_table(docs: list[str], first_id: int = 0) -> pd.DataFrame:
    """A sentence table (columns of ``grammar.SENTENCE_COLUMNS``) for unlabelled documents.

    ``sentence_id`` runs from ``first_id``; ``words`` are the whitespace words of each document.
    """
    rows = []
    for offset, doc in enumerate(docs):
        words = doc.split()
        if not words:
            raise ValueError(f"document {offset} is empty")
        n = len(words)
        rows.append(
            {
                "sentence_id": first_id + offset,
                "text": " ".join(words),
                "words": words,
                "pos": ["X"] * n,
                "word_position": list(range(n)),
                "word_role": ["other"] * n,
                **{feature: NONE for feature in FEATURE_VALUES},
                "n_words": n,
                "main_verb_index": -1,
                "subject_index": -1,
                "source": "natural",
            }
        )
    return pd.DataFrame(rows, columns=list(SENTENCE_COLUMNS))
