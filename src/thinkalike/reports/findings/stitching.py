"""The stitching paragraph of the findings: every penalty set against its self-stitching floor (module docstring of
:mod:`thinkalike.reports.findings`), the SoLU/GeLU asymmetry, the same-seed control and identity stitching.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.reports.findings.claims import Claim, either_way, every_some_none, mirrored, spread_margins
from thinkalike.reports.findings.text import (
    as_float,
    int_list,
    ints_text,
    list_text,
    missing_section,
    not_run_sentence,
    number_text,
    span_of,
    table_of,
)

KIND_LABELS = {"identity": "identity", "affine": "affine", "affine_ln": "affine + LayerNorm"}


STITCH_KEY = ["model_f", "layer_f", "model_g", "layer_g", "stitch"]


def stitch_cells(penalties: pd.DataFrame) -> pd.DataFrame:
    """One row per stitch (module docstring: several φ seeds averaged, intervals joined)."""
    grouped = penalties.groupby(STITCH_KEY, sort=False, dropna=False)
    cells = grouped.agg(
        penalty=("penalty", "mean"), ci_low=("ci_low", "min"), ci_high=("ci_high", "max"), n_rows=("penalty", "size")
    ).reset_index()
    return cells


def _cell(cells: pd.DataFrame, f: str, lf: int, g: str, lg: int, kind: str) -> pd.Series | None:
    rows = cells[
        (cells["model_f"] == f)
        & (cells["layer_f"] == lf)
        & (cells["model_g"] == g)
        & (cells["layer_g"] == lg)
        & (cells["stitch"] == kind)
    ]
    return None if rows.empty else rows.iloc[0]


def _direction(cells: pd.DataFrame, f: str, g: str, kind: str) -> dict[str, Any] | None:
    """f → g of one kind against g's floor (g → g at the target layer, same kind), per layer cell."""
    rows = cells[(cells["model_f"] == f) & (cells["model_g"] == g) & (cells["stitch"] == kind)]
    if rows.empty:
        return None
    layers, penalties, excess, above, below = [], [], [], 0, 0
    above_gap: list[float] = []
    below_gap: list[float] = []
    intervals: list[list[float | None]] = []  # each cell's and its floor's interval: [low, high, floor low, floor high]
    for row in rows.sort_values(["layer_f", "layer_g"]).itertuples():
        floor = _cell(cells, g, int(row.layer_g), g, int(row.layer_g), kind)
        layers.append([int(row.layer_f), int(row.layer_g)])
        penalties.append(float(row.penalty))
        if floor is None:
            excess.append(math.nan)
            above_gap.append(math.nan)
            below_gap.append(math.nan)
            intervals.append([as_float(row.ci_low), as_float(row.ci_high), None, None])
            continue
        intervals.append(
            [as_float(row.ci_low), as_float(row.ci_high), as_float(floor["ci_low"]), as_float(floor["ci_high"])]
        )
        excess.append(float(row.penalty) - float(floor["penalty"]))
        above += bool(row.ci_low > floor["ci_high"])
        below += bool(row.ci_high < floor["ci_low"])
        above_gap.append(float(row.ci_low) - float(floor["ci_high"]))
        below_gap.append(float(floor["ci_low"]) - float(row.ci_high))
    return {
        "layers": layers,
        "penalty": [as_float(p) for p in penalties],
        "excess": [as_float(e) for e in excess],
        "penalty_span": span_of(penalties),
        "excess_span": span_of(excess),
        "above_floor": above,
        "below_floor": below,
        "n": len(layers),
        # per layer cell: the interval's gap above the floor's (ci_low − floor's ci_high; > 0: above) and below it
        # (floor's ci_low − ci_high; > 0: below), the margins of the claims (claims_stitching)
        "above_gap": [as_float(v) for v in above_gap],
        "below_gap": [as_float(v) for v in below_gap],
        # per layer cell: the penalty's evaluation-bootstrap interval (resampled batches of held-out sequences) and
        # its floor's, [low, high, floor low, floor high] (the within-run interval of the scorecard's asymmetry)
        "intervals": intervals,
    }


def _stitch_pair(cells: pd.DataFrame, pair: Mapping[str, Any], kinds: Sequence[str]) -> dict[str, Any]:
    s, g = pair["solu"], pair["gelu"]
    by_kind = {}
    for kind in kinds:
        forward, backward = _direction(cells, s, g, kind), _direction(cells, g, s, kind)
        if forward is None or backward is None:
            continue
        reverse = {tuple(layers): e for layers, e in zip(backward["layers"], backward["excess"])}
        asym = [
            e - reverse[(lg, lf)]
            for (lf, lg), e in zip(forward["layers"], forward["excess"])
            if e is not None and reverse.get((lg, lf)) is not None
        ]
        by_kind[kind] = {
            "s_to_g": forward,
            "g_to_s": backward,
            "n_cells": len(asym),
            "asymmetric": int(sum(a > 0 for a in asym)),
            "reversed": int(sum(a < 0 for a in asym)),
            "mean_asymmetry": as_float(np.mean(asym)) if asym else None,
        }
    return {**pair, "kinds": by_kind}


def _seed_columns(trained: pd.DataFrame) -> dict[str, Any] | None:
    """φ seeds per trained stitch (``n_phi_seeds``) and the largest spread of a stitch's penalty across them
    (``penalty_seed_max − penalty_seed_min``) and standard deviation, when the table has those columns."""
    if "n_phi_seeds" not in trained or trained.empty:
        return None
    spread = (
        (trained["penalty_seed_max"] - trained["penalty_seed_min"])
        if {"penalty_seed_max", "penalty_seed_min"} <= set(trained.columns)
        else pd.Series(dtype=float)
    )
    return {
        "n": int_list(trained["n_phi_seeds"]),
        "max_spread": as_float(spread.max()) if len(spread) else None,
        "max_std": as_float(trained["penalty_seed_std"].max()) if "penalty_seed_std" in trained else None,
    }


def collect_stitching(
    tables: Mapping[str, Any], roles: Mapping[str, Any], parameters: Mapping[str, Any]
) -> dict[str, Any]:
    """The stitching paragraph's numbers from ``stitching_penalties`` and ``stitching_phis``: each SoLU/GeLU direction
    against its floor, per φ kind, and identity stitching."""
    penalties = table_of(tables, "stitching_penalties")
    if penalties is None:
        return missing_section("stitching_penalties")
    if penalties.empty:
        return {"empty": True}
    cells = stitch_cells(penalties)
    order = ["identity", "affine", "affine_ln"]
    kinds = sorted(set(cells["stitch"]), key=lambda k: (order.index(k) if k in order else len(order), k))
    settings = parameters.get("stitching") or {}
    grid = settings.get("layers") or ("diagonal" if (cells["layer_f"] == cells["layer_g"]).all() else None)
    return {
        "grid": grid,
        "kinds": kinds,
        "n_stitches": int(len(cells)),
        "n_trained": int((cells["stitch"] != "identity").sum()),
        "n_rows": int(len(penalties)),
        "n_ordered_pairs": int(len(cells[["model_f", "model_g"]].drop_duplicates())),
        **_run_settings(penalties, cells, table_of(tables, "stitching_phis")),
        "solu_gelu": [_stitch_pair(cells, p, kinds) for p in roles["solu_gelu"]],
        "control": [_stitch_pair(cells, p, kinds) for p in roles["control"]],
        "self": _self_stitching(cells, [k for k in kinds if k != "identity"], tables.get("zoo_summary")),
        "identity_between": _identity_span(cells, roles["solu_gelu"]),
        "identity_control": _identity_span(cells, roles["control"]),
    }


def _column(table: pd.DataFrame | None, name: str) -> list[int]:
    """A column's distinct integers (:func:`int_list`); ``[]`` without the table, the column or rows."""
    return int_list(table[name]) if table is not None and name in table and len(table) else []


def _run_settings(penalties: pd.DataFrame, cells: pd.DataFrame, phis: pd.DataFrame | None) -> dict[str, Any]:
    """How the stitches were trained and evaluated: steps and tokens, the training source, the interval level,
    whether special targets were left out, the φ seeds and the targets."""
    trained = penalties[penalties["stitch"] != "identity"]
    return {
        "steps": _column(trained, "steps"),
        "tokens_per_step": _column(trained, "tokens_per_step"),
        "train_tokens": _column(trained, "train_tokens"),
        "eval_tokens": _column(penalties, "eval_tokens"),
        "n_eval_sequences": _column(phis, "n_eval_sequences"),
        "train_source": sorted(set(penalties["train_source"].dropna().astype(str)))
        if "train_source" in penalties
        else [],
        "ci_level": span_of(penalties["ci_level"]) if "ci_level" in penalties else None,
        "exclude_special_targets": (
            sorted({bool(v) for v in penalties["exclude_special_targets"].dropna()})
            if "exclude_special_targets" in penalties
            else None
        ),
        "phi_seeds": int(cells["n_rows"].max()),
        "n_targets": _column(penalties, "n_targets"),
        "seed_columns": _seed_columns(trained),
    }


def _self_stitching(cells: pd.DataFrame, trained_kinds: Sequence[str], zoo_summary: Any) -> dict[str, Any]:
    """Every model stitched into itself (the floors): per trained φ kind their span, layer 0's and the lowest layer;
    over the trained kinds their span and how many are below zero; identity's largest |penalty|; the models and their
    training steps (from ``zoo_summary``, when it is a table)."""
    self_rows = cells[cells["model_f"] == cells["model_g"]]
    self_trained = {}
    for kind in trained_kinds:
        part = self_rows[self_rows["stitch"] == kind]
        if len(part):
            by_layer = part.groupby("layer_f")["penalty"].mean()
            self_trained[kind] = {
                "span": span_of(part["penalty"]),
                "layer0": span_of(part.loc[part["layer_f"] == 0, "penalty"]),
                "lowest_layer": int(by_layer.idxmin()),
                # [layer, mean floor over the self-stitched models] per layer
                "by_layer": [[int(layer), as_float(v)] for layer, v in by_layer.items()],
            }
    self_all = self_rows[self_rows["stitch"].isin(trained_kinds)]
    self_identity = self_rows[self_rows["stitch"] == "identity"]
    zoo_steps = zoo_summary if isinstance(zoo_summary, pd.DataFrame) else None
    self_models = sorted(set(self_rows["model_f"]))
    steps_of_self = (
        int_list(zoo_steps.loc[zoo_steps["model"].isin(self_models), "steps"]) if zoo_steps is not None else []
    )
    return {
        "trained": self_trained,
        "span": span_of(self_all["penalty"]),
        "n_negative": int((self_all["penalty"] < 0).sum()),
        "n": int(len(self_all)),
        "identity_max_abs": as_float(self_identity["penalty"].abs().max()) if len(self_identity) else None,
        "zoo_steps": steps_of_self,
        "models": self_models,
    }


def _identity_span(cells: pd.DataFrame, pairs: Sequence[Mapping[str, Any]]) -> list[float] | None:
    """The span of identity stitching's penalties between the pairs' models, both directions."""
    values = []
    for p in pairs:
        for f, g in ((p["solu"], p["gelu"]), (p["gelu"], p["solu"])):
            values += list(
                cells.loc[
                    (cells["model_f"] == f) & (cells["model_g"] == g) & (cells["stitch"] == "identity"), "penalty"
                ]
            )
    return span_of(values)


# ---- claims ---------------------------------------------------------------------------------------------------------

#: The two populations of SoLU/GeLU pairs: (key of the findings, id word, the text that opens a sentence).
POPULATIONS = (
    ("solu_gelu", "between", "Between SoLU and GeLU with different seeds"),
    ("control", "control", "In the same-seed control"),
)

#: The two directions of a pair: (key of the pair's kind entry, id word, label, the target whose floor it is set
#: against).
DIRECTIONS = (("s_to_g", "solu_to_gelu", "SoLU→GeLU", "GeLU"), ("g_to_s", "gelu_to_solu", "GeLU→SoLU", "SoLU"))

BROWN = "the asymmetry Brown et al. report"


def _finite(values: Sequence[Any] | None) -> list[float]:
    return [float(v) for v in values or [] if v is not None and math.isfinite(float(v))]


def cell_asymmetries(entry: Mapping[str, Any]) -> list[float]:
    """Per layer cell of one pair and φ kind: SoLU→GeLU's excess over GeLU's floor less GeLU→SoLU's (at the
    transposed layers) over SoLU's (what ``_stitch_pair`` counts)."""
    forward, backward = entry["s_to_g"], entry["g_to_s"]
    reverse = {tuple(layers): e for layers, e in zip(backward["layers"], backward["excess"])}
    return [
        float(e) - float(reverse[(lg, lf)])
        for (lf, lg), e in zip(forward["layers"], forward["excess"])
        if e is not None and reverse.get((lg, lf)) is not None
    ]


def _scope_text(n_kinds: int, n_depths: int) -> str:
    """ ", with both φ kinds and at both depths": the scope of "at every layer" over the φ kinds and depths the cells
    span."""
    kinds = ", with both φ kinds" if n_kinds == 2 else ", with every φ kind" if n_kinds > 2 else ""
    depths = " and at both depths" if n_depths == 2 else " and at every depth" if n_depths > 2 else ""
    return kinds + depths


def _pair_text(pairs: Sequence[Mapping[str, Any]]) -> str:
    return list_text([f"`{p['solu']}` and `{p['gelu']}`" for p in pairs])


def _asymmetry_claims(
    prefix: str, pairs: Sequence[Mapping[str, Any]], trained: Sequence[str], lead: Mapping[str, str]
) -> list[Claim]:
    """ "Every cell" / "some cells" / "no cell" of the asymmetry over the pairs' floors (``lead``: each one's
    template); margins from the per-cell asymmetries ``a`` (SoLU→GeLU over its floor less GeLU→SoLU over its):
    ``min(a)``; ``min(max(a), −min(a))``; ``−max(a)`` (:func:`every_some_none`)."""
    cells = [a for p in pairs for kind in trained if kind in p["kinds"] for a in cell_asymmetries(p["kinds"][kind])]
    n_kinds = len([k for k in trained if any(k in p["kinds"] for p in pairs)])
    values = {
        "asymmetry": span_of(cells),
        "n": len(cells),
        "n_more": sum(a > 0 for a in cells),
        "n_less": sum(a < 0 for a in cells),
        "scope": _scope_text(n_kinds, len({p["depth"] for p in pairs})),
        "pairs": _pair_text(pairs),
    }
    ids = (f"{prefix}.every_cell", f"{prefix}.some_cells", f"{prefix}.no_cell")
    return every_some_none(ids, (lead["every_cell"], lead["some_cells"], lead["no_cell"]), cells, values)


def _floor_margins(parts: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The margins of :func:`_floor_claims` for one φ kind and direction (``parts``: its entry per pair), from the
    per-cell interval gaps (:func:`spread_margins`)."""
    margins: dict[str, float | None] = {}
    for side in ("above", "below"):
        every_gap, some_gap, _ = spread_margins([v for p in parts for v in p[f"{side}_gap"]])
        margins[f"{side}_every"] = every_gap
        margins[f"{side}_partly"] = some_gap
    margins["within"] = spread_margins([v for p in parts for s in ("above", "below") for v in p[f"{s}_gap"]])[2]
    return margins


def _floor_claims(
    population: str, opening: str, pairs: Sequence[Mapping[str, Any]], trained: Sequence[str]
) -> list[Claim]:
    """Per φ kind and direction, merged over ``pairs``: where its bootstrap intervals lie against the target's floor.
    Margins over the layer cells, from ``g`` = the interval's gap above the floor's (``above_gap``) or below it
    (``below_gap``): ``above_every`` min(g); ``above_partly`` (above at some but not every layer)
    min(max(g), −min(g)); ``below_every`` and ``below_partly`` likewise; ``within`` (overlapping the floor at every
    layer) −max(every gap above and below) (:func:`_floor_margins`)."""
    claims: list[Claim] = []
    for kind in trained:
        sides = [p["kinds"][kind] for p in pairs if kind in p["kinds"]]
        if not sides:
            continue
        label = KIND_LABELS.get(kind, kind)
        for key, word, direction, target in DIRECTIONS:
            parts = [s[key] for s in sides]
            n = sum(p["n"] for p in parts)
            counts = {"above": sum(p["above_floor"] for p in parts), "below": sum(p["below_floor"] for p in parts)}
            values = {
                "penalty": span_of(v for p in parts for v in (p["penalty_span"] or [])),
                "excess": span_of(v for p in parts for v in (p["excess_span"] or [])),
                "n": n,
                **counts,
            }
            head = (
                f"{opening}, {label} φ stitching {direction} costs {{penalty:+3}} nats/token ({{excess:+3}} "
                f"relative to {target}'s floor), its interval "
            )
            margins = _floor_margins(parts)
            texts = {
                "above_every": f"above {target}'s floor at every layer ({{above:d}} of {{n:d}})",
                "above_partly": f"above {target}'s floor at {{above:d}} of {{n:d}} layers",
                "below_every": f"below {target}'s floor at every layer ({{below:d}} of {{n:d}})",
                "below_partly": f"below {target}'s floor at {{below:d}} of {{n:d}} layers",
                "within": f"overlapping {target}'s floor at every layer ({{n:d}})",
            }
            for relation, text in texts.items():
                claims.append(
                    Claim(
                        f"stitching.floor.{population}.{kind}.{word}.{relation}", head + text, margins[relation], values
                    )
                )
    return claims


def claims_stitching(findings: Mapping[str, Any]) -> list[Claim]:
    """The stitching paragraph's claims (:mod:`thinkalike.reports.findings.claims`), every penalty set against its
    floor (the target stitched into itself at the same layer with the same φ kind); trained φ kinds only, as the
    paragraph. ``a`` is a layer cell's asymmetry: SoLU→GeLU's excess over GeLU's floor less GeLU→SoLU's over
    SoLU's, at the transposed layers.

    * ``stitching.asymmetry.{every_cell,some_cells,no_cell}`` — SoLU/GeLU pairs with different seeds, over every
      φ kind, depth and layer: SoLU→GeLU costs more at every cell (margin ``min(a)``), at some but not all
      (``min(max(a), −min(a))``), less at every cell (``−max(a)``);
    * ``stitching.control_asymmetry.{every_cell,some_cells,no_cell}`` — the same for the same-seed control;
    * ``stitching.control_asymmetry.{smaller,larger}`` — the control's mean asymmetry (mean of ``a`` per φ kind,
      averaged) against the different-seed pairs' at the control's depth: margin ``between − control`` and
      ``control − between``;
    * ``stitching.asymmetry.<kind>.<solu>.<gelu>`` / ``stitching.asymmetry_reversed.<kind>.<solu>.<gelu>`` — per
      pair (control included) and φ kind: SoLU→GeLU costs more over its floor at every layer (``min(a)``), or
      GeLU→SoLU does (``−max(a)``);
    * ``stitching.floor.<between|control>.<kind>.<solu_to_gelu|gelu_to_solu>.<relation>`` — per population, φ
      kind and direction (pairs merged): the intervals against the target's floor (:func:`_floor_claims`: relation
      ``above_every``, ``above_partly``, ``below_every``, ``below_partly``, ``within``);
    * ``stitching.self_floor.{mostly_below_zero,mostly_not_below_zero}`` — the share of trained self-stitching
      floors below zero less one half, and one half less it;
    * ``stitching.self_floor.{lowest_at_embeddings,lowest_past_embeddings}`` — per trained φ kind, the lowest mean
      floor past layer 0 less layer 0's, the smallest over kinds (and its negation);
    * ``stitching.self_floor.{gain_at_embeddings,no_gain_at_embeddings}`` — minus the highest layer-0 floor (every
      floor at layer 0 below zero), and that highest floor;
    * ``stitching.identity.{control_below_between,control_not_below_between}`` — identity stitching's lowest
      penalty between SoLU and GeLU with different seeds less the same-seed control's highest, and its negation.
    """
    st = findings.get("stitching") or {}
    if not_run_sentence("Stitching", st):
        return []
    trained = [k for k in st.get("kinds") or [] if k != "identity"]
    sg = [p for p in st.get("solu_gelu") or [] if p.get("kinds")]
    control = [p for p in st.get("control") or [] if p.get("kinds")]
    claims: list[Claim] = []
    if sg:
        claims += _asymmetry_claims("stitching.asymmetry", sg, trained, _BETWEEN_ASYMMETRY)
    if control:
        claims += _asymmetry_claims("stitching.control_asymmetry", control, trained, _CONTROL_ASYMMETRY)
        claims += _control_mean_claims(sg, control, trained)
    claims += _pair_asymmetry_claims([*sg, *control], trained)
    for key, population, opening in POPULATIONS:
        pairs = sg if key == "solu_gelu" else control
        claims += _floor_claims(population, opening, pairs, trained)
    claims += _self_claims(st)
    claims += _identity_claims(st)
    return claims


#: The templates of ``stitching.asymmetry.{every_cell,some_cells,no_cell}`` (:func:`_asymmetry_claims`).
_BETWEEN_ASYMMETRY = {
    "every_cell": "Over their floors, SoLU's features stitched into GeLU cost more than GeLU's into SoLU at "
    "every layer{scope} — " + BROWN + " (by {asymmetry:+3} nats/token per layer cell)",
    "some_cells": "Over their floors, SoLU's features stitched into GeLU cost more than GeLU's into SoLU at "
    "{n_more:d} of {n:d} layer cells (φ kinds × depths × layers) and less at {n_less:d} — " + BROWN + " holds only in "
    "part",
    "no_cell": "Over their floors, SoLU's features stitched into GeLU cost less than GeLU's into SoLU at every "
    "one of {n:d} layer cells — not " + BROWN,
}
#: The templates of ``stitching.control_asymmetry.{every_cell,some_cells,no_cell}`` (:func:`_asymmetry_claims`).
_CONTROL_ASYMMETRY = {
    "every_cell": "The same-seed control ({pairs}) keeps the asymmetry over the floors at every layer{scope} "
    "(by {asymmetry:+3} nats/token per layer cell)",
    "some_cells": "The same-seed control ({pairs}) keeps the asymmetry over the floors at {n_more:d} of {n:d} "
    "layer cells and reverses it at {n_less:d}",
    "no_cell": "The same-seed control ({pairs}) loses the asymmetry: over the floors SoLU→GeLU costs less "
    "than GeLU→SoLU at every one of {n:d} layer cells",
}


def _mean_asymmetries(pairs: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> list[float]:
    """The pairs' mean asymmetries (``mean_asymmetry``), one per pair and trained φ kind that has one."""
    return [
        m for p in pairs for k in trained if k in p["kinds"] if (m := p["kinds"][k].get("mean_asymmetry")) is not None
    ]


def _control_mean_claims(
    sg: Sequence[Mapping[str, Any]], control: Sequence[Mapping[str, Any]], trained: Sequence[str]
) -> list[Claim]:
    """``stitching.control_asymmetry.{smaller,larger}``: the control's mean asymmetry against the different-seed
    pairs' at the control's depths (margins: :func:`claims_stitching`)."""
    depths = {c["depth"] for c in control}
    c_mean = _mean_asymmetries(control, trained)
    sg_mean = _mean_asymmetries([p for p in sg if p["depth"] in depths], trained)
    control_mean = float(np.mean(c_mean)) if c_mean else None
    between_mean = float(np.mean(sg_mean)) if sg_mean else None
    values: dict[str, Any] = {"control": control_mean, "between": between_mean, "pairs": _pair_text(control)}
    template = (
        "The same-seed control's asymmetry over the floors is {} (SoLU→GeLU less GeLU→SoLU, {{control:+3}} "
        "nats/token on average) than that of SoLU and GeLU with different seeds at the same depth ({{between:+3}})"
    )
    return either_way(
        "stitching.control_asymmetry.smaller",
        template.format("smaller"),
        "stitching.control_asymmetry.larger",
        template.format("larger"),
        between_mean,
        control_mean,
        **values,
    )


def _pair_asymmetry_claims(pairs: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> list[Claim]:
    """``stitching.asymmetry.<kind>.<solu>.<gelu>`` and ``stitching.asymmetry_reversed.<kind>.<solu>.<gelu>``: per
    pair (each once) and trained φ kind, SoLU→GeLU (or GeLU→SoLU) costs more over its floor at every layer: margins
    ``min(a)`` and ``−max(a)`` (:func:`spread_margins`)."""
    claims: list[Claim] = []
    seen: set[str] = set()
    for pair in pairs:
        same = "the same-seed " if pair.get("same_seed") else ""
        for kind in trained:
            if kind not in pair["kinds"]:
                continue
            cells = cell_asymmetries(pair["kinds"][kind])
            key = f"{kind}.{pair['solu']}.{pair['gelu']}"
            if key in seen:
                continue
            seen.add(key)
            values = {
                "asymmetry": span_of(cells),
                "kind": KIND_LABELS.get(kind, kind),
                "solu": pair["solu"],
                "gelu": pair["gelu"],
            }
            which = "{kind} φ between `{solu}` and " + same + "`{gelu}`"
            every_cell, _, no_cell = spread_margins(cells)
            for name, lead, margin in (
                ("asymmetry", "SoLU→GeLU stitching costs more than GeLU→SoLU", every_cell),
                ("asymmetry_reversed", "GeLU→SoLU stitching costs more than SoLU→GeLU", no_cell),
            ):
                group = f"Over its floor, {lead} at every layer with"
                claims.append(
                    Claim(
                        f"stitching.{name}.{key}",
                        f"{group} {which}, by {{asymmetry:+3}} nats/token (SoLU→GeLU less GeLU→SoLU)",
                        margin,
                        values,
                        group,
                        which + " ({asymmetry:+3})",
                    )
                )
    return claims


def _self_claims(st: Mapping[str, Any]) -> list[Claim]:
    """The self-stitching floors' claims (margins: :func:`claims_stitching`)."""
    own = st.get("self") or {}
    trained = own.get("trained") or {}
    if not own.get("n"):
        return []
    share = own["n_negative"] / own["n"]
    steps = f" ({ints_text(own['zoo_steps'])} training steps)" if own.get("zoo_steps") else ""
    values = {
        "span": own.get("span"),
        "n_negative": own["n_negative"],
        "n": own["n"],
        "train_tokens": ints_text(st.get("train_tokens")),
    }
    claims = either_way(
        "stitching.self_floor.mostly_below_zero",
        "Most self-stitching floors are below zero ({n_negative:d} of {n:d}; {span:+3} nats/token): with "
        "{train_tokens} training tokens a trained φ on an under-trained model" + steps + " acts as a little "
        "extra training, so penalties down to the floor are not a gain from the other model",
        "stitching.self_floor.mostly_not_below_zero",
        "Most self-stitching floors are not below zero (below at {n_negative:d} of {n:d}; {span:+3} nats/token)",
        share,
        0.5,
        **values,
    )
    if trained:
        claims += _layer0_claims(trained)
    return claims


def _lowest_past_layer0(trained: Mapping[str, Any]) -> float | None:
    """Per trained φ kind, the lowest mean floor past layer 0 less layer 0's, the smallest over the kinds (``None``
    when a kind lacks either)."""
    gaps: list[float] = []
    for v in trained.values():
        at0 = [m for layer, m in v["by_layer"] if layer == 0 and m is not None]
        past = [m for layer, m in v["by_layer"] if layer != 0 and m is not None]
        if at0 and past:
            gaps.append(min(past) - at0[0])
    return min(gaps) if len(gaps) == len(trained) else None


def _layer0_claims(trained: Mapping[str, Any]) -> list[Claim]:
    """The self-stitching floors at the embeddings (layer 0): lowest there with every φ kind (or not), and every
    floor there below zero (or not) (margins: :func:`claims_stitching`)."""
    layer0 = [v["layer0"] for v in trained.values() if v.get("layer0")]
    values = {
        "layer0": span_of(x for span in layer0 for x in span),
        "kinds": list_text([KIND_LABELS.get(k, k) for k in trained]),
    }
    lowest = Claim(
        "stitching.self_floor.lowest_at_embeddings",
        "The self-stitching floors are lowest at the embeddings (layer 0: {layer0:+3} nats/token) with "
        "every φ kind ({kinds})",
        _lowest_past_layer0(trained),
        values,
    )
    claims = mirrored(
        lowest,
        "stitching.self_floor.lowest_past_embeddings",
        "With some φ kind the self-stitching floors are not lowest at the embeddings (layer 0: {layer0:+3} nats/token)",
    )
    if layer0:
        gain = Claim(
            "stitching.self_floor.gain_at_embeddings",
            "At the embeddings (layer 0) every self-stitching floor is below zero ({layer0:+3} nats/token): a gain",
            -max(span[1] for span in layer0),
            values,
        )
        claims += mirrored(
            gain,
            "stitching.self_floor.no_gain_at_embeddings",
            "At the embeddings (layer 0) not every self-stitching floor is below zero ({layer0:+3} nats/token)",
        )
    return claims


def _identity_claims(st: Mapping[str, Any]) -> list[Claim]:
    """Identity stitching between SoLU and GeLU with different seeds against the same-seed control (margins:
    :func:`claims_stitching`)."""
    between, control = st.get("identity_between"), st.get("identity_control")
    if not between or not control:
        return []
    own = (st.get("self") or {}).get("identity_max_abs")
    itself = "n/a" if own is None else "exactly 0" if own == 0 else f"at most {number_text(own, 3)}"
    return either_way(
        "stitching.identity.control_below_between",
        "Identity stitching costs {itself} for a model with itself and {between} nats/token between SoLU "
        "and GeLU with different seeds, {control} for the same-seed control: identity stitching between "
        "two separately trained models measures mostly their initialisation",
        "stitching.identity.control_not_below_between",
        "Identity stitching's penalties for the same-seed control ({control} nats/token) reach those "
        "between SoLU and GeLU with different seeds ({between})",
        between[0],
        control[1],
        between=between,
        control=control,
        itself=itself,
    )
