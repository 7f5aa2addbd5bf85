"""The embedding-space paragraph of the findings (Dar et al. 2022): keep-k, E's condition number, layer alignment,
fine-tuning differences and zero-shot stitching (:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from thinkalike.reports.findings.text import (as_float, code_text, guarded, int_list, int_text, ints_text, list_text,
                                              missing_section, not_run_sentence, number_text, plural_text, range_text,
                                              span_of, table_of)


#: keep-k: E' = E^T counts as "level with" E^+ within this much.
KEEP_K_LEVEL = 0.02


#: Fine-tune fractions: ΔW rows count as "above" random rows by at least this much.
FRACTION_MARGIN = 0.05


GROUP_LABELS = {"FF_key": "FF keys", "FF_value": "FF values", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V",
                "W_O": "W_O", "head": "the classifier head"}


DISTRIBUTION_LABELS = {"normal": "N(0,1)", "ff_values": "FF values", "residual": "residual states"}


TASK_LABELS = {"tense": "tense", "subject_number": "the subject's number", "sentence_type": "the sentence type"}


def collect_embedding(tables: Mapping[str, Any], roles: Mapping[str, Any]) -> dict[str, Any]:
    """The embedding-space paragraph's numbers: keep-k, alignment, fine-tuning fractions and zero-shot stitching."""
    statistics = tables.get("corpus_statistics") if isinstance(tables.get("corpus_statistics"), Mapping) else {}
    return {"keep_k": guarded(_collect_keep_k, table_of(tables, "embedding_keep_k"), roles,
                               statistics.get("vocab_size"), tables),
            "alignment": guarded(_collect_alignment, table_of(tables, "embedding_alignment")),
            "finetune": guarded(_collect_finetune, table_of(tables, "embedding_feature_fractions"),
                                 table_of(tables, "embedding_finetune_curves"), table_of(tables,
                                                                                         "embedding_zero_shot")),
            "zero_shot": guarded(_collect_zero_shot, table_of(tables, "embedding_zero_shot"))}


def _collect_keep_k(keep: pd.DataFrame | None, roles: Mapping[str, Any], vocab: int | None,
                    tables: Mapping[str, Any]) -> dict[str, Any]:
    if keep is None:
        return missing_section("embedding_keep_k")
    if keep.empty:
        return {"empty": True}
    one = keep[keep["variant"] == "one_sample"] if "one_sample" in set(keep["variant"]) else keep
    ks = int_list(one["k"])
    size = int(vocab) if vocab else max(ks)
    mid = min(ks, key=lambda k: (abs(k - 100), k))
    small = min(ks)

    def scores(e_prime: str, k: int | None = None, models: Iterable[str] | None = None,
               distributions: Iterable[str] | None = None) -> pd.Series:
        part = one[one["e_prime"] == e_prime]
        if k is not None:
            part = part[part["k"] == k]
        if models is not None:
            part = part[part["model"].isin(list(models))]
        if distributions is not None:
            part = part[part["distribution"].isin(list(distributions))]
        return part["score"]

    transpose = one[one["e_prime"] == "transpose"]
    peaks = (transpose.loc[transpose.groupby(["model", "distribution"])["score"].idxmax()]
             if len(transpose) else transpose)
    paired = one.pivot_table(index=["model", "distribution", "k"], columns="e_prime", values="score", aggfunc="first")
    level_ks = []
    if {"transpose", "pinv"} <= set(paired.columns):
        for k, part in paired.groupby(level="k"):
            if (part["transpose"] >= part["pinv"] - KEEP_K_LEVEL).all():
                level_ks.append(int(k))
        at_small = paired.xs(small, level="k")
        small_level = int((at_small["transpose"] >= at_small["pinv"] - KEEP_K_LEVEL).sum())
        small_n = int(len(at_small))
    else:
        small_level = small_n = 0
    finetuned = table_of(tables, "embedding_feature_fractions")
    models = list(dict.fromkeys(one["model"]))
    reference = (str(finetuned["model"].iloc[0]) if finetuned is not None and len(finetuned)
                 and finetuned["model"].iloc[0] in models else models[0])
    condition = one.groupby("model")["condition_number"].first()
    families = {"bridges": roles["bridges"], "mamba": roles["mamba"], "encoders": roles["encoders"],
                "gpt_neox": roles["gpt_neox"]}
    return {
        "V": size, "n": int_list(one["n"]), "variant": sorted(set(one["variant"].astype(str))), "ks": ks,
        "k_mid": mid, "k_small": small, "V_in_ks": size in ks,
        "pinv_at_V": span_of(scores("pinv", size)) if size in ks else None,
        "reference": reference,
        "reference_mid": {d: as_float(scores("pinv", mid, [reference], [d]).mean())
                          for d in ("normal", "ff_values") if len(scores("pinv", mid, [reference], [d]))},
        "transpose_peak_k": span_of(peaks["k"]) if len(peaks) else None,
        "transpose_peak": span_of(peaks["score"]) if len(peaks) else None,
        "transpose_at_V": span_of(scores("transpose", size)) if size in ks else None,
        "small_transpose": span_of(scores("transpose", small)), "small_pinv": span_of(scores("pinv", small)),
        "small_level": small_level, "small_n": small_n, "level_ks": level_ks,
        "condition": {name: span_of(condition[condition.index.isin(members)])
                      for name, members in families.items() if condition.index.isin(members).any()},
        "condition_all": span_of(condition),
        "neox_ff_mid": span_of(scores("pinv", mid, roles["gpt_neox"], ["ff_values"])),
    }


def _different_models(table: pd.DataFrame | None, name: str) -> pd.DataFrame | dict[str, Any]:
    """The rows of ``table`` (the catalog's ``name``) that compare two different models, or the section's stand-in
    when there are none: missing (not in the outputs) or empty."""
    if table is None:
        return missing_section(name)
    rows = table[table["model_a"] != table["model_b"]]
    return {"empty": True} if rows.empty else rows


def _collect_alignment(matches: pd.DataFrame | None) -> dict[str, Any]:
    between = _different_models(matches, "embedding_alignment")
    if isinstance(between, dict):
        return between
    pairs = between[["model_a", "model_b"]].drop_duplicates()
    models = list(dict.fromkeys([*pairs["model_a"], *pairs["model_b"]]))
    by_space = between.groupby("space")["diagonal_fraction"].mean()
    projected = between[between["space"] == "projected"]
    by_group = projected.groupby("group", sort=False)["diagonal_fraction"].mean()
    n_layers = int_list([*between["n_layers_a"], *between["n_layers_b"]])
    return {"models": models, "n_pairs": int(len(pairs)), "n_layers": n_layers,
            "by_space": {str(k): as_float(v) for k, v in by_space.items()},
            "by_group": [{"group": str(k), "fraction": as_float(v)}
                         for k, v in by_group.sort_values(ascending=False, kind="mergesort").items()],
            "chance": as_float(1.0 / n_layers[0]) if len(n_layers) == 1 else None}


def _collect_finetune(fractions: pd.DataFrame | None, curves: pd.DataFrame | None,
                      zero_shot: pd.DataFrame | None) -> dict[str, Any]:
    if fractions is None:
        return missing_section("embedding_feature_fractions")
    if fractions.empty:
        return {"empty": True}
    model = str(fractions["model"].iloc[0])
    part = fractions[fractions["model"] == model]
    diff = part[part["source"] == "finetune_diff"].set_index(["group", "layer"])
    random = part[part["source"] == "random_rows"].set_index(["group", "layer"])
    cells = []
    for key, row in diff.iterrows():
        if key in random.index:
            cells.append({"group": str(key[0]), "layer": int(key[1]), "finetune": as_float(row["feature_fraction"]),
                          "random": as_float(random.loc[key, "feature_fraction"])})
    above = [c for c in cells if c["finetune"] - c["random"] >= FRACTION_MARGIN]
    classifier = part[part["source"] == "classifier"]
    own = chance = None
    if zero_shot is not None and len(zero_shot):
        mine = zero_shot[zero_shot["model_a"] == model]
        if len(mine):
            own, chance = as_float(mine["own_accuracy"].iloc[0]), as_float(mine["chance"].iloc[0])
    steps = None
    if curves is not None and len(curves) and "step" in curves:
        steps = int(curves.loc[curves["model"] == model,
                               "step"].max()) if "model" in curves else int(curves["step"].max())
    return {"model": model, "task": str(part["task"].iloc[0]), "top_layers": int_list(diff.reset_index()["layer"]),
            "k": int_list(part["k"]), "steps": steps, "accuracy": own, "chance": chance, "n_cells": len(cells),
            "above": sorted(above, key=lambda c: c["random"] - c["finetune"]),
            "classifier": ({"fraction": as_float(classifier["feature_fraction"].mean()),
                            "chance": as_float(classifier["chance_fraction"].mean())} if len(classifier) else None)}


def _collect_zero_shot(zero_shot: pd.DataFrame | None) -> dict[str, Any]:
    others = _different_models(zero_shot, "embedding_zero_shot")
    if isinstance(others, dict):
        return others
    model = str(others["model_a"].iloc[0])
    others = others[others["model_a"] == model]
    embeddings = others[others["layers_from_b"] == 0]
    blocks = others[others["layers_from_b"] >= 1]
    chance = float(others["chance"].iloc[0])
    return {"model": model, "own": as_float(others["own_accuracy"].iloc[0]), "chance": as_float(chance),
            "embeddings_only": [{"model": str(r.model_b),
                                 "accuracy": as_float(r.accuracy)} for r in embeddings.itertuples()],
            "blocks": span_of(blocks["accuracy"]), "n_blocks": int(len(blocks)),
            "blocks_below_chance": int((blocks["accuracy"] < chance).sum())}


def _distribution_order(name: str) -> tuple[int, str]:
    order = list(DISTRIBUTION_LABELS)
    return (order.index(name) if name in order else len(order), name)


def render_embedding(findings: Mapping[str, Any]) -> str:
    """The embedding-space paragraph from the collected numbers."""
    emb = findings["embedding"]
    keep, alignment, finetune, zero = emb["keep_k"], emb["alignment"], emb["finetune"], emb["zero_shot"]
    lit = findings["literature"]
    sentences = []
    if (message := not_run_sentence("keep-k", keep)):
        head = "Embedding space."
        sentences.append(message)
    else:
        V = keep["V"]
        head = f"Embedding space (V = {int_text(V)})."
        n = ints_text(keep["n"])
        clauses = []
        if keep["pinv_at_V"]:
            clause = f"with E′ = E⁺ the score reaches {range_text(keep['pinv_at_V'])} at k = V"
            if keep["reference_mid"]:
                values = list_text([f"{number_text(keep['reference_mid'][d])} for {DISTRIBUTION_LABELS.get(d, d)}"
                                for d in sorted(keep["reference_mid"], key=_distribution_order)])
                clause += f" ({values} at k = {keep['k_mid']} on {keep['reference']})"
            clauses.append(clause)
        if keep["transpose_peak_k"]:
            clause = (f"with E′ = Eᵀ it peaks at k = {range_text(keep['transpose_peak_k'], 0)} "
                      f"({range_text(keep['transpose_peak'])})")
            if keep["transpose_at_V"]:
                clause += f" and ends at {range_text(keep['transpose_at_V'])} at k = V"
            clauses.append(clause)
        text = f"keep-k (appendix A protocol, one sample of {n}, k = {list_text([str(k) for k in keep['ks']])}): " + \
            ", ".join(clauses)
        small = keep["k_small"]
        share = f"{number_text(100 * small / V, 1)} % of V"
        if keep["level_ks"]:
            where = ("only at k = " if len(keep["level_ks"]) < len(keep["ks"]) else "at every k: ") + \
                list_text([str(k) for k in keep["level_ks"]])
            text += f"{'; ' if clauses else ''}{where} is Eᵀ level with or ahead of E⁺ for every model and distribution"
        else:
            text += f"{'; ' if clauses else ''}at no k is Eᵀ level with or ahead of E⁺ for every model and distribution"
        paper_share = f"{number_text(100 * lit['keep_k_k'] / lit['keep_k_vocabulary'], 1)} %"
        text += (f" (at k = {small}, {share}, Eᵀ vs E⁺ give {range_text(keep['small_transpose'])} vs "
                 f"{range_text(keep['small_pinv'])}, level or ahead in {keep['small_level']} of {keep['small_n']} cases; "
                 f"the paper, at k ≈ {int_text(lit['keep_k_k'])} ({paper_share} of GPT-2's {int_text(lit['keep_k_vocabulary'])}), "
                 f"reports {number_text(lit['keep_k_transpose'])} vs {number_text(lit['keep_k_pinv'])}).")
        names = {"bridges": "the bridges", "mamba": "Mamba", "encoders": "the encoder", "gpt_neox": "GPT-NeoX"}
        conditions = list_text([f"{range_text(keep['condition'][key], 1)} for {name}" for key, name in names.items()
                            if key in keep["condition"]])
        if conditions:
            text += f" E's condition number is {conditions}"
            if keep["neox_ff_mid"]:
                text += f"; GPT-NeoX's FF values reach {range_text(keep['neox_ff_mid'])} at k = {keep['k_mid']} (E⁺)"
            text += "."
        sentences.append(text)
    if (message := not_run_sentence("Layer alignment", alignment)):
        sentences.append(message)
    else:
        projected = alignment["by_space"].get("projected")
        raw = alignment["by_space"].get("raw")
        groups = ", ".join(f"{GROUP_LABELS.get(g['group'], g['group'])} {number_text(g['fraction'])}"
                           for g in alignment["by_group"])
        chance = f" (chance for {alignment['n_layers'][0]} layers: {number_text(alignment['chance'] * 100, 0)} %)" \
            if alignment["chance"] is not None else ""
        text = (f"Layer alignment of {list_text([code_text(m) for m in alignment['models']])} ({plural_text(alignment['n_pairs'], 'pair')}): "
                f"projected into vocabulary space the Hungarian matching puts {number_text((projected or 0) * 100, 0)} % of "
                f"layers on the diagonal ({groups}), not projected {number_text((raw or 0) * 100, 0)} %{chance}")
        if projected is not None and raw is not None and projected > raw:
            best = alignment["by_group"][0]["group"] if alignment["by_group"] else None
            text += (" — the paper's finding, most clearly for " + GROUP_LABELS.get(best, best) if best else "")
        else:
            text += " — not the paper's finding (projection does not help)"
        sentences.append(text + ".")
    if (message := not_run_sentence("Fine-tuning", finetune)):
        sentences.append(message)
    else:
        layers = list_text([str(layer) for layer in finetune["top_layers"]])
        text = (f"Fine-tuning {finetune['model']}'s top {plural_text(len(finetune['top_layers']), 'block')} "
                f"(layer{'s' if len(finetune['top_layers']) > 1 else ''} {layers}) and a "
                f"head on {TASK_LABELS.get(finetune['task'], finetune['task'])}"
                + (f" ({finetune['steps']} steps)" if finetune["steps"] else ""))
        if finetune["accuracy"] is not None:
            text += (f" reaches {number_text(finetune['accuracy'], 3)} held-out accuracy against a majority rate of "
                     f"{number_text(finetune['chance'], 3)}")
        k = ints_text(finetune["k"])
        if finetune["above"]:
            above = list_text([f"{GROUP_LABELS.get(c['group'], c['group'])} at layer {c['layer']} "
                           f"({number_text(c['finetune'])} vs {number_text(c['random'])})" for c in finetune["above"]])
            text += (f"; among the top {k} tokens of its largest ΔW rows, the fraction that carry the task's "
                     f"feature is above that of random rows of the same matrices (by ≥ {number_text(FRACTION_MARGIN)}) in "
                     f"{above}, and level or below in the other {finetune['n_cells'] - len(finetune['above'])} of "
                     f"{finetune['n_cells']}")
        else:
            text += (f"; among the top {k} tokens of its largest ΔW rows, the fraction that carry the task's feature "
                     f"is nowhere above that of random rows of the same matrices by {number_text(FRACTION_MARGIN)} "
                     f"({finetune['n_cells']} group × layer cells)")
        if finetune["classifier"]:
            c = finetune["classifier"]
            text += (f"; the classifier rows give {number_text(c['fraction'])} ({number_text(c['chance'])} by chance)")
        sentences.append(text + ".")
    if (message := not_run_sentence("Zero-shot stitching", zero)):
        sentences.append(message)
    else:
        only = list_text([f"{number_text(e['accuracy'])} from {code_text(e['model'])}"
                          for e in zero["embeddings_only"]])
        text = (f"Zero-shot stitching x_A = x_B E_B E_A⁺ into the fine-tuned {zero['model']} (own accuracy "
                f"{number_text(zero['own'], 3)}, majority rate {number_text(zero['chance'], 3)}): keeping only B's embeddings gives "
                f"{only}")
        if zero["n_blocks"]:
            below = zero["blocks_below_chance"] == zero["n_blocks"]
            text += (f", and running B's blocks gives {range_text(zero['blocks'])}, "
                     + ("below the majority rate every time — across seeds the map through the vocabulary does not "
                        "carry these small models' block outputs" if below else
                        f"below the majority rate in {zero['blocks_below_chance']} of {zero['n_blocks']} cases"
                        if zero["blocks_below_chance"] else "never below the majority rate"))
        sentences.append(text + ".")
    return head + " " + " ".join(sentences)
