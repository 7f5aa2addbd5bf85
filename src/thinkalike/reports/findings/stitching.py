"""The stitching paragraph of the findings: every penalty set against its self-stitching floor (module docstring of
:mod:`thinkalike.reports.findings`), the SoLU/GeLU asymmetry, the same-seed control and identity stitching.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.reports.findings.text import (as_float, int_list, ints_text, list_text, missing_section,
                                              not_run_sentence, number_text, range_text, span_of, table_of)


KIND_LABELS = {"identity": "identity", "affine": "affine", "affine_ln": "affine + LayerNorm"}


STITCH_KEY = ["model_f", "layer_f", "model_g", "layer_g", "stitch"]


def stitch_cells(penalties: pd.DataFrame) -> pd.DataFrame:
    """One row per stitch (module docstring: several φ seeds averaged, intervals joined)."""
    grouped = penalties.groupby(STITCH_KEY, sort=False, dropna=False)
    cells = grouped.agg(penalty=("penalty", "mean"), ci_low=("ci_low", "min"), ci_high=("ci_high", "max"),
                        n_rows=("penalty", "size")).reset_index()
    return cells


def _cell(cells: pd.DataFrame, f: str, lf: int, g: str, lg: int, kind: str) -> pd.Series | None:
    rows = cells[(cells["model_f"] == f) & (cells["layer_f"] == lf) & (cells["model_g"] == g)
                 & (cells["layer_g"] == lg) & (cells["stitch"] == kind)]
    return None if rows.empty else rows.iloc[0]


def _direction(cells: pd.DataFrame, f: str, g: str, kind: str) -> dict[str, Any] | None:
    """f → g of one kind against g's floor (g → g at the target layer, same kind), per layer cell."""
    rows = cells[(cells["model_f"] == f) & (cells["model_g"] == g) & (cells["stitch"] == kind)]
    if rows.empty:
        return None
    layers, penalties, excess, above, below = [], [], [], 0, 0
    for row in rows.sort_values(["layer_f", "layer_g"]).itertuples():
        floor = _cell(cells, g, int(row.layer_g), g, int(row.layer_g), kind)
        layers.append([int(row.layer_f), int(row.layer_g)])
        penalties.append(float(row.penalty))
        if floor is None:
            excess.append(math.nan)
            continue
        excess.append(float(row.penalty) - float(floor["penalty"]))
        above += bool(row.ci_low > floor["ci_high"])
        below += bool(row.ci_high < floor["ci_low"])
    return {"layers": layers, "penalty": [as_float(p) for p in penalties], "excess": [as_float(e) for e in excess],
            "penalty_span": span_of(penalties), "excess_span": span_of(excess),
            "above_floor": above, "below_floor": below, "n": len(layers)}


def _stitch_pair(cells: pd.DataFrame, pair: Mapping[str, Any], kinds: Sequence[str]) -> dict[str, Any]:
    s, g = pair["solu"], pair["gelu"]
    by_kind = {}
    for kind in kinds:
        forward, backward = _direction(cells, s, g, kind), _direction(cells, g, s, kind)
        if forward is None or backward is None:
            continue
        reverse = {tuple(layers): e for layers, e in zip(backward["layers"], backward["excess"])}
        asym = [e - reverse[(lg, lf)] for (lf, lg), e in zip(forward["layers"], forward["excess"])
                if e is not None and reverse.get((lg, lf)) is not None]
        by_kind[kind] = {"s_to_g": forward, "g_to_s": backward, "n_cells": len(asym),
                         "asymmetric": int(sum(a > 0 for a in asym)), "reversed": int(sum(a < 0 for a in asym)),
                         "mean_asymmetry": as_float(np.mean(asym)) if asym else None}
    return {**pair, "kinds": by_kind}


def _seed_columns(trained: pd.DataFrame) -> dict[str, Any] | None:
    """φ seeds per trained stitch (``n_phi_seeds``) and the largest spread of a stitch's penalty across them
    (``penalty_seed_max − penalty_seed_min``) and standard deviation, when the table has those columns."""
    if "n_phi_seeds" not in trained or trained.empty:
        return None
    spread = (trained["penalty_seed_max"] - trained["penalty_seed_min"]) if {"penalty_seed_max", "penalty_seed_min"} \
        <= set(trained.columns) else pd.Series(dtype=float)
    return {"n": int_list(trained["n_phi_seeds"]), "max_spread": as_float(spread.max()) if len(spread) else None,
            "max_std": as_float(trained["penalty_seed_std"].max()) if "penalty_seed_std" in trained else None}


def collect_stitching(tables: Mapping[str, Any], roles: Mapping[str, Any],
                       parameters: Mapping[str, Any]) -> dict[str, Any]:
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
    trained_kinds = [k for k in kinds if k != "identity"]
    trained = penalties[penalties["stitch"] != "identity"]
    settings = (parameters.get("stitching") or {})
    phis = table_of(tables, "stitching_phis")
    column = lambda table, name: int_list(table[name]) if table is not None and name in table and len(table) else []  # noqa: E731
    grid = settings.get("layers") or ("diagonal" if (cells["layer_f"] == cells["layer_g"]).all() else None)
    self_rows = cells[cells["model_f"] == cells["model_g"]]
    self_trained = {}
    for kind in trained_kinds:
        part = self_rows[self_rows["stitch"] == kind]
        if len(part):
            by_layer = part.groupby("layer_f")["penalty"].mean()
            self_trained[kind] = {"span": span_of(part["penalty"]),
                                  "layer0": span_of(part.loc[part["layer_f"] == 0, "penalty"]),
                                  "lowest_layer": int(by_layer.idxmin())}
    self_all = self_rows[self_rows["stitch"].isin(trained_kinds)]
    self_identity = self_rows[self_rows["stitch"] == "identity"]

    def identity_span(pairs: Sequence[Mapping[str, Any]]) -> list[float] | None:
        values = []
        for p in pairs:
            for f, g in ((p["solu"], p["gelu"]), (p["gelu"], p["solu"])):
                values += list(cells.loc[(cells["model_f"] == f) & (cells["model_g"] == g)
                                         & (cells["stitch"] == "identity"), "penalty"])
        return span_of(values)

    zoo_steps = (tables.get("zoo_summary") if isinstance(tables.get("zoo_summary"), pd.DataFrame) else None)
    self_models = sorted(set(self_rows["model_f"]))
    steps_of_self = (int_list(zoo_steps.loc[zoo_steps["model"].isin(self_models), "steps"])
                     if zoo_steps is not None else [])
    return {
        "grid": grid, "kinds": kinds, "n_stitches": int(len(cells)),
            "n_trained": int((cells["stitch"] != "identity").sum()),
        "n_rows": int(len(penalties)), "n_ordered_pairs": int(len(cells[["model_f", "model_g"]].drop_duplicates())),
        "steps": column(trained, "steps"), "tokens_per_step": column(trained, "tokens_per_step"),
        "train_tokens": column(trained, "train_tokens"), "eval_tokens": column(penalties, "eval_tokens"),
        "n_eval_sequences": column(phis, "n_eval_sequences"),
        "train_source": sorted(set(penalties["train_source"].dropna().astype(str))) if "train_source" in penalties
            else [],
        "ci_level": span_of(penalties["ci_level"]) if "ci_level" in penalties else None,
        "exclude_special_targets": (sorted({bool(v) for v in penalties["exclude_special_targets"].dropna()})
                                    if "exclude_special_targets" in penalties else None),
        "phi_seeds": int(cells["n_rows"].max()),
        "n_targets": column(penalties, "n_targets"),
        "seed_columns": _seed_columns(trained),
        "solu_gelu": [_stitch_pair(cells, p, kinds) for p in roles["solu_gelu"]],
        "control": [_stitch_pair(cells, p, kinds) for p in roles["control"]],
        "self": {"trained": self_trained, "span": span_of(self_all["penalty"]),
                 "n_negative": int((self_all["penalty"] < 0).sum()), "n": int(len(self_all)),
                 "identity_max_abs": as_float(self_identity["penalty"].abs().max()) if len(self_identity) else None,
                 "zoo_steps": steps_of_self, "models": self_models},
        "identity_between": identity_span(roles["solu_gelu"]),
        "identity_control": identity_span(roles["control"]),
    }


def _direction_text(label: str, side: Mapping[str, Any], target: str) -> str:
    floor = []
    if side["above_floor"]:
        floor.append(f"above {target}'s floor at {side['above_floor']}")
    if side["below_floor"]:
        floor.append(f"below it at {side['below_floor']}" if side["above_floor"]
                     else f"below {target}'s floor at {side['below_floor']}")
    where = ((list_text(floor) + f" of {side['n']} layers") if floor
             else f"overlapping {target}'s floor at all {side['n']} layers")
    return (f"{label} {range_text(side['penalty_span'], 3, signed=True)} ({range_text(side['excess_span'], 3, signed=True)} "
            f"relative to the floor; interval {where})")


def _asymmetry(pairs: Sequence[Mapping[str, Any]], kinds: Sequence[str]) -> tuple[int, int, int]:
    """(cells where S→G exceeds G→S over their floors, cells where it is the other way, cells)."""
    asym = rev = n = 0
    for pair in pairs:
        for kind in kinds:
            if kind in pair["kinds"]:
                asym += pair["kinds"][kind]["asymmetric"]
                rev += pair["kinds"][kind]["reversed"]
                n += pair["kinds"][kind]["n_cells"]
    return asym, rev, n


def render_stitching(findings: Mapping[str, Any]) -> str:
    """The stitching paragraph from the collected numbers; the asymmetry it states is decided from them."""
    st = findings["stitching"]
    if (message := not_run_sentence("Stitching", st)):
        return message
    trained = [k for k in st["kinds"] if k != "identity"]
    level = f"{number_text(st['ci_level'][0] * 100, 0)} %" if st.get("ci_level") else "n/a"
    source = {"train_sequences": "the corpus's training sequences", "heldout": "held-out sequences"}
    sources = list_text([source.get(s, s) for s in st["train_source"]]) or "n/a"
    seeds = f", {st['phi_seeds']} φ seeds each (averaged)" if st["phi_seeds"] > 1 else ""
    seed_columns = st.get("seed_columns")
    if seed_columns and seed_columns["n"] and max(seed_columns["n"]) > 1:
        seeds = (f", {ints_text(seed_columns['n'])} φ seeds per stitch (penalties are the first seed's; across seeds "
                 f"a penalty varies by up to {number_text(seed_columns['max_spread'], 3)})")
    targets = ""
    if st.get("n_targets"):
        excluded = st.get("exclude_special_targets") == [True]
        targets = (f" ({ints_text(st['n_targets'])} scored targets"
                   + (", special tokens excluded" if excluded else "") + ")")
    per_step = f" of {ints_text(st['tokens_per_step'])} tokens" if st.get("tokens_per_step") else ""
    head = (f"Stitching ({st['grid'] or 'mixed'} layers; φ trained for {ints_text(st['steps'])} SGD steps{per_step} on "
            f"{sources}, {ints_text(st['train_tokens'])} tokens{seeds}, and evaluated on "
            f"{ints_text(st['n_eval_sequences'])} held-out sequences, {ints_text(st['eval_tokens'])} tokens{targets}; "
            f"penalties in nats/token with {level} bootstrap intervals, each set against its floor: the target "
            "model stitched into itself at the same layer with the same φ kind).")
    sentences = [head]
    sg = [p for p in st["solu_gelu"] if p["kinds"]]
    if sg:
        asym, rev, n = _asymmetry(sg, trained)
        depths = sorted({p["depth"] for p in sg})
        if n and asym == n:
            scope = "at every layer" + (", with both φ kinds" if len(trained) == 2 else ", with every φ kind"
                                        if len(trained) > 2 else "") + (" and at both depths" if len(depths) == 2
                                                                          else " and at every depth"
                                                                          if len(depths) > 2 else "")
            claim = (f"Over their floors, SoLU's features stitched into GeLU cost more than GeLU's into SoLU {scope} "
                     "— the asymmetry Brown et al. report")
        elif asym:
            claim = (f"Over their floors, SoLU's features stitched into GeLU cost more than GeLU's into SoLU at "
                     f"{asym} of {n} layer cells (φ kinds × depths × layers) and less at {rev} — the asymmetry "
                     "Brown et al. report holds only in part")
        else:
            claim = ("Over their floors, SoLU's features stitched into GeLU cost no more than GeLU's into SoLU at any "
                     f"of {n} layer cells — not the asymmetry Brown et al. report")
        parts = []
        for kind in trained:
            sides = [p["kinds"][kind] for p in sg if kind in p["kinds"]]
            if not sides:
                continue
            parts.append(f"{KIND_LABELS.get(kind, kind)} " + _merged_direction("SoLU→GeLU", sides, "s_to_g", "GeLU")
                         + ", " + _merged_direction("GeLU→SoLU", sides, "g_to_s", "SoLU"))
        sentences.append(claim + ": " + "; ".join(parts) + ".")
    else:
        sentences.append("No SoLU/GeLU pair with different seeds was stitched.")
    control = [p for p in st["control"] if p["kinds"]]
    if control:
        asym, rev, n = _asymmetry(control, trained)
        sg_mean = [p["kinds"][k]["mean_asymmetry"] for p in sg for k in trained if k in p["kinds"]
                   and p["depth"] in {c["depth"] for c in control}]
        c_mean = [p["kinds"][k]["mean_asymmetry"] for p in control for k in trained if k in p["kinds"]]
        if n and asym == n:
            verdict = "keeps the asymmetry"
            if sg_mean and c_mean:
                verdict += (", smaller" if np.mean(c_mean) < np.mean(sg_mean) else ", no smaller")
        elif asym:
            verdict = f"keeps the asymmetry at {asym} of {n} layer cells"
        else:
            verdict = "loses the asymmetry"
        parts = []
        for kind in trained:
            sides = [p["kinds"][kind] for p in control if kind in p["kinds"]]
            if sides:
                parts.append(f"{KIND_LABELS.get(kind, kind)} " + _merged_direction("SoLU→GeLU", sides, "s_to_g", "GeLU")
                             + ", " + _merged_direction("GeLU→SoLU", sides, "g_to_s", "SoLU"))
        sentences.append(f"The same-seed control {verdict}: " + "; ".join(parts) + ".")
    own = st["self"]
    if own["span"]:
        embeddings = [v["layer0"] for v in own["trained"].values() if v["layer0"]]
        lowest_at_0 = all(v["lowest_layer"] == 0 for v in own["trained"].values())
        steps = f" ({ints_text(own['zoo_steps'])} training steps)" if own["zoo_steps"] else ""
        text = f"Self-stitching floors are {range_text(own['span'], 3, signed=True)}"
        if own["n_negative"] * 2 > own["n"]:
            text += (f": with {ints_text(st['train_tokens'])} training tokens a trained φ on an under-trained "
                     f"model{steps} acts as a little extra training")
            if lowest_at_0 and embeddings:
                text += (", most at the embeddings (layer 0: "
                         f"{range_text([min(e[0] for e in embeddings), max(e[1] for e in embeddings)], 3, signed=True)})")
            text += ", so penalties down to the floor are not a gain from the other model"
        sentences.append(text + ".")
    identity = []
    if own["identity_max_abs"] is not None:
        identity.append("Identity stitching costs " + ("exactly 0" if own["identity_max_abs"] == 0 else
                                                       f"at most {number_text(own['identity_max_abs'], 3)}")
                        + " for a model with itself")
    if st["identity_between"]:
        identity.append(f"{range_text(st['identity_between'], 2)} between SoLU and GeLU with different seeds")
    if st["identity_control"]:
        text = f"{range_text(st['identity_control'], 2)} for the same-seed control"
        if st["identity_between"] and st["identity_control"][1] < st["identity_between"][0]:
            text += (": identity stitching between two separately trained models measures mostly their "
                     "initialisation")
        identity.append(text)
    if identity:
        sentences.append(list_text(identity[:1] + [", ".join(identity[1:])] if len(identity) > 1 else identity,
                               "and").replace(" and ", " and ", 1) + ".")
    sentences.append("(`stitching.train_source: heldout`, φ trained on the held-out sequences left after the "
                     "evaluation split, is not part of the default run; conf/base/parameters_stitching.yml notes "
                     "what it gave.)")
    return " ".join(sentences)


def _merged_direction(label: str, sides: Sequence[Mapping[str, Any]], key: str, target: str) -> str:
    parts = [s[key] for s in sides]
    merged = {"penalty_span": span_of(v for p in parts for v in (p["penalty_span"] or [])),
              "excess_span": span_of(v for p in parts for v in (p["excess_span"] or [])),
              "above_floor": sum(p["above_floor"] for p in parts), "below_floor": sum(p["below_floor"] for p in parts),
              "n": sum(p["n"] for p in parts)}
    return _direction_text(label, merged, target)
