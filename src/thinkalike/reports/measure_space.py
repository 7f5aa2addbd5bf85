"""Where the measures beyond CKA did not compare every dimension, in words (no Kedro), from each pair's saved measures
table (``models.cka.<a>__<b>.measures_table``, :mod:`thinkalike.cka.measure_tables`): the CCA family needs rows per
dimension it compares, so on too few rows it compares each layer's top ``max_dims`` principal components (its
``options`` column, JSON, holds ``max_dims``; ``dims_a``/``dims_b`` the dimensions compared; ``n_tokens`` the rows),
and below one dimension the measure is left out of that pair's table.

Read from the saved tables only; tables saved before they had those columns are named as such, not guessed at.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from thinkalike.measures.registry import MEASURE_NAMES, MEASURES
from thinkalike.reports.experiments import MEASURE_PAIR_TABLES
from thinkalike.reports.findings.text import code_text, int_text, list_text
from thinkalike.reports.html_blocks import dimensions_block

CONFIGURED = "configured"  # the variant of the rows every measure is computed on (the grounding controls' differ)
SPACE_COLUMNS = ("dims_a", "dims_b", "options", "n_tokens")


@dataclass(frozen=True)
class Reduced:
    """One measure of one pair compared in a reduced space: its dimensions compared and the layers' widths (``None``:
    unknown), the rows it saw."""

    measure: str
    dims: tuple[int, int]
    widths: tuple[int | None, int | None]
    n_tokens: int


def _configured(table: pd.DataFrame) -> pd.DataFrame:
    """The rows every measure is computed on (all rows of a table without a ``variant`` column)."""
    return table[table["variant"] == CONFIGURED] if "variant" in table else table


def pair_label(table: pd.DataFrame) -> str:
    """``a``–``b``, or ``a`` with itself, as markdown."""
    a, b = str(table["model_a"].iloc[0]), str(table["model_b"].iloc[0])
    return f"{code_text(a)} with itself" if a == b else f"{code_text(a)}–{code_text(b)}"


def _max_dims(options: Any) -> int | None:
    """The ``max_dims`` of a row's options (JSON), else ``None``."""
    try:
        value = json.loads(options).get("max_dims") if isinstance(options, str) else None
    except (ValueError, AttributeError):
        return None
    return int(value) if value is not None else None


def reduced_measures(table: pd.DataFrame) -> list[Reduced]:
    """The measures of one pair's table that compared fewer dimensions than the layers have (``max_dims`` in their
    options); the widths are the dimensions the other measures compared."""
    rows = _configured(table).assign(max_dims=lambda frame: frame["options"].map(_max_dims))
    full = rows[rows["max_dims"].isna()]
    widths = (int(full["dims_a"].max()), int(full["dims_b"].max())) if len(full) else None
    found = []
    for measure, cells in rows[rows["max_dims"].notna()].groupby("measure", sort=False):
        dims = (int(cells["dims_a"].max()), int(cells["dims_b"].max()))
        if widths is None or dims[0] < widths[0] or dims[1] < widths[1]:
            found.append(Reduced(str(measure), dims, widths or (None, None), int(cells["n_tokens"].max())))
    return found


def _dimensions_text(item: Reduced) -> str:
    """``4 of 32 dimensions`` (both layers alike), ``4 and 6 of 32 and 64 dimensions`` otherwise."""
    dims = str(item.dims[0]) if item.dims[0] == item.dims[1] else f"{item.dims[0]} and {item.dims[1]}"
    if item.widths == (None, None):
        return f"the top {dims} principal components"
    widths = str(item.widths[0]) if item.widths[0] == item.widths[1] else f"{item.widths[0]} and {item.widths[1]}"
    return f"the top {dims} principal components of {widths} dimensions"


def _rows_per_dimension(measures: Sequence[str]) -> str:
    """`` (N rows per dimension)`` when the measures' registry says how many rows they need, else empty."""
    needs = {need for name in measures if name in MEASURES if (need := MEASURES[name].rows_per_dimension) is not None}
    return f"; they need {int_text(min(needs))} rows per dimension" if len(needs) == 1 else ""


def reduced_sentences(pair_tables: Sequence[pd.DataFrame]) -> list[str]:
    """One sentence per group of pairs whose measures compared the same reduced space on as many rows."""
    groups: dict[tuple[tuple[str, ...], str, int], list[str]] = {}
    for table in pair_tables:
        found = reduced_measures(table)
        by_space: dict[tuple[str, int], list[str]] = {}
        for item in found:
            by_space.setdefault((_dimensions_text(item), item.n_tokens), []).append(item.measure)
        for (space, n_tokens), measures in by_space.items():
            groups.setdefault((tuple(measures), space, n_tokens), []).append(pair_label(table))
    return [
        f"{list_text([code_text(m) for m in measures])} compared {space} ({int_text(n_tokens)} rows"
        f"{_rows_per_dimension(measures)}) for {list_text(pairs)}."
        for (measures, space, n_tokens), pairs in groups.items()
    ]


def left_out_sentences(pair_tables: Sequence[pd.DataFrame], configured: Sequence[str]) -> list[str]:
    """One sentence per group of pairs from whose table the same measures of ``configured`` (or, when none are given,
    of any pair's table) are missing, with the rows the pairs had."""
    wanted = list(configured) or list(dict.fromkeys(m for table in pair_tables for m in _configured(table)["measure"]))
    groups: dict[tuple[tuple[str, ...], int], list[str]] = {}
    for table in pair_tables:
        present = set(_configured(table)["measure"])
        missing = tuple(name for name in wanted if name not in present)
        if missing:
            n_tokens = int(table["n_tokens"].max()) if "n_tokens" in table and len(table) else 0
            groups.setdefault((missing, n_tokens), []).append(pair_label(table))
    return [
        f"{list_text([code_text(m) for m in measures])} left out for {list_text(pairs)}: "
        f"{int_text(n_tokens)} rows are too few{_rows_per_dimension(measures)}."
        for (measures, n_tokens), pairs in groups.items()
    ]


def configured_measures(parameters: Mapping[str, Any]) -> list[str]:
    """The measures ``cka.measures.names`` of the run's parameters lists (none when it lists none; ``all``: every
    registered one)."""
    names = (((parameters.get("cka") or {}).get("measures") or {}).get("names")) or []
    if names == "all":
        return list(MEASURE_NAMES)
    return [str(name) for name in names] if isinstance(names, (list, tuple)) else []


def measure_space_sentences(pair_tables: Mapping[str, Any], parameters: Mapping[str, Any]) -> list[str]:
    """Where the CCA family was computed in a reduced space and where a measure was left out, in words, from the
    pairs' saved measures tables (catalog name → table; ``None``: never saved). Empty when there is no table."""
    tables = [table for table in pair_tables.values() if isinstance(table, pd.DataFrame) and len(table)]
    if not tables:
        return []
    old = [pair_label(table) for table in tables if not set(SPACE_COLUMNS) <= set(table.columns)]
    current = [table for table in tables if set(SPACE_COLUMNS) <= set(table.columns)]
    sentences = reduced_sentences(current)
    if current and not sentences:
        sentences.append("Every measure compared every dimension of each layer (no `max_dims`).")
    sentences += left_out_sentences(tables, configured_measures(parameters))
    if old:
        sentences.append(
            f"The measures tables of {list_text(old)} do not say which dimensions were compared (saved "
            "before they recorded `dims_a`, `dims_b`, `options` and `n_tokens`; rerun `cka` for them)."
        )
    return sentences


def matching(tables: Mapping[str, Any], pattern: str) -> dict[str, Any]:
    """The loaded tables whose catalog names match ``pattern`` (``fnmatch``), in their order."""
    return {name: table for name, table in tables.items() if fnmatch.fnmatchcase(name, pattern)}


def measure_space_html(tables: Mapping[str, Any]) -> str:
    """The measures section's part on the dimensions each measure compared, from every pair's measures table among
    the loaded ``tables`` (:data:`~thinkalike.reports.experiments.MEASURE_PAIR_TABLES`); empty when all were compared."""
    sentences = measure_space_sentences(matching(tables, MEASURE_PAIR_TABLES), tables.get("parameters") or {})
    if not sentences:
        return ""
    return dimensions_block(sentences)
