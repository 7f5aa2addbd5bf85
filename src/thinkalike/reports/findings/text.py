"""Numbers and words for the findings (no Kedro): how a number, a span, a list or a count is written, the
paragraph wrapping, the literature's numbers every section compares with, and small table helpers the
sections share (:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.run_record.clock import format_seconds

#: Numbers from the papers the findings are compared with (not measured here).
LITERATURE: dict[str, Any] = {
    "mlem_spearman": 0.7,  # Jalouzot et al. 2024: held-out Spearman > 0.7 on BERT, GPT-2, Mamba
    "keep_k_transpose": 0.83,  # Dar et al. 2022 appendix A, GPT-2: E' = E^T at k ≈ 1000 ...
    "keep_k_pinv": 0.10,  # ... against E' = E^+
    "keep_k_k": 1000,
    "keep_k_vocabulary": 50257,  # GPT-2's vocabulary
    "mccoy_ood_non_entailed": [0.05, 0.55],  # McCoy et al. 2020, 100 BERTs on HANS lexical overlap, non-entailed
}


MINUS = "\u2212"


def as_float(value: Any, digits: int = 6) -> float | None:
    """A finite float rounded to ``digits`` decimals, else ``None``."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number, digits) if math.isfinite(number) else None


def span_of(values: Iterable[Any]) -> list[float] | None:
    """``[min, max]`` of the finite values, or ``None`` when there are none."""
    finite = [number for number in map(as_float, values) if number is not None]  # rounding keeps the order
    return [min(finite), max(finite)] if finite else None


def jsonable(value: Any) -> Any:
    """Plain JSON of ``value``: mappings and sequences recursively, numpy scalars as Python numbers, floats through
    :func:`as_float` (NaN → ``None``), timestamps in ISO format, anything else as its ``str``."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return as_float(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)


def table_of(tables: Mapping[str, Any], name: str) -> pd.DataFrame | None:
    """The data frame ``tables[name]``, or ``None`` when it is missing or not a data frame."""
    table = tables.get(name)
    return table if isinstance(table, pd.DataFrame) else None


def int_list(values: Iterable[Any]) -> list[int]:
    """The distinct integers of ``values``, sorted (``None`` and NaN left out)."""
    return sorted({int(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))})


def missing_section(*names: str) -> dict[str, Any]:
    """A section's stand-in when its tables ``names`` are not in the outputs."""
    return {"missing": list(names)}


def without_models(tables: Mapping[str, Any], models: Sequence[str]) -> dict[str, Any]:
    """``tables`` with every row of ``models`` left out of its data frames (columns ``model``, ``model_a``,
    ``model_b``)."""
    if not models:
        return dict(tables)
    kept = {}
    for name, table in tables.items():
        if isinstance(table, pd.DataFrame):
            for column in ("model", "model_a", "model_b"):
                if column in table:
                    table = table[~table[column].isin(models)]
        kept[name] = table
    return kept


def guarded(collect: Any, *args: Any) -> dict[str, Any]:
    """``collect(*args)``, or ``{"error": …}`` when a table does not have what it needs (a changed schema): one
    section's failure does not stop the others (the command reports errors and does not write the README)."""
    try:
        return collect(*args)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as error:
        return {"error": f"{type(error).__name__}: {error}"}


def pair_row(table: pd.DataFrame, a: str, b: str, first: str = "model_a", second: str = "model_b") -> pd.Series | None:
    """The first row of ``table`` for the pair (``a``, ``b``) in either order, or ``None``."""
    rows = table[((table[first] == a) & (table[second] == b)) | ((table[first] == b) & (table[second] == a))]
    return None if rows.empty else rows.iloc[0]


def number_text(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals and a typographic minus (``−0.03``; never ``−0.00``); ``n/a`` for ``None``."""
    if value is None:
        return "n/a"
    text = f"{value:.{digits}f}"
    if text.startswith("-"):
        text = text[1:] if float(text) == 0 else MINUS + text[1:]
    return text


def signed_text(value: float | None, digits: int = 3) -> str:
    """``value`` with its sign and ``digits`` decimals (``+0.012``, ``−0.030``; zero unsigned); ``n/a`` for ``None``."""
    if value is None:
        return "n/a"
    text = f"{value:+.{digits}f}"
    if float(text) == 0:
        return text[1:]
    return text.replace("-", MINUS)


def int_text(value: Any) -> str:
    """An integer with thousands separators (``74,688``); ``n/a`` for ``None``."""
    return "n/a" if value is None else f"{int(value):,}"


def ints_text(values: Sequence[int] | None) -> str:
    """Integers as words: ``150`` or ``150, 300 or 500``; ``n/a`` when there are none."""
    if not values:
        return "n/a"
    return list_text([int_text(v) for v in values], "or")


def list_text(items: Sequence[str], last: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c`` (``last`` instead of "and" when given)."""
    items = list(items)
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def code_text(name: str) -> str:
    """``name`` as inline code."""
    return f"`{name}`"


def not_run_sentence(what: str, section: Mapping[str, Any]) -> str | None:
    """The sentence that stands for a section that could not be written (its tables unreadable, missing or empty), or
    ``None`` when it can be."""
    if "error" in section:
        return f"{what}: its tables could not be read ({section['error']})."
    if "missing" in section:
        names = ", ".join(code_text(n) for n in section["missing"])
        return f"{what}: not in these outputs (no {names}: the pipeline was not run)."
    if section.get("empty"):
        return f"{what}: the pipeline ran but compared nothing (its table is empty)."
    return None


WIDTH = 100


#: A word that must not start a wrapped line: markdown would read it as a list item, heading, quote, HTML,
#: code fence, table row or setext underline and break the paragraph.
LINE_START = re.compile(r"^(?:[-+*]|#{1,6}|>.*|\d{1,9}[.)]|=+|-+|`{3,}.*|~{3,}.*|<.*|\|.*)$")


def wrap(paragraph: str, width: int = WIDTH) -> str:
    """``paragraph`` on lines of at most ``width`` columns where possible (words are never split), no line starting
    with a word that markdown would read as a block marker (such a word stays on the line before)."""
    words = paragraph.split(" ")
    glued: list[str] = []
    for word in words:
        if glued and (not word or LINE_START.match(word)):
            glued[-1] += "\0" + word
        else:
            glued.append(word)
    lines: list[str] = []
    for word in glued:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(line.replace("\0", " ") for line in lines)


def seconds_text(value: float | None) -> str:
    """Seconds as the timing table writes them (``9 min 14 s``, ``4.5 s``); ``n/a`` for ``None``."""
    return "n/a" if value is None else format_seconds(float(value))


def plural_text(n: int | None, one: str, many: str | None = None) -> str:
    """``1 model``, ``18 models`` (``many`` for an irregular plural)."""
    if n is None:
        return f"n/a {many or one + 's'}"
    return f"{int_text(n)} {one if n == 1 else (many or one + 's')}"
