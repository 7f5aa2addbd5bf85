"""The embedding-space paragraph of the findings (Dar et al. 2022): keep-k, E's condition number, layer alignment,
fine-tuning differences and zero-shot stitching (:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from thinkalike.embedding.finetune_diff import task_labels
from thinkalike.embedding.invertibility import paper_k
from thinkalike.reports.findings.claims import Claim, best_of, greater, mirrored
from thinkalike.reports.findings.text import (
    LITERATURE,
    as_float,
    code_text,
    guarded,
    int_list,
    ints_text,
    list_text,
    missing_section,
    not_run_sentence,
    number_text,
    span_of,
    table_of,
)

#: keep-k: E' = E^T counts as "level with" E^+ within this much.
KEEP_K_LEVEL = 0.02


#: Fine-tune fractions: ΔW rows count as "above" random rows by at least this much.
FRACTION_MARGIN = 0.05


GROUP_LABELS = {
    "FF_key": "FF keys",
    "FF_value": "FF values",
    "W_Q": "W_Q",
    "W_K": "W_K",
    "W_V": "W_V",
    "W_O": "W_O",
    "head": "the classifier head",
}


TASK_LABELS = {"tense": "tense", "subject_number": "the subject's number", "sentence_type": "the sentence type"}


def collect_embedding(tables: Mapping[str, Any], roles: Mapping[str, Any]) -> dict[str, Any]:
    """The embedding-space paragraph's numbers: keep-k, alignment, fine-tuning fractions and zero-shot stitching."""
    found = tables.get("corpus_statistics")
    statistics = found if isinstance(found, Mapping) else {}
    return {
        "keep_k": guarded(
            _collect_keep_k, table_of(tables, "embedding_keep_k"), roles, statistics.get("vocab_size"), tables
        ),
        "alignment": guarded(_collect_alignment, table_of(tables, "embedding_alignment")),
        "finetune": guarded(
            _collect_finetune,
            table_of(tables, "embedding_feature_fractions"),
            table_of(tables, "embedding_finetune_curves"),
            table_of(tables, "embedding_zero_shot"),
        ),
        "zero_shot": guarded(_collect_zero_shot, table_of(tables, "embedding_zero_shot")),
        "overlap": guarded(_collect_overlap, table_of(tables, "embedding_key_value_overlap")),
        "token_structure": guarded(_collect_token_structure, table_of(tables, "embedding_token_structure")),
    }


def _collect_token_structure(table: pd.DataFrame | None) -> dict[str, Any]:
    """Dar et al.'s §3 on the grammar (:mod:`thinkalike.embedding.token_structure`): per vector group, the mean over
    models and layers of the part-of-speech coherence of each vector's top-k tokens, of the same for Gaussian
    vectors read through the same E (``gaussian``: what E's geometry alone gives), of random token sets
    (``chance``), and the differences ``over_gaussian`` and ``over_chance``."""
    if table is None:
        return missing_section("embedding_token_structure")
    known = table.dropna(subset=["coherence_mean"])
    if known.empty:
        return {"empty": True}
    by_group = known.groupby("group", sort=True)

    def means(column: str) -> dict[str, float]:
        return {str(k): round(float(v), 6) for k, v in by_group[column].mean().items() if v == v}

    return {
        "k": int_list(known["k"].unique()),
        "models": sorted(str(m) for m in known["model"].unique()),
        "coherence": means("coherence_mean"),
        "gaussian": means("random_vector_mean"),
        "chance": means("chance"),
        "over_gaussian": means("difference_random_vectors"),
        "over_chance": means("difference"),
    }


def _collect_overlap(table: pd.DataFrame | None) -> dict[str, Any]:
    """Dar et al.'s fig. 6 (:mod:`thinkalike.embedding.overlap`): per pair kind, the Jaccard of corresponding
    vectors' top-k tokens less random pairings', averaged over models and layers (``difference``), the matched and
    random means, and in how many of the models' layers matched is above random."""
    if table is None:
        return missing_section("embedding_key_value_overlap")
    known = table.dropna(subset=["difference"])
    if known.empty:
        return {"empty": True}
    by_pair = known.groupby("pair")
    return {
        "k": int_list(known["k"].unique()),
        "models": sorted(str(m) for m in known["model"].unique()),
        "difference": {str(k): round(float(v), 6) for k, v in by_pair["difference"].mean().items()},
        "matched": {str(k): round(float(v), 6) for k, v in by_pair["matched_mean"].mean().items()},
        "random": {str(k): round(float(v), 6) for k, v in by_pair["random_mean"].mean().items()},
        "layers_above": {str(k): int((g["difference"] > 0).sum()) for k, g in by_pair},
        "layers": {str(k): int(len(g)) for k, g in by_pair},
    }


def _collect_keep_k(
    keep: pd.DataFrame | None, roles: Mapping[str, Any], vocab: int | None, tables: Mapping[str, Any]
) -> dict[str, Any]:
    """The keep-k numbers (``embedding_keep_k``, one sample per case where it has them): E^+ and E^T per k, at the
    middle and smallest k and at the vocabulary size, E^T's peak and its fall at the largest k, where E^T is level
    with E^+, and the condition numbers per family."""
    if keep is None:
        return missing_section("embedding_keep_k")
    if keep.empty:
        return {"empty": True}
    one = keep[keep["variant"] == "one_sample"] if "one_sample" in set(keep["variant"]) else keep
    ks = int_list(one["k"])
    # the models' own vocabulary (the keep-k table's ``vocabulary``: a real checkpoint's is not the corpus tokenizer's)
    if "vocabulary" in keep and keep["vocabulary"].notna().all():
        size = int(keep["vocabulary"].max())
    else:
        size = int(vocab) if vocab else max(ks)
    mid = min(ks, key=lambda k: (abs(k - 100), k))
    small = min(ks)
    transpose = one[one["e_prime"] == "transpose"]
    peaks = (
        transpose.loc[transpose.groupby(["model", "distribution"])["score"].idxmax()] if len(transpose) else transpose
    )
    paired = one.pivot_table(index=["model", "distribution", "k"], columns="e_prime", values="score", aggfunc="first")
    level_ks, small_level, small_n, by_k = _level_with_pinv(paired, small)
    end = max(ks)
    end_gaps = _end_gaps(transpose, end)
    reference = _reference_model(tables, list(dict.fromkeys(one["model"])))
    return {
        "V": size,
        "k_paper": paper_k(size),
        "n": int_list(one["n"]),
        "variant": sorted(set(one["variant"].astype(str))),
        "ks": ks,
        "k_mid": mid,
        "k_small": small,
        "V_in_ks": size in ks,
        "pinv_at_V": span_of(_scores(one, "pinv", size)) if size in ks else None,
        "reference": reference,
        "reference_mid": {
            d: as_float(_scores(one, "pinv", mid, [reference], [d]).mean())
            for d in ("normal", "ff_values")
            if len(_scores(one, "pinv", mid, [reference], [d]))
        },
        "transpose_peak_k": span_of(peaks["k"]) if len(peaks) else None,
        "transpose_peak": span_of(peaks["score"]) if len(peaks) else None,
        "transpose_at_V": span_of(_scores(one, "transpose", size)) if size in ks else None,
        "small_transpose": span_of(_scores(one, "transpose", small)),
        "small_pinv": span_of(_scores(one, "pinv", small)),
        "small_level": small_level,
        "small_n": small_n,
        "level_ks": level_ks,
        **_condition_numbers(one, roles),
        "neox_ff_mid": span_of(_scores(one, "pinv", mid, roles["gpt_neox"], ["ff_values"])),
        "by_k": by_k,
        "k_end": end,
        "transpose_at_end": span_of(_scores(one, "transpose", end)),
        "transpose_end_gap": as_float(min(end_gaps)) if end_gaps else None,
    }


def _scores(
    one: pd.DataFrame,
    e_prime: str,
    k: int | None = None,
    models: Iterable[str] | None = None,
    distributions: Iterable[str] | None = None,
) -> pd.Series:
    """The keep-k scores of one E' (``transpose`` or ``pinv``), at ``k`` and of ``models`` and ``distributions``
    where given."""
    part = one[one["e_prime"] == e_prime]
    if k is not None:
        part = part[part["k"] == k]
    if models is not None:
        part = part[part["model"].isin(list(models))]
    if distributions is not None:
        part = part[part["distribution"].isin(list(distributions))]
    return part["score"]


def _level_with_pinv(paired: pd.DataFrame, small: int) -> tuple[list[int], int, int, list[dict[str, Any]]]:
    """E^T against E^+ (``paired``: one column each, per model, distribution and k): the ks at which E^T is level
    with E^+ in every case (within :data:`KEEP_K_LEVEL`), how many cases are level at the smallest k and of how
    many, and per k both spans, the smallest gap, the mean gap over models per distribution, the cases with E^T
    ahead and the level cases."""
    if not {"transpose", "pinv"} <= set(paired.columns):
        return [], 0, 0, []
    level_ks = []
    for k, part in paired.groupby(level="k"):
        if (part["transpose"] >= part["pinv"] - KEEP_K_LEVEL).all():
            level_ks.append(int(k))
    at_small = paired.xs(small, level="k")
    small_level = int((at_small["transpose"] >= at_small["pinv"] - KEEP_K_LEVEL).sum())
    by_k = []
    for k, part in paired.groupby(level="k"):
        gap = part["transpose"] - part["pinv"]
        by_k.append(
            {
                "k": int(k),
                "transpose": span_of(part["transpose"]),
                "pinv": span_of(part["pinv"]),
                "min_gap": None if gap.isna().any() else as_float(gap.min()),
                "mean_gap_by_distribution": {
                    str(d): as_float(g.mean()) for d, g in gap.groupby(level="distribution") if g.notna().all()
                },
                "n_ahead": int((gap > 0).sum()),
                "n_level": int((part["transpose"] >= part["pinv"] - KEEP_K_LEVEL).sum()),
                "n_cases": int(len(part)),
            }
        )
    return level_ks, small_level, int(len(at_small)), by_k


def _end_gaps(transpose: pd.DataFrame, end: int) -> list[float]:
    """Per model and distribution: E^T's best score before the largest k (``end``) minus its score there."""
    end_gaps = []
    for _, curve in transpose.groupby(["model", "distribution"]):
        at_end, before = curve.loc[curve["k"] == end, "score"], curve.loc[curve["k"] < end, "score"]
        if len(at_end) and len(before):
            end_gaps.append(float(before.max()) - float(at_end.iloc[0]))
    return end_gaps


def _reference_model(tables: Mapping[str, Any], models: list[str]) -> str:
    """The keep-k reference model: the fine-tuned one (``embedding_feature_fractions``) when it is among ``models``,
    else the first of them."""
    finetuned = table_of(tables, "embedding_feature_fractions")
    return (
        str(finetuned["model"].iloc[0])
        if finetuned is not None and len(finetuned) and finetuned["model"].iloc[0] in models
        else models[0]
    )


def _condition_numbers(one: pd.DataFrame, roles: Mapping[str, Any]) -> dict[str, Any]:
    """The embedding matrices' condition numbers: their span per model family present, and over every model."""
    condition = one.groupby("model")["condition_number"].first()
    families = {
        "bridges": roles["bridges"],
        "mamba": roles["mamba"],
        "encoders": roles["encoders"],
        "gpt_neox": roles["gpt_neox"],
    }
    return {
        "condition": {
            name: span_of(condition[condition.index.isin(members)])
            for name, members in families.items()
            if condition.index.isin(members).any()
        },
        "condition_all": span_of(condition),
    }


def _different_models(table: pd.DataFrame | None, name: str) -> pd.DataFrame | dict[str, Any]:
    """The rows of ``table`` (the catalog's ``name``) that compare two different models, or the section's stand-in
    when there are none: missing (not in the outputs) or empty."""
    if table is None:
        return missing_section(name)
    if table.empty:  # nothing compared (e.g. no two models share a vocabulary): its columns may be absent too
        return {"empty": True}
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
    return {
        "models": models,
        "n_pairs": int(len(pairs)),
        "n_layers": n_layers,
        "by_space": {str(k): as_float(v) for k, v in by_space.items()},
        "by_group": [
            {"group": str(k), "fraction": as_float(v)}
            for k, v in by_group.sort_values(ascending=False, kind="mergesort").items()
        ],
        "chance": as_float(1.0 / n_layers[0]) if len(n_layers) == 1 else None,
    }


def _collect_finetune(
    fractions: pd.DataFrame | None, curves: pd.DataFrame | None, zero_shot: pd.DataFrame | None
) -> dict[str, Any]:
    if fractions is None:
        return missing_section("embedding_feature_fractions")
    if fractions.empty:
        return {"empty": True}
    model = str(fractions["model"].iloc[0])
    part = fractions[fractions["model"] == model]
    diff = part[part["source"] == "finetune_diff"].set_index(["group", "layer"])
    random = part[part["source"] == "random_rows"].set_index(["group", "layer"])
    cells: list[dict[str, Any]] = []
    for key, row in diff.iterrows():
        if key in random.index:
            cells.append(
                {
                    "group": str(key[0]),
                    "layer": int(key[1]),
                    "finetune": as_float(row["feature_fraction"]),
                    "random": as_float(random.loc[key, "feature_fraction"]),
                }
            )
    above = [
        c
        for c in cells
        if c["finetune"] is not None and c["random"] is not None and c["finetune"] - c["random"] >= FRACTION_MARGIN
    ]
    classifier = part[part["source"] == "classifier"]
    own = chance = None
    if zero_shot is not None and len(zero_shot):
        mine = zero_shot[zero_shot["model_a"] == model]
        if len(mine):
            own, chance = as_float(mine["own_accuracy"].iloc[0]), as_float(mine["chance"].iloc[0])
    steps = None
    if curves is not None and len(curves) and "step" in curves:
        steps = (
            int(curves.loc[curves["model"] == model, "step"].max()) if "model" in curves else int(curves["step"].max())
        )
    return {
        "model": model,
        "task": str(part["task"].iloc[0]),
        "top_layers": int_list(diff.reset_index()["layer"]),
        "k": int_list(part["k"]),
        "steps": steps,
        "accuracy": own,
        "chance": chance,
        "n_cells": len(cells),
        "above": sorted(above, key=lambda c: c["random"] - c["finetune"]),
        "cells": cells,
        "classifier": (
            {
                "fraction": as_float(classifier["feature_fraction"].mean()),
                "chance": as_float(classifier["chance_fraction"].mean()),
            }
            if len(classifier)
            else None
        ),
    }


def _collect_zero_shot(zero_shot: pd.DataFrame | None) -> dict[str, Any]:
    others = _different_models(zero_shot, "embedding_zero_shot")
    if isinstance(others, dict):
        return others
    model = str(others["model_a"].iloc[0])
    others = others[others["model_a"] == model]
    embeddings = others[others["layers_from_b"] == 0]
    blocks = others[others["layers_from_b"] >= 1]
    chance = float(others["chance"].iloc[0])
    return {
        "model": model,
        "own": as_float(others["own_accuracy"].iloc[0]),
        "chance": as_float(chance),
        "balanced_chance": as_float(1.0 / len(task_labels(str(others["task"].iloc[0])))),
        "embeddings_only": [
            {"model": str(r.model_b), "accuracy": as_float(r.accuracy)} for r in embeddings.itertuples()
        ],
        "blocks": span_of(blocks["accuracy"]),
        "n_blocks": int(len(blocks)),
        "blocks_below_chance": int((blocks["accuracy"] < chance).sum()),
        "cases": [
            {
                "model": str(r.model_b),
                "layers": int(r.layers_from_b),
                "accuracy": as_float(r.accuracy),
                # AUROC and balanced accuracy: tables saved before they were measured have neither
                "auroc": as_float(getattr(r, "auroc", None)),
                "balanced_accuracy": as_float(getattr(r, "balanced_accuracy", None)),
            }
            for r in blocks.itertuples()
        ],
        "n_sentences": int(others["n_sentences"].iloc[0]) if "n_sentences" in others else None,
    }


# ---- claims ---------------------------------------------------------------------------------------------------------

#: Classifier rows count as "level with" chance within this much (the fine-tune fractions' criterion).
CLASSIFIER_MARGIN = FRACTION_MARGIN

SPACE_WORDS = {"projected": "projected into vocabulary space", "raw": "not projected"}


def claims_embedding(findings: Mapping[str, Any]) -> list[Claim]:
    """The embedding-space paragraph's claims (:mod:`thinkalike.reports.findings.claims`), per part (keep-k,
    alignment, fine-tuning, zero-shot stitching), none for a part that was not run:

    * ``embedding.keep_k.level.k<k>`` / ``embedding.keep_k.behind.k<k>`` (every k): Eᵀ level with or ahead of E⁺
      (within :data:`KEEP_K_LEVEL`) for every model and distribution; margin ``min(Eᵀ − E⁺) + KEEP_K_LEVEL`` over
      the cases at that k / its negative;
    * ``embedding.keep_k.transpose_peaks_before_end`` / ``embedding.keep_k.transpose_highest_at_end``: every Eᵀ
      curve peaks before the largest k; margin the smallest, over models and distributions, of its best score before
      the largest k minus its score there / its negative;
    * ``embedding.alignment.projected_above_raw`` / ``embedding.alignment.raw_above_projected``: the paper's finding
      (projection puts more layers on the diagonal); margin ``projected − raw`` / ``raw − projected``;
    * ``embedding.alignment.<space>_above_chance`` / ``embedding.alignment.<space>_below_chance`` (projected,
      raw): the diagonal fraction against chance (1 / layers); margin ``fraction − chance`` / ``chance − fraction``;
    * ``embedding.alignment.most_on_diagonal.<group>`` (each weight group): the group whose projected matching puts
      the most layers on the diagonal (:func:`best_of`); margin its fraction minus the largest other group's;
    * ``embedding.finetune.above_majority`` / ``embedding.finetune.at_or_below_majority``: the fine-tuned model's
      held-out accuracy against the majority rate; margin ``accuracy − majority`` / ``majority − accuracy + ½ / n``
      (n: held-out sentences; accuracies are multiples of 1 / n);
    * ``embedding.finetune.above_random.<group>.layer<L>`` / ``embedding.finetune.not_above_random.<group>.layer<L>``
      (each weight group and layer fine-tuned): the feature fraction of ΔW rows above random rows' by at least
      :data:`FRACTION_MARGIN`; margin ``ΔW − random − FRACTION_MARGIN`` / its negative;
    * ``embedding.finetune.classifier_above_chance`` / ``…_level_with_chance`` / ``…_below_chance``: the classifier
      rows' feature fraction against chance; margin ``fraction − chance − m`` / ``m − |fraction − chance|`` /
      ``chance − fraction − m`` (``m``: :data:`CLASSIFIER_MARGIN`);
    * ``embedding.zero_shot.blocks_below_majority_every_time`` / ``embedding.zero_shot.blocks_never_below_majority``:
      zero-shot stitching with B's blocks against the majority rate in every case; margin ``majority − max`` /
      ``min − majority + ½ / n``;
    * ``embedding.zero_shot.below_majority.<model>.layers<ℓ>`` / ``embedding.zero_shot.at_or_above_majority.<model>
      .layers<ℓ>`` (each donor B and number ℓ ≥ 1 of its layers run): margin ``majority − accuracy`` /
      ``accuracy − majority + ½ / n``;
    * ``embedding.overlap.above_random.<pair>`` (:func:`_overlap_claims`).
    """
    emb = findings.get("embedding")
    if not isinstance(emb, Mapping) or not emb:
        return []
    literature = findings.get("literature") or LITERATURE
    zero = emb.get("zero_shot") or {}
    n_sentences = zero.get("n_sentences") if isinstance(zero, Mapping) else None
    half_step = 0.5 / n_sentences if n_sentences else 0.0
    claims: list[Claim] = []
    parts = (
        ("keep-k", "keep_k", lambda section: _keep_k_claims(section, literature)),
        ("Layer alignment", "alignment", _alignment_claims),
        ("Fine-tuning", "finetune", lambda section: _finetune_claims(section, half_step)),
        ("Zero-shot stitching", "zero_shot", lambda section: _zero_shot_claims(section, half_step)),
        ("Key-value overlap", "overlap", _overlap_claims),
    )
    for what, key, make in parts:
        section = emb.get(key)
        if isinstance(section, Mapping) and section and not not_run_sentence(what, section):
            claims += make(section)
    return claims


def _overlap_claims(overlap: Mapping[str, Any]) -> list[Claim]:
    """``embedding.overlap.above_random.<pair>``: corresponding vectors' top-k tokens overlap more than random
    pairings' (Dar et al. fig. 6); margin the mean Jaccard difference over models and layers."""
    return [
        Claim(
            f"embedding.overlap.above_random.{pair}",
            "{pair} vectors read in the vocabulary overlap more than random pairings (Dar et al. fig. 6): top-{k} "
            "Jaccard {matched:3} against {random:3}, higher in {above:d} of {layers:d} model layers",
            as_float(difference),
            {
                "pair": " and ".join(f"`{part}`" for part in pair.split("-")),
                "k": ", ".join(str(k) for k in overlap.get("k") or []),
                "matched": (overlap.get("matched") or {}).get(pair),
                "random": (overlap.get("random") or {}).get(pair),
                "above": (overlap.get("layers_above") or {}).get(pair),
                "layers": (overlap.get("layers") or {}).get(pair),
            },
        )
        for pair, difference in sorted((overlap.get("difference") or {}).items())
    ]


def _keep_k_claims(keep: Mapping[str, Any], literature: Mapping[str, Any]) -> list[Claim]:
    """Keep-k: per k below the vocabulary size, Eᵀ level with (within :data:`KEEP_K_LEVEL`) or ahead of E⁺ in every
    case, margin the smallest gap plus that level, or behind (its negative); and Eᵀ peaking before the largest k
    (:func:`_peak_claims`)."""
    claims: list[Claim] = []
    V, small = keep.get("V"), keep.get("k_small")
    paper = {
        "paper_k": literature["keep_k_k"],
        "paper_vocabulary": literature["keep_k_vocabulary"],
        "paper_share": 100 * literature["keep_k_k"] / literature["keep_k_vocabulary"],
        "paper_transpose": literature["keep_k_transpose"],
        "paper_pinv": literature["keep_k_pinv"],
    }
    for entry in keep["by_k"]:
        k = int(entry["k"])
        if V and k >= int(V):  # at k = V keeping every entry makes E⁺ exact: true by construction, no claim
            continue
        claims += _level_claims(entry, k, V if k == small else None, paper)
    return claims + _peak_claims(keep)


def _level_claims(entry: Mapping[str, Any], k: int, V: Any, paper: Mapping[str, Any]) -> list[Claim]:
    """Keep-k at one ``k``: Eᵀ level with or ahead of E⁺ in every case, and its mirror (behind in some); ``V`` (the
    vocabulary size, at the smallest k only) adds the paper's numbers."""
    level = number_text(KEEP_K_LEVEL)
    values = {
        "k": k,
        "transpose": entry["transpose"],
        "pinv": entry["pinv"],
        "n_level": entry["n_level"],
        "n_cases": entry["n_cases"],
        "level": KEEP_K_LEVEL,
    }
    paper_clause = ""
    if V:
        values.update(paper, share=100 * k / V)
        paper_clause = (
            "; {share:1} % of V — the paper, at k ≈ {paper_k:d} ({paper_share:1} % of GPT-2's "
            "{paper_vocabulary:d}), reports {paper_transpose} vs {paper_pinv}"
        )
    gap = entry.get("min_gap")
    margin = None if gap is None else float(gap) + KEEP_K_LEVEL
    counts = "{transpose} vs {pinv}, level or ahead in {n_level:d} of {n_cases:d} cases"
    level_claim = Claim(
        f"embedding.keep_k.level.k{k}",
        "keep-k at k = {k:d}: Eᵀ is level with (within {level}) or ahead of E⁺ for every model and "
        "distribution (" + counts + paper_clause + ")",
        margin,
        values,
        f"keep-k: Eᵀ is level with (within {level}) or ahead of E⁺ for every model and distribution at",
        "k = {k:d} (" + counts + paper_clause + ")",
    )
    return mirrored(
        level_claim,
        f"embedding.keep_k.behind.k{k}",
        "keep-k at k = {k:d}: Eᵀ falls behind E⁺ by more than {level} for some model and distribution (" + counts + ")",
        f"keep-k: Eᵀ falls behind E⁺ by more than {level} for some model and distribution at",
        "k = {k:d} (" + counts + ")",
    )


def _peak_claims(keep: Mapping[str, Any]) -> list[Claim]:
    """Keep-k with E′ = Eᵀ peaks before the largest k in every case (margin the smallest fall from its best score
    before it to its score there), or is highest there in some (its negative)."""
    claims: list[Claim] = []
    end = keep["k_end"]
    peak_k = keep.get("transpose_peak_k")
    if end is not None and peak_k:
        at_end = keep.get("transpose_at_end")
        before = keep["transpose_end_gap"]
        after = None if before is None else -float(before)
        values = {
            "k_end": end,
            "peak_k": peak_k,
            "peak": keep.get("transpose_peak"),
            **({"at_end": at_end} if at_end else {}),
        }
        ending = ", and ends lower: {at_end} at k = {k_end:d}" if at_end else ""
        claims.append(
            Claim(
                "embedding.keep_k.transpose_peaks_before_end",
                "keep-k with E′ = Eᵀ peaks before k = {k_end:d} for every model and distribution — at "
                "k = {peak_k:0} ({peak})" + ending,
                before,
                values,
            )
        )
        claims.append(
            Claim(
                "embedding.keep_k.transpose_highest_at_end",
                "keep-k with E′ = Eᵀ is highest at the largest k = {k_end:d} for some model and distribution",
                after,
                values,
            )
        )
    return claims


def _alignment_claims(alignment: Mapping[str, Any]) -> list[Claim]:
    claims: list[Claim] = []
    by_space = alignment.get("by_space") or {}
    projected, raw, chance = by_space.get("projected"), by_space.get("raw"), alignment.get("chance")
    models = list_text([code_text(m) for m in alignment.get("models") or []])
    base = {"models": models, "n_pairs": alignment.get("n_pairs"), "projected": projected, "raw": raw}
    head = "Layer alignment of {models} ({n_pairs:d} pairs): "
    if projected is not None and raw is not None:
        claims.append(
            greater(
                "embedding.alignment.projected_above_raw",
                head + "projected into vocabulary space the Hungarian matching puts {projected:%} of "
                "layers on the diagonal, not projected {raw:%} — the paper's finding",
                projected,
                raw,
                **base,
            )
        )
        claims.append(
            greater(
                "embedding.alignment.raw_above_projected",
                head + "projected into vocabulary space the Hungarian matching puts {projected:%} of "
                "layers on the diagonal, not projected {raw:%} — not the paper's finding (projection "
                "does not help)",
                raw,
                projected,
                **base,
            )
        )
    n_layers = alignment.get("n_layers") or []
    if chance is not None:
        for space, fraction in by_space.items():
            if fraction is None:
                continue
            values = {
                **base,
                "fraction": fraction,
                "chance": chance,
                "n_layers": n_layers[0] if n_layers else None,
                "space": SPACE_WORDS.get(space, space),
            }
            for claim_id, words, a, b in (
                (f"embedding.alignment.{space}_above_chance", "above", fraction, chance),
                (f"embedding.alignment.{space}_below_chance", "below", chance, fraction),
            ):
                claim = greater(
                    claim_id,
                    "Layer alignment {space}: the Hungarian matching puts {fraction:%} of layers "
                    f"on the diagonal, {words} chance " + "({chance:%} for {n_layers:d} layers)",
                    a,
                    b,
                    **values,
                )
                claims.append(
                    Claim(
                        claim.id,
                        claim.template,
                        claim.margin,
                        claim.values,
                        f"Layer alignment {words} chance (1 / the number of layers)",
                        "{space} ({fraction:%} of layers on the diagonal, chance {chance:%})",
                    )
                )
    groups = {g["group"]: g["fraction"] for g in alignment.get("by_group") or []}
    if len(groups) > 1:
        extra = {
            g: {"label": GROUP_LABELS.get(g, g), "others": span_of(v for other, v in groups.items() if other != g)}
            for g in groups
        }
        claims += best_of(
            "embedding.alignment.most_on_diagonal",
            "Projected into vocabulary space, {label} put the most layers on the diagonal of any weight "
            "group ({score}; the others {others})",
            groups,
            higher=True,
            values=extra,
        )
    return claims


def _finetune_claims(finetune: Mapping[str, Any], half_step: float) -> list[Claim]:
    """Fine-tuning's claims: its held-out accuracy against the majority rate (:func:`_finetune_accuracy_claims`),
    per ΔW cell the task's feature fraction against random rows' (:func:`_fraction_claims`), and the classifier
    head's fraction against chance (:func:`_classifier_claims`)."""
    top = finetune.get("top_layers") or []
    task = finetune.get("task")
    base = {
        "model": finetune.get("model"),
        "task": TASK_LABELS.get(str(task), task),
        "n_top": len(top),
        "layers": list_text([str(layer) for layer in top]),
        **({"steps": finetune["steps"]} if finetune.get("steps") else {}),
    }
    what = "Fine-tuning {model}'s top {n_top:d} blocks (layers {layers}) and a head on {task}" + (
        " ({steps:d} steps)" if "steps" in base else ""
    )
    return [
        *_finetune_accuracy_claims(finetune, base, what, half_step),
        *_fraction_claims(finetune, base),
        *_classifier_claims(finetune),
    ]


def _finetune_accuracy_claims(
    finetune: Mapping[str, Any], base: Mapping[str, Any], what: str, half_step: float
) -> list[Claim]:
    """The fine-tuned model's held-out accuracy above the majority rate, or not (within ``half_step``)."""
    claims: list[Claim] = []
    accuracy, chance = finetune.get("accuracy"), finetune.get("chance")
    if accuracy is not None and chance is not None:
        values = {**base, "accuracy": accuracy, "chance": chance}
        claims.append(
            greater(
                "embedding.finetune.above_majority",
                what + " reaches {accuracy:3} held-out accuracy, above the majority rate of {chance:3}",
                accuracy,
                chance,
                **values,
            )
        )
        claims.append(
            Claim(
                "embedding.finetune.at_or_below_majority",
                what + " reaches only {accuracy:3} held-out accuracy, not above the majority rate of {chance:3}",
                float(chance) - float(accuracy) + half_step,
                values,
            )
        )
    return claims


def _fraction_claims(finetune: Mapping[str, Any], base: Mapping[str, Any]) -> list[Claim]:
    """Per ΔW cell (group and layer): the fraction of the top tokens of its largest rows that carry the task's
    feature above that of random rows by :data:`FRACTION_MARGIN`, and its mirror."""
    claims: list[Claim] = []
    cells = finetune["cells"]
    k = ints_text(finetune.get("k"))
    threshold = number_text(FRACTION_MARGIN)
    for cell in cells:
        if cell.get("finetune") is None or cell.get("random") is None:
            continue
        excess = float(cell["finetune"]) - float(cell["random"]) - FRACTION_MARGIN
        values = {
            **base,
            "k": k,
            "label": GROUP_LABELS.get(cell["group"], cell["group"]),
            "layer": cell["layer"],
            "finetune": cell["finetune"],
            "random": cell["random"],
            "threshold": FRACTION_MARGIN,
        }
        where = (
            "In {model}'s fine-tuning, among the top {k} tokens of its largest ΔW rows of {label} at layer "
            "{layer:d}, the fraction that carry the task's feature ({finetune}) is "
        )
        item = "{label} at layer {layer:d} ({finetune} vs {random})"
        lead = (
            "among the top tokens of the fine-tuning's largest ΔW rows, the fraction that carry the task's feature is "
        )
        above = Claim(
            f"embedding.finetune.above_random.{cell['group']}.layer{cell['layer']}",
            where + "above that of random rows of the same matrix ({random}) by ≥ {threshold}",
            excess,
            values,
            lead + f"above that of random rows of the same matrices (by ≥ {threshold}) in",
            item,
        )
        claims += mirrored(
            above,
            f"embedding.finetune.not_above_random.{cell['group']}.layer{cell['layer']}",
            where + "level with or below that of random rows of the same matrix ({random}; not above by {threshold})",
            lead + f"level with or below that of random rows of the same matrices (not above by {threshold}) in",
            item,
        )
    return claims


def _classifier_claims(finetune: Mapping[str, Any]) -> list[Claim]:
    """The classifier head's rows' feature fraction above, level with (within :data:`CLASSIFIER_MARGIN`) or below
    chance."""
    claims: list[Claim] = []
    classifier = finetune.get("classifier")
    if classifier and classifier.get("fraction") is not None and classifier.get("chance") is not None:
        diff = float(classifier["fraction"]) - float(classifier["chance"])
        values = {
            "model": finetune.get("model"),
            "fraction": classifier["fraction"],
            "chance": classifier["chance"],
            "threshold": CLASSIFIER_MARGIN,
        }
        rows = (
            "The rows of {model}'s fine-tuned classifier head give a feature fraction of {fraction} ({chance} by "
            "chance): "
        )
        claims.append(
            Claim(
                "embedding.finetune.classifier_above_chance",
                rows + "above chance by more than {threshold}",
                diff - CLASSIFIER_MARGIN,
                values,
            )
        )
        claims.append(
            Claim(
                "embedding.finetune.classifier_level_with_chance",
                rows + "level with chance (within {threshold})",
                CLASSIFIER_MARGIN - abs(diff),
                values,
            )
        )
        claims.append(
            Claim(
                "embedding.finetune.classifier_below_chance",
                rows + "below chance by more than {threshold}",
                -diff - CLASSIFIER_MARGIN,
                values,
            )
        )
    return claims


def _zero_shot_claims(zero: Mapping[str, Any], half_step: float) -> list[Claim]:
    claims: list[Claim] = []
    chance, blocks = zero.get("chance"), zero.get("blocks")
    base = {"model": zero.get("model"), "own": zero.get("own"), "chance": chance}
    head = (
        "Zero-shot stitching x_A = x_B E_B E_A⁺ into the fine-tuned {model} (own accuracy {own:3}, majority rate "
        "{chance:3}): "
    )
    if chance is None:
        return claims
    if blocks and zero.get("n_blocks"):
        values = {**base, "blocks": blocks, "n_blocks": zero["n_blocks"]}
        claims.append(
            greater(
                "embedding.zero_shot.blocks_below_majority_every_time",
                head + "running B's blocks gives {blocks}, below the majority rate every time "
                "({n_blocks:d} cases) — across seeds the map through the vocabulary does not carry these "
                "small models' block outputs",
                chance,
                blocks[1],
                **values,
            )
        )
        claims.append(
            Claim(
                "embedding.zero_shot.blocks_never_below_majority",
                head + "running B's blocks gives {blocks}, never below the majority rate ({n_blocks:d} cases)",
                float(blocks[0]) - float(chance) + half_step,
                values,
            )
        )
    for case in zero["cases"]:
        if case.get("accuracy") is None:
            continue
        values = {**base, "donor": case["model"], "n": case["layers"], "accuracy": case["accuracy"]}
        item = "`{donor}` up to layer {n:d} ({accuracy})"
        lead = "Zero-shot stitching into the fine-tuned model, running B up to a layer, gives accuracy "
        suffix = f"{case['model']}.layers{case['layers']}"
        claims.append(
            Claim(
                f"embedding.zero_shot.below_majority.{suffix}",
                head + "running `{donor}` up to layer {n:d} gives {accuracy}, below the majority rate",
                float(chance) - float(case["accuracy"]),
                values,
                lead + "below the majority rate for",
                item,
            )
        )
        claims.append(
            Claim(
                f"embedding.zero_shot.at_or_above_majority.{suffix}",
                head + "running `{donor}` up to layer {n:d} gives {accuracy}, at or above the majority rate",
                float(case["accuracy"]) - float(chance) + half_step,
                values,
                lead + "at or above the majority rate for",
                item,
            )
        )
    return claims
