"""The MLEM paragraph of the findings: held-out Spearman per layer, the features that explain each layer, the odd
one out of the feature-based and RSA similarities, and the untrained controls (:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from thinkalike.reports.findings.text import (as_float, capitalised, code_text, int_list, ints_text, list_text,
                                              missing_section, not_run_sentence, number_text, range_text, signed_text,
                                              span_of, table_of, tokens_text, without_models)


FEATURE_LABELS = {"pos": "part of speech", "word_role": "the word's syntactic role", "word_position": "word position",
                  "number": "number", "tense": "tense", "in_relative_clause": "inside/outside a relative clause"}


def _collect_untrained(tables: Mapping[str, Any], untrained: Sequence[str]) -> list[dict[str, Any]]:
    """Each untrained control's MLEM held-out Spearman over its layers (the trained models' is beside it)."""
    profiles = table_of(tables, "mlem_profiles")
    if profiles is None or profiles.empty:
        return []
    overall = profiles[(profiles["fold"] == -1) & profiles["model"].isin(untrained)]
    return [{"model": str(model), "spearman": span_of(rows.groupby("layer")["spearman_heldout"].first()),
             "n_layers": int(rows["layer"].nunique())} for model, rows in overall.groupby("model", sort=True)]


def collect_mlem(tables: Mapping[str, Any], roles: Mapping[str, Any],
                  untrained: Sequence[str] = ()) -> dict[str, Any]:
    """MLEM of the trained models; the ``untrained`` controls' held-out Spearman beside it."""
    controls = _collect_untrained(tables, untrained)
    tables = without_models(tables, untrained)
    profiles = table_of(tables, "mlem_profiles")
    if profiles is None:
        return missing_section("mlem_profiles")
    if profiles.empty:
        return {"empty": True}
    overall = profiles[profiles["fold"] == -1]  # thinkalike.mlem.fit.ALL_FOLDS
    folds = profiles.loc[profiles["fold"] >= 0, "fold"]
    layers = overall.groupby(["model", "layer"], sort=False)
    spearman = layers["spearman_heldout"].first()
    wide = overall.pivot_table(index=["model", "layer"], columns="feature", values="importance", aggfunc="first")
    top = wide.idxmax(axis=1)
    dominant = str(top.value_counts().idxmax())
    models = list(dict.fromkeys(overall["model"]))
    last = {m: int(overall.loc[overall["model"] == m, "layer"].max()) for m in models}

    def rows_of(names: Iterable[str], which: str) -> pd.Index:
        keys = [k for k in spearman.index if k[0] in set(names)]
        if which == "embeddings":
            keys = [k for k in keys if k[1] == 0]
        elif which == "first_block":
            keys = [k for k in keys if k[1] == 1]
        elif which == "blocks":
            keys = [k for k in keys if k[1] >= 1]
        return pd.Index(keys)

    def runner_up(keys: pd.Index) -> dict[str, Any] | None:
        if len(keys) == 0:
            return None
        part = wide.loc[keys].drop(columns=[dominant], errors="ignore")
        if part.empty or part.isna().all().all():
            return None
        feature = str(part.mean().idxmax())
        return {"feature": feature, "span": span_of(part[feature]), "max": as_float(part[feature].max())}

    bridges = [m for m in roles["bridges"] if m in models]
    neox = [m for m in roles["gpt_neox"] if m in models]
    groups = {
        "bridges_embeddings": rows_of(bridges, "embeddings"), "bridges_first_block": rows_of(bridges, "first_block"),
        "bridges_blocks": rows_of(bridges, "blocks"),
        "neox_embeddings": rows_of(neox, "embeddings"), "neox_blocks": rows_of(neox, "blocks"),
    }
    mamba = [{"model": m, "layer": last[m], "spearman": as_float(spearman[(m, last[m])]),
              "top": str(top[(m, last[m])]), "top_importance": as_float(wide.loc[(m, last[m])].max()),
              "dominant_importance": as_float(wide.loc[(m, last[m]), dominant]) if dominant in wide else None}
             for m in roles["mamba"] if m in models]
    exceptions = [{"model": m, "layer": int(layer), "top": str(feature)} for (m, layer), feature in top.items()
                  if feature != dominant]
    return {
        "level": sorted(set(overall["level"].astype(str))) if "level" in overall else [],
        "stimuli": sorted(set(overall["stimuli"].astype(str))) if "stimuli" in overall else [],
        "n_stimuli": span_of(overall["n_stimuli"]) if "n_stimuli" in overall else None,
        "n_folds": int(folds.max()) + 1 if len(folds) else None,
        "pairs_per_step": int_list(overall["pairs_per_step"]) if "pairs_per_step" in overall else [],
        "n_models": len(models), "n_layers": int(len(spearman)),
        "spearman": span_of(spearman),
        "spearman_groups": {name: span_of(spearman.loc[keys]) if len(keys) else None for name, keys in groups.items()},
        "mamba": mamba,
        "dominant": dominant, "dominant_top": int((top == dominant).sum()),
        "dominant_span": span_of(wide.loc[top[top == dominant].index, dominant]),
        "exceptions": exceptions,
        "runner_up": {"bridges_blocks": runner_up(groups["bridges_blocks"]),
                      "neox_embeddings": runner_up(groups["neox_embeddings"]),
                      "neox_blocks": runner_up(groups["neox_blocks"])},
        "minor": {f: span_of(wide[f]) for f in ("number", "tense") if f in wide},
        "minor_span": span_of(pd.concat([wide[f] for f in ("number", "tense") if f in wide])
                            if any(f in wide for f in ("number", "tense")) else []),
        "odd_one_out": {method: _odd_one_out(table_of(tables, f"mlem_{method}_similarity"))
                        for method in ("feature", "rsa")},
        "untrained": controls,
    }


def _odd_one_out(similarity: pd.DataFrame | None) -> dict[str, Any] | None:
    """The layer whose mean similarity to other models' layers is lowest, that mean and its lowest similarity."""
    if similarity is None or similarity.empty:
        return None
    other = similarity[similarity["model_a"] != similarity["model_b"]]
    if other.empty:
        return None
    means = other.groupby(["model_a", "layer_a"])["similarity"].mean()
    model, layer = means.idxmin()
    own = other[(other["model_a"] == model) & (other["layer_a"] == layer)]["similarity"]
    return {"model": str(model), "layer": int(layer), "mean": as_float(means.min()), "min": as_float(own.min()),
            "overall_min": as_float(other["similarity"].min())}


def _feature(name: str) -> str:
    return FEATURE_LABELS.get(name, code_text(name))


def render_mlem(findings: Mapping[str, Any]) -> str:
    """The MLEM paragraph from the collected numbers."""
    mlem = findings["mlem"]
    if (message := not_run_sentence("MLEM", mlem)):
        return message
    paper = findings["literature"]["mlem_spearman"]
    stimuli = {"corpus": "of the evaluation sentences", "controlled": "of the controlled stimuli"}
    words = ("words" if mlem["level"] == ["word"] else "sentences" if mlem["level"] == ["sentence"]
             else "stimuli")
    n_stimuli = tokens_text(mlem["n_stimuli"]) if mlem["n_stimuli"] else "n/a"
    head = (f"MLEM ({list_text(mlem['level'])} level: {n_stimuli} {words} "
            f"{list_text([stimuli.get(s, s) for s in mlem['stimuli']])}, {mlem['n_folds']} folds, "
            f"{ints_text(mlem['pairs_per_step'])} pairs per step; held-out Spearman of each layer, layer 0 = "
            f"embeddings): {range_text(mlem['spearman'])} over the {mlem['n_models']} models — "
            + (f"below the > {number_text(paper, 1)} the paper reports on BERT, GPT-2 and Mamba"
               if mlem["spearman"][1] < paper
               else f"reaching the > {number_text(paper, 1)} the paper reports on BERT, GPT-2 and Mamba only at "
                    "its top")
            + ".")
    groups = mlem["spearman_groups"]
    details = []
    if groups.get("bridges_embeddings") and groups.get("bridges_first_block"):
        low, high = groups["bridges_embeddings"], groups["bridges_first_block"]
        verb = "rise" if sum(high) > sum(low) else "fall"
        details.append(f"GeLU/SoLU bridges {verb} from {range_text(low)} at the embeddings to {range_text(high)} after the "
                       "first block")
    if groups.get("neox_embeddings") and groups.get("neox_blocks"):
        emb, blocks = groups["neox_embeddings"], groups["neox_blocks"]
        if emb[0] > blocks[1] or (sum(emb) > sum(blocks) and emb[1] > blocks[1]):
            details.append(f"the GPT-NeoX family is highest at the embeddings ({range_text(emb)}) and lower after "
                           f"({range_text(blocks)})")
        else:
            details.append(f"the GPT-NeoX family gives {range_text(emb)} at the embeddings and {range_text(blocks)} after")
    for m in mlem["mamba"]:
        details.append(f"{code_text(m['model'])} reaches {number_text(m['spearman'])} at its last layer")
    text = head + (" " + capitalised(list_text(details)) + "." if details else "")
    n = mlem["n_layers"]
    dominant = _feature(mlem["dominant"])
    share = ("every layer" if mlem["dominant_top"] == n else f"{mlem['dominant_top']} of {n} layers")
    runner = []
    labels = {"bridges_blocks": "in the GeLU/SoLU bridges after the embeddings",
              "neox_embeddings": "at GPT-NeoX's embeddings", "neox_blocks": "in GPT-NeoX's blocks"}
    for key, where in labels.items():
        r = mlem["runner_up"].get(key)
        if r:
            runner.append(f"{_feature(r['feature'])} {where} ({range_text(r['span'])})")
    text += (f" {capitalised(dominant)} has the largest permutation importance at {share} of the {mlem['n_models']} "
             f"models ({range_text(mlem['dominant_span'])} there)")
    if runner:
        text += "; the runner-up is " + list_text(runner)
    text += "."
    odd = mlem["odd_one_out"]
    for m in mlem["mamba"]:
        if m["top"] != mlem["dominant"]:
            text += (f" {code_text(m['model'])}'s last layer switches to {_feature(m['top'])} ({number_text(m['top_importance'])}, "
                     f"{dominant} {number_text(m['dominant_importance'])})")
        else:
            text += f" {code_text(m['model'])}'s last layer keeps {dominant} on top"
        marks = []
        for method, label in (("feature", "feature-based similarity"), ("rsa", "RSA similarity")):
            o = odd.get(method)
            if o is None:
                continue
            is_it = o["model"] == m["model"] and o["layer"] == m["layer"]
            marks.append((label, is_it, o))
        if marks:
            said = []
            for label, is_it, o in marks:
                who = "it is" if is_it else f"{code_text(o['model'])} layer {o['layer']} is"
                measure = "weighted τ" if label.startswith("feature") else "Spearman ρ"
                said.append(f"{who} the odd one out of the {label} ({measure} {signed_text(o['mean'], 2)} on average "
                            f"with other models' layers, down to {signed_text(o['min'], 2)})")
            text += "; " + "; ".join(said)
        text += "."
    if mlem["minor_span"]:
        minor = [f for f in ("number", "tense") if f in mlem["minor"]]
        names = list_text([capitalised(_feature(f)) if i == 0 else _feature(f) for i, f in enumerate(minor)])
        text += f" {names} explain {range_text(mlem['minor_span'], 2, signed=True)}."
    controls = [c for c in mlem.get("untrained") or [] if c.get("spearman")]
    if controls:
        text += (" Untrained control" + ("s" if len(controls) > 1 else "") + " (a zoo model's initialisation, left "
                 "out above): " + list_text([f"{code_text(c['model'])} {range_text(c['spearman'])}"
                                             for c in controls]) + ".")
    return text
