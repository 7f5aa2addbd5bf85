"""The nli experiment's verdicts and its markdown report, every sentence computed from the tables (no Kedro; the
groups, identity stitching and the CKA tables between copies are :mod:`thinkalike.nli.analysis`, the figures
:mod:`thinkalike.nli.figures`).

Where the groups *diverge* (a layer's verdict, :func:`stitching_divergence`, :func:`cka_divergence`):

* stitching — the between-group mean accuracy penalty is above both within-group means and its CI's lower
  end is above both within-group CIs' upper ends (non-overlapping intervals);
* CKA — the between-group mean CKA is below both within-group means, its CI's upper end below both
  within-group CIs' lower ends.

A layer whose between or within interval is undefined (one pair) counts by the means alone and is marked
"(means only)".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict

import numpy as np
import pandas as pd

from thinkalike.nli.analysis import GENERALIZING, HEURISTIC, MIDDLE, RELATIONS


class DivergenceGap(TypedDict):
    """One layer of :func:`_divergence_gaps`."""

    layer: float  # an int (a layer) or a relative depth
    means: float
    intervals: float | None


# --------------------------------------------------------------------------- verdicts


def _divergent_layers(by_layer: pd.DataFrame, value: str, larger: bool) -> tuple[list, list]:
    """(layers where between is beyond both withins with non-overlapping CIs, layers where only the means are —
    because an interval is undefined), from :func:`_divergence_gaps`. ``by_layer``: one row per (layer, relation)
    with value, ci_low, ci_high; a layer is returned as it is named (an int, or a relative depth)."""
    gaps = _divergence_gaps(by_layer, value, larger)
    strict = [g["layer"] for g in gaps if g["means"] > 0 and g["intervals"] is not None and g["intervals"] > 0]
    means_only = [g["layer"] for g in gaps if g["means"] > 0 and g["intervals"] is None]
    return strict, means_only


def stitching_divergence(groups_table: pd.DataFrame, data: str) -> tuple[list[int], list[int]]:
    """Layers where stitching *between* the groups costs more accuracy than within either (module docstring)."""
    part = groups_table[groups_table["data"] == data].rename(columns={"mean_penalty": "value"})
    return _divergent_layers(part, "value", larger=True)


def cka_divergence(curves: pd.DataFrame) -> tuple[list[float], list[float]]:
    """Relative depths where CKA *between* the groups is below CKA within either (module docstring)."""
    named = curves.assign(
        relation=[cka_relation(a, b) for a, b in zip(curves["group_a"], curves["group_b"])],
        layer=curves["relative_depth"],
    )
    strict, means_only = _divergent_layers(named[named["relation"].notna()], "mean", larger=False)
    return strict, means_only


def _divergence_gaps(by_layer: pd.DataFrame, value: str, larger: bool) -> list[DivergenceGap]:
    """Per layer (sorted) with every relation: how far between is beyond both withins, the numbers behind
    :func:`_divergent_layers`. ``means``: between − max within (``larger``) or min within − between; ``intervals``:
    between's CI end beyond the nearest within CI end (``ci_low − max ci_high``, or ``min ci_low − ci_high``),
    ``None`` when an interval is undefined. A layer is strict in :func:`_divergent_layers` exactly when both are
    > 0, means only when ``means`` > 0 and ``intervals`` is ``None``."""
    gaps: list[DivergenceGap] = []
    for layer, part in by_layer.groupby("layer", sort=True):
        rows = part.set_index("relation")
        if not set(RELATIONS) <= set(rows.index):
            continue
        between = rows.loc["between"]
        within = rows.loc[["within_generalizing", "within_heuristic"]]
        if larger:
            means = float(between[value] - within[value].max())
            bounds = [between["ci_low"], *within["ci_high"]]
        else:
            means = float(within[value].min() - between[value])
            bounds = [between["ci_high"], *within["ci_low"]]
        bounds = [float(b) for b in bounds]
        if np.isfinite(bounds).all():
            intervals: float | None = (bounds[0] - max(bounds[1:])) if larger else (min(bounds[1:]) - bounds[0])
        else:
            intervals = None
        gaps.append(
            {"layer": float(layer) if isinstance(layer, float) else int(layer), "means": means, "intervals": intervals}
        )
    return gaps


def stitching_gaps(groups_table: pd.DataFrame, data: str) -> list[DivergenceGap]:
    """Per layer: how far the between-group penalty is above both within-group ones on ``data``, by the means and
    by the intervals (:func:`_divergence_gaps`; > 0 in both exactly at :func:`stitching_divergence`'s layers)."""
    part = groups_table[groups_table["data"] == data].rename(columns={"mean_penalty": "value"})
    return _divergence_gaps(part, "value", larger=True)


def cka_gaps(curves: pd.DataFrame) -> list[DivergenceGap]:
    """Per relative depth (``layer``): how far between-group CKA is below both within-group CKAs, by the means and
    by the intervals (:func:`_divergence_gaps`; > 0 in both exactly at :func:`cka_divergence`'s depths)."""
    named = curves.assign(
        relation=[cka_relation(a, b) for a, b in zip(curves["group_a"], curves["group_b"])],
        layer=curves["relative_depth"],
    )
    return _divergence_gaps(named[named["relation"].notna()], "mean", larger=False)


def cka_relation(group_a: str, group_b: str) -> str | None:
    """The relation of a pair of groups (``within_<group>`` or ``between``); ``None`` when one is the middle."""
    if MIDDLE in (group_a, group_b):
        return None
    return f"within_{group_a}" if group_a == group_b else "between"


def _list(values: Sequence) -> str:
    shown = [f"{v:g}" if isinstance(v, float) else str(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


# --------------------------------------------------------------------------- sentences


def accuracy_sentence(groups: pd.DataFrame, baseline: pd.Series, spread: float, min_spread: float) -> str:
    """The distribution of the copies' accuracies, the split and the heuristic baseline beside them."""
    test, ood = groups["test_accuracy"], groups["ood_non_entailed_accuracy"]
    gen = groups[groups["group"] == GENERALIZING]
    heur = groups[groups["group"] == HEURISTIC]
    verdict = (
        f"the seeds spread (range {spread:.2f} ≥ nli.min_spread = {min_spread:g})"
        if spread >= min_spread
        else f"the seeds do not spread (range {spread:.2f} < nli.min_spread = {min_spread:g})"
    )
    return (
        f"{len(groups)} copies score {test.min():.3f}–{test.max():.3f} in distribution (mean {test.mean():.3f}) "
        f"and {ood.min():.2f}–{ood.max():.2f} on OOD non-entailed pairs (mean {ood.mean():.2f}): {verdict}. "
        f"Generalizing (top {len(gen)}): {', '.join(gen['model'])}, OOD non-entailed {gen['ood_non_entailed_accuracy'].mean():.2f} "
        f"on average; heuristic (bottom {len(heur)}): {', '.join(heur['model'])}, "
        f"{heur['ood_non_entailed_accuracy'].mean():.2f}. The lexical-overlap baseline scores "
        f"{baseline['test_accuracy']:.3f} in distribution and {baseline['ood_non_entailed_accuracy']:.2f} / "
        f"{baseline['ood_entailed_accuracy']:.2f} on OOD non-entailed / entailed pairs."
    )


def _verdict(
    subject: str,
    where: str,
    strict: list,
    means_only: list,
    claims: tuple[str, str, str],
    largest_gap: Callable[[], tuple[float, float]],
    numbers: str,
) -> str:
    """``"<subject>: <verdict>; <numbers>."`` — the groups diverge at ``where`` ``strict`` (``claims[0]``), or by the
    means only (``claims[1]``), or not at all (``claims[2]``, with the largest margin and where it is)."""
    if strict:
        head = f"{subject}: the groups diverge at {where}(s) {_list(strict)} — {claims[0]}"
    elif means_only:
        head = f"{subject}: {claims[1]} at {where}(s) {_list(means_only)}"
    else:
        at, margin = largest_gap()
        shown = f"{at:g}" if isinstance(at, float) else str(at)
        head = f"{subject}: the groups do not diverge — {claims[2]} (largest margin {margin:+.3f} at {where} {shown})"
    return f"{head}; {numbers}."


def stitching_sentence(groups_table: pd.DataFrame, data: str) -> str:
    """Where identity stitching separates the groups on ``data``, or that it does not, with the last layer's
    numbers."""
    part = groups_table[groups_table["data"] == data]
    if part.empty or not set(RELATIONS) <= set(part["relation"]):
        return f"Identity stitching on {data}: no pairs in both groups, so no comparison."
    strict, means_only = stitching_divergence(groups_table, data)
    last = part[part["layer"] == part["layer"].max()].set_index("relation")
    numbers = (
        f"at the last layer ({int(part['layer'].max())}) the mean accuracy penalty is "
        f"{last.loc['between', 'mean_penalty']:.3f} between groups vs {last.loc['within_generalizing', 'mean_penalty']:.3f} "
        f"within generalizing and {last.loc['within_heuristic', 'mean_penalty']:.3f} within heuristic"
    )
    claims = (
        "stitching between them costs more accuracy than within either, with non-overlapping CIs",
        ("between-group penalties exceed both within-group ones (means only: an interval is undefined with one pair)"),
        "at no layer does the between-group penalty exceed both within-group penalties beyond their CIs",
    )
    return _verdict(
        f"Identity stitching on {data} pairs",
        "layer",
        strict,
        means_only,
        claims,
        lambda: _largest_gap(part, "mean_penalty", larger=True),
        numbers,
    )


def cka_sentence(curves: pd.DataFrame) -> str:
    """Where CKA separates the groups, or that it does not, with the deepest point's numbers."""
    named = curves.assign(relation=[cka_relation(a, b) for a, b in zip(curves["group_a"], curves["group_b"])])
    if named.empty or not set(RELATIONS) <= set(named["relation"].dropna()):
        return "CKA: no model pairs in both groups, so no comparison."
    strict, means_only = cka_divergence(curves)
    deepest = named[named["relative_depth"] == named["relative_depth"].max()].set_index("relation")
    numbers = (
        f"at the last layer CKA is {deepest.loc['between', 'mean']:.3f} between groups vs "
        f"{deepest.loc['within_generalizing', 'mean']:.3f} within generalizing and "
        f"{deepest.loc['within_heuristic', 'mean']:.3f} within heuristic"
    )
    claims = (
        "between-group CKA is below both within-group CKAs with non-overlapping CIs",
        "between-group CKA is below both within-group CKAs (means only)",
        "at no depth is between-group CKA below both within-group CKAs beyond their CIs",
    )
    return _verdict(
        "CKA on in-distribution test tokens (fig. 2b)",
        "relative depth",
        strict,
        means_only,
        claims,
        lambda: _largest_gap(named.rename(columns={"relative_depth": "layer"}), "mean", larger=False),
        numbers,
    )


def distance_sentence(group_distances: pd.DataFrame) -> str:
    """Top-top / top-bottom / bottom-bottom arccos-CKA distances (fig. 8) and their order."""
    table = group_distances.assign(
        relation=[cka_relation(a, b) for a, b in zip(group_distances["group_a"], group_distances["group_b"])]
    )
    table = table[table["relation"].notna()].set_index("relation")
    if not set(RELATIONS) <= set(table.index):
        return "Distances (fig. 8): no model pairs in both groups, so no comparison."
    top, bottom, between = (table.loc[r, "mean"] for r in ("within_generalizing", "within_heuristic", "between"))
    if between > max(top, bottom):
        verdict = "between-group pairs are farther apart than pairs within either group"
    elif between < min(top, bottom):
        verdict = "between-group pairs are closer than pairs within either group"
    else:
        verdict = "between-group pairs are no farther apart than pairs within one of the groups"
    return (
        f"Arccos-CKA distances (fig. 8): top-top {top:.3f} (n = {int(table.loc['within_generalizing', 'n'])}), "
        f"top-bottom {between:.3f} (n = {int(table.loc['between', 'n'])}), bottom-bottom {bottom:.3f} "
        f"(n = {int(table.loc['within_heuristic', 'n'])}): {verdict} (pairs share models, so these are "
        "descriptive means, not a test)."
    )


def sweep_sentence(sweep: pd.DataFrame) -> str:
    """Whether the counterexample-fraction sweep ran, and which fraction spreads the copies most."""
    if sweep.empty or sweep["status"].iloc[0] != "swept":
        return "Counterexample-fraction sweep: not run — " + (sweep["note"].iloc[0] if len(sweep) else "no table") + "."
    per_fraction = sweep.groupby("counterexample_fraction")["ood_non_entailed_accuracy"].agg(
        lambda v: v.max() - v.min()
    )
    best = float(per_fraction.idxmax())
    return (
        "Counterexample-fraction sweep (nli.sweep.run): OOD non-entailed accuracy ranges "
        + ", ".join(f"{spread:.2f} at fraction {fraction:g}" for fraction, spread in per_fraction.items())
        + f"; the largest spread is at {best:g}, the recommended nli.pairs.counterexample_fraction."
    )


def _largest_gap(part: pd.DataFrame, value: str, larger: bool) -> tuple[float, float]:
    """(layer, between − max within) for penalties or (layer, min within − between) for CKA, at its largest."""
    best = (np.nan, -np.inf)
    for layer, rows in part.groupby("layer", sort=True):
        rows = rows.set_index("relation")
        if not set(RELATIONS) <= set(rows.index):
            continue
        within = rows.loc[["within_generalizing", "within_heuristic"], value]
        gap = rows.loc["between", value] - within.max() if larger else within.min() - rows.loc["between", value]
        if gap > best[1]:
            best = (layer, float(gap))
    return best


def markdown_table(table: pd.DataFrame) -> str:
    """A pipe table (GitHub markdown) of ``table``; floats with 3 decimals (``tabulate``, which pandas'
    ``to_markdown`` needs, is not a dependency)."""

    def cell(value) -> str:
        return f"{value:.3f}" if isinstance(value, (float, np.floating)) else str(value)

    header = "| " + " | ".join(map(str, table.columns)) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def markdown_report(sentences: dict[str, str], tables: dict[str, pd.DataFrame], figures: Sequence[str]) -> str:
    """The report: a title, one section per figure with its sentence, the tables (markdown), the figure files."""
    lines = ["# Generalizing vs heuristic NLI copies (Brown et al. 2023 §4)", ""]
    for title, sentence in sentences.items():
        lines += [f"## {title}", "", sentence, ""]
    for title, table in tables.items():
        lines += [f"### {title}", "", markdown_table(table) if len(table) else "(empty)", ""]
    lines += ["Figures (saved beside this report, same version): " + ", ".join(f"`{name}`" for name in figures), ""]
    return "\n".join(lines)
