"""The MLEM paragraph of the findings: held-out Spearman per layer, the features that explain each layer, the odd
one out of the feature-based and RSA similarities, and the untrained controls (:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from thinkalike.reports.findings.claims import Claim, best_of, either_way, greater
from thinkalike.reports.findings.text import (
    LITERATURE,
    as_float,
    code_text,
    int_list,
    missing_section,
    not_run_sentence,
    number_text,
    span_of,
    table_of,
    without_models,
)

#: Number and tense count as explaining "next to nothing" when their permutation importance stays within this much of 0
#: at every layer (the measures' criterion for "reads 0": |alikeness| ≤ 0.05).
NEAR_ZERO = 0.05


FEATURE_LABELS = {
    "pos": "part of speech",
    "word_role": "the word's syntactic role",
    "word_position": "word position",
    "number": "number",
    "tense": "tense",
    "in_relative_clause": "inside/outside a relative clause",
}


def _collect_untrained(tables: Mapping[str, Any], untrained: Sequence[str]) -> list[dict[str, Any]]:
    """Each untrained control's MLEM held-out Spearman over its layers (the trained models' is beside it)."""
    profiles = table_of(tables, "mlem_profiles")
    if profiles is None or profiles.empty:
        return []
    overall = profiles[(profiles["fold"] == -1) & profiles["model"].isin(untrained)]
    return [
        {
            "model": str(model),
            "spearman": span_of(rows.groupby("layer")["spearman_heldout"].first()),
            "n_layers": int(rows["layer"].nunique()),
        }
        for model, rows in overall.groupby("model", sort=True)
    ]


def _block_contrasts(similarity: pd.DataFrame | None) -> dict[str, float] | None:
    """Per model with at least 3 layers: the best block contrast (within − between,
    :func:`thinkalike.measures.blocks.best_contrast`) of its layers × layers similarity matrix (MLEM's feature-based
    or RSA), at most 4 blocks; ``None`` without the table."""
    from thinkalike.measures.blocks import best_contrast

    if similarity is None or similarity.empty:
        return None
    within = similarity[similarity["model_a"] == similarity["model_b"]]
    contrasts = {}
    for model, part in within.groupby("model_a", sort=True):
        matrix = part.pivot_table(index="layer_a", columns="layer_b", values="similarity", aggfunc="first")
        if len(matrix) >= 3 and matrix.notna().all().all():
            value = best_contrast(matrix.to_numpy(), min(4, len(matrix)))
            if value == value:  # NaN: no split with within- and between-block pairs
                contrasts[str(model)] = round(float(value), 6)
    return contrasts


def collect_mlem(tables: Mapping[str, Any], roles: Mapping[str, Any], untrained: Sequence[str] = ()) -> dict[str, Any]:
    """MLEM of the trained models; the ``untrained`` controls' held-out Spearman beside it."""
    controls = _collect_untrained(tables, untrained)
    tables = without_models(tables, untrained)
    profiles = table_of(tables, "mlem_profiles")
    if profiles is None:
        return missing_section("mlem_profiles")
    if profiles.empty:
        return {"empty": True}
    overall = profiles[profiles["fold"] == -1]  # thinkalike.mlem.fit.ALL_FOLDS
    spearman = overall.groupby(["model", "layer"], sort=False)["spearman_heldout"].first()
    wide = overall.pivot_table(index=["model", "layer"], columns="feature", values="importance", aggfunc="first")
    top = wide.idxmax(axis=1)
    dominant = str(top.value_counts().idxmax())
    models = list(dict.fromkeys(overall["model"]))
    checkpoints = [m for m in models if m not in roles["n_layers"]]  # not zoo models: hub or packaged checkpoints
    groups = _layer_groups(spearman, roles, models, checkpoints)
    features = [str(f) for f in wide.columns]
    return {
        **_mlem_settings(overall, profiles.loc[profiles["fold"] >= 0, "fold"]),
        "n_models": len(models),
        "n_layers": int(len(spearman)),
        "spearman": span_of(spearman),
        # "typically > 0.7 across layers": the mean over every trained model's layers (the untrained baseline out)
        "spearman_mean_trained": as_float(
            spearman[[model not in set(untrained) for model, _ in spearman.index]].mean()
        ),
        "spearman_groups": {name: span_of(spearman.loc[keys]) if len(keys) else None for name, keys in groups.items()},
        "mamba": _mamba_entries(overall, roles, models, spearman, wide, dominant),
        "dominant": dominant,
        "dominant_top": int((top == dominant).sum()),
        "dominant_span": span_of(wide.loc[top[top == dominant].index, dominant]),
        "exceptions": [
            {"model": m, "layer": int(layer), "top": str(feature)}
            for (m, layer), feature in top.items()
            if feature != dominant
        ],
        "runner_up": {
            "bridges_blocks": _runner_up(wide, dominant, groups["bridges_blocks"]),
            "neox_embeddings": _runner_up(wide, dominant, groups["neox_embeddings"]),
            "neox_blocks": _runner_up(wide, dominant, groups["neox_blocks"]),
            **({"checkpoints_blocks": _runner_up(wide, dominant, groups["checkpoints_blocks"])} if checkpoints else {}),
        },
        **_minor_features(wide),
        "odd_one_out": {
            method: _odd_one_out(table_of(tables, f"mlem_{method}_similarity")) for method in ("feature", "rsa")
        },
        "block_contrast": {
            method: _block_contrasts(table_of(tables, f"mlem_{method}_similarity")) for method in ("feature", "rsa")
        },
        "untrained": controls,
        **_feature_tops(wide, top, features, groups),
    }


def _mlem_settings(overall: pd.DataFrame, folds: pd.Series) -> dict[str, Any]:
    """How MLEM ran: the level, the stimuli and how many, the folds and the pairs per step."""
    return {
        "level": sorted(set(overall["level"].astype(str))) if "level" in overall else [],
        "stimuli": sorted(set(overall["stimuli"].astype(str))) if "stimuli" in overall else [],
        "n_stimuli": span_of(overall["n_stimuli"]) if "n_stimuli" in overall else None,
        "n_folds": int(folds.max()) + 1 if len(folds) else None,
        "pairs_per_step": int_list(overall["pairs_per_step"]) if "pairs_per_step" in overall else [],
    }


def _layer_groups(
    spearman: pd.Series, roles: Mapping[str, Any], models: Sequence[str], checkpoints: Sequence[str]
) -> dict[str, pd.Index]:
    """The (model, layer) rows of each group of layers: the bridges' and the GPT-NeoX members' embeddings and
    blocks, the bridges' first block, and the checkpoints' (not zoo models) blocks."""

    def rows_of(names: Iterable[str], which: str) -> pd.Index:
        keys = [k for k in spearman.index if k[0] in set(names)]
        if which == "embeddings":
            keys = [k for k in keys if k[1] == 0]
        elif which == "first_block":
            keys = [k for k in keys if k[1] == 1]
        elif which == "blocks":
            keys = [k for k in keys if k[1] >= 1]
        return pd.Index(keys)

    bridges = [m for m in roles["bridges"] if m in models]
    neox = [m for m in roles["gpt_neox"] if m in models]
    return {
        "bridges_embeddings": rows_of(bridges, "embeddings"),
        "bridges_first_block": rows_of(bridges, "first_block"),
        "bridges_blocks": rows_of(bridges, "blocks"),
        "neox_embeddings": rows_of(neox, "embeddings"),
        "neox_blocks": rows_of(neox, "blocks"),
        "checkpoints_blocks": rows_of(checkpoints, "blocks"),
    }


def _runner_up(wide: pd.DataFrame, dominant: str, keys: pd.Index) -> dict[str, Any] | None:
    """The feature with the highest mean importance after ``dominant`` over the rows ``keys``, its span and
    largest importance (``None`` without rows or numbers)."""
    if len(keys) == 0:
        return None
    part = wide.loc[keys].drop(columns=[dominant], errors="ignore")
    if part.empty or part.isna().all().all():
        return None
    feature = str(part.mean().idxmax())
    return {"feature": feature, "span": span_of(part[feature]), "max": as_float(part[feature].max())}


def _mamba_entries(
    overall: pd.DataFrame,
    roles: Mapping[str, Any],
    models: Sequence[str],
    spearman: pd.Series,
    wide: pd.DataFrame,
    dominant: str,
) -> list[dict[str, Any]]:
    """Per Mamba model that ran, its last layer: held-out Spearman, the top feature and every feature's
    importance."""
    last = {m: int(overall.loc[overall["model"] == m, "layer"].max()) for m in models}
    top = wide.idxmax(axis=1)
    features = [str(f) for f in wide.columns]
    return [
        {
            "model": m,
            "layer": last[m],
            "spearman": as_float(spearman[(m, last[m])]),
            "top": str(top[(m, last[m])]),
            "top_importance": as_float(wide.loc[(m, last[m])].max()),
            "dominant_importance": as_float(wide.loc[(m, last[m]), dominant]) if dominant in wide else None,
            "importances": {f: as_float(wide.loc[(m, last[m]), f]) for f in features},
        }
        for m in roles["mamba"]
        if m in models
    ]


def _minor_features(wide: pd.DataFrame) -> dict[str, Any]:
    """The importances of the minor features (number, tense), each and together."""
    return {
        "minor": {f: span_of(wide[f]) for f in ("number", "tense") if f in wide},
        "minor_span": span_of(
            pd.concat([wide[f] for f in ("number", "tense") if f in wide])
            if any(f in wide for f in ("number", "tense"))
            else []
        ),
    }


def _feature_tops(
    wide: pd.DataFrame, top: pd.Series, features: Sequence[str], groups: Mapping[str, pd.Index]
) -> dict[str, Any]:
    """For the claims (claims_mlem): every feature's count of layers on top, its importance there, its smallest
    excess over the other features' importance (> 0: on top at every layer), and each group's importances."""
    return {
        "top_counts": {f: int((top == f).sum()) for f in features},
        "top_spans": {f: span_of(wide.loc[top[top == f].index, f]) for f in features},
        "top_excess": {f: _smallest_excess(wide, f) for f in features},
        "group_importance": {
            name: {
                f: {"mean": as_float(wide.loc[keys, f].mean()), "span": span_of(wide.loc[keys, f])} for f in features
            }
            for name, keys in groups.items()
            if len(keys)
        },
    }


def _smallest_excess(wide: pd.DataFrame, feature: str) -> float | None:
    """The smallest excess, over the layers, of ``feature``'s importance over the largest of the other features'."""
    others = wide.drop(columns=[feature])
    if others.empty:
        return None
    return as_float((wide[feature] - others.max(axis=1)).min())


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
    lows = other.groupby(["model_a", "layer_a"])["similarity"].min()
    return {
        "model": str(model),
        "layer": int(layer),
        "mean": as_float(means.min()),
        "min": as_float(own.min()),
        "overall_min": as_float(other["similarity"].min()),
        "layers": [
            {"model": str(m), "layer": int(lay), "mean": as_float(v), "min": as_float(lows[(m, lay)])}
            for (m, lay), v in means.items()
        ],
    }


def _feature(name: str) -> str:
    return FEATURE_LABELS.get(name, code_text(name))


# ---- claims ---------------------------------------------------------------------------------------------------------

#: Where each runner-up is sought (the ``spearman_groups`` rows it is averaged over).
RUNNER_UP_WHERE = {
    "bridges_blocks": "in the GeLU/SoLU bridges after the embeddings",
    "neox_embeddings": "at GPT-NeoX's embeddings",
    "neox_blocks": "in GPT-NeoX's blocks",
}

#: The odd-one-out similarities: their label and the statistic they average.
SIMILARITY_LABELS = {"feature": ("feature-based similarity", "weighted τ"), "rsa": ("RSA similarity", "Spearman ρ")}


def _middle(span: Sequence[float]) -> float:
    return (float(span[0]) + float(span[1])) / 2


def _second_margin(scores: Mapping[str, float | None], name: str) -> float | None:
    """ "``name`` is the second highest of ``scores``": the smaller of its gap below the highest of the others and its
    gap above the next of them (only the gap below when there is one other); ``None`` when it or all others lack a
    score."""
    score = scores.get(name)
    others = sorted((float(v) for other, v in scores.items() if other != name and v is not None), reverse=True)
    if score is None or not others:
        return None
    below = others[0] - float(score)
    return below if len(others) == 1 else min(below, float(score) - others[1])


def claims_mlem(findings: Mapping[str, Any]) -> list[Claim]:
    """The MLEM paragraph's claims (:mod:`thinkalike.reports.findings.claims`), ``[]`` when MLEM was not run:

    * ``mlem.spearman_below_paper`` / ``mlem.spearman_reaches_paper``: the held-out Spearman over the trained
      models' layers against the paper's > 0.7; margin ``paper − max`` / ``max − paper``;
    * ``mlem.bridges_rise_after_first_block`` / ``mlem.bridges_fall_after_first_block``: the GeLU/SoLU bridges'
      Spearman at their embeddings against after the first block, compared by the two spans' midpoints; margin
      ``mid(first block) − mid(embeddings)`` / its negative;
    * ``mlem.neox_highest_at_embeddings`` / ``mlem.neox_highest_after_embeddings``: GPT-NeoX's Spearman at its
      embeddings (E) against its blocks (B) — separated, or higher in midpoint and maximum; margin
      ``max(E_low − B_high, min(mid(E) − mid(B), E_high − B_high))`` / the same with E and B swapped;
    * ``mlem.most_layers_on_top.<feature>``: the feature with the largest permutation importance at the most
      layers (:func:`best_of` over the counts); margin its count minus the largest other count (layers);
    * ``mlem.on_top_at_every_layer.<feature>``: that feature's importance is the largest at every layer; margin the
      smallest excess over the other features' largest importance at a layer (:func:`every`);
    * ``mlem.runner_up.<group>.<feature>`` (``group``: bridges_blocks, neox_embeddings, neox_blocks): the feature
      with the second-largest mean importance over the group's layers; margin the smaller of its gap below the
      largest other mean and above the next one;
    * ``mlem.last_layer_top.<model>.<feature>`` (each Mamba): the feature on top at its last layer; margin its
      importance minus the largest other feature's there;
    * ``mlem.odd_one_out.<method>.<model>.layer<L>`` (``method``: feature, rsa): the layer with the lowest mean
      similarity to other models' layers (:func:`best_of`, lower); margin the next lowest mean minus its mean;
    * ``mlem.near_zero.<feature>`` / ``mlem.beyond_near_zero.<feature>`` (number, tense): importance within
      ±:data:`NEAR_ZERO` at every layer; margin ``NEAR_ZERO − max |importance|`` / its negative;
    * ``mlem.untrained_below_trained.<model>`` / ``mlem.untrained_above_trained.<model>`` (each untrained control):
      its Spearman span against the trained models'; margin ``trained_low − control_high`` /
      ``control_low − trained_high``.
    """
    mlem = findings.get("mlem")
    if not isinstance(mlem, Mapping) or not mlem or not_run_sentence("MLEM", mlem):
        return []
    claims = _spearman_claims(mlem, float((findings.get("literature") or LITERATURE)["mlem_spearman"]))
    claims += _spearman_group_claims(mlem.get("spearman_groups") or {})
    claims += _feature_claims(mlem)
    claims += _last_layer_claims(mlem)
    claims += _odd_one_out_claims(mlem.get("odd_one_out") or {})
    claims += _minor_claims(mlem.get("minor") or {})
    return claims + _untrained_claims(mlem)


def _spearman_claims(mlem: Mapping[str, Any], paper: float) -> list[Claim]:
    """The held-out Spearman over the trained models' layers below the paper's, or reaching it at its top (margins:
    :func:`claims_mlem`)."""
    spearman, n_models = mlem.get("spearman"), mlem.get("n_models")
    if not spearman:
        return []
    return either_way(
        "mlem.spearman_below_paper",
        "MLEM's held-out Spearman of each layer (layer 0 = embeddings) is {spearman} over the "
        "{n_models:d} models — below the > {paper:1} the paper reports on BERT, GPT-2 and Mamba",
        "mlem.spearman_reaches_paper",
        "MLEM's held-out Spearman of each layer ({spearman} over the {n_models:d} models) "
        "reaches the > {paper:1} the paper reports on BERT, GPT-2 and Mamba at its top ({top})",
        paper,
        spearman[1],
        spearman=spearman,
        n_models=n_models,
        paper=paper,
        top=spearman[1],
    )


def _minor_claims(minor: Mapping[str, Any]) -> list[Claim]:
    """Number and tense explain next to nothing (importance within ±:data:`NEAR_ZERO` at every layer), or more
    (margins: :func:`claims_mlem`)."""
    claims: list[Claim] = []
    for feature in ("number", "tense"):
        span = minor.get(feature)
        if not span:
            continue
        largest = max(abs(float(span[0])), abs(float(span[1])))
        values = {"label": _feature(feature), "span": span, "largest": largest, "threshold": NEAR_ZERO}
        claims.append(
            Claim(
                f"mlem.near_zero.{feature}",
                "{label} explains next to nothing: its permutation importance is {span:+2} over the "
                "layers, within ±{threshold} at every one",
                NEAR_ZERO - largest,
                values,
                f"Next to nothing explained (permutation importance within ±{number_text(NEAR_ZERO)} at every layer)",
                "{label} ({span:+2})",
            )
        )
        claims.append(
            Claim(
                f"mlem.beyond_near_zero.{feature}",
                "{label} explains more than next to nothing: its permutation importance is {span:+2} over "
                "the layers, beyond ±{threshold} somewhere",
                largest - NEAR_ZERO,
                values,
            )
        )
    return claims


def _untrained_claims(mlem: Mapping[str, Any]) -> list[Claim]:
    """Each untrained control's held-out Spearman below every trained model's layers, or above (margins:
    :func:`claims_mlem`)."""
    claims: list[Claim] = []
    trained = mlem.get("spearman")
    for control in mlem.get("untrained") or []:
        if not control.get("spearman") or not trained:
            continue
        values = {"model": control["model"], "control": control["spearman"], "trained": trained}
        claims.append(
            greater(
                f"mlem.untrained_below_trained.{control['model']}",
                "The untrained control `{model}` (a zoo model's initialisation, left out of the trained "
                "models' numbers) has held-out Spearman {control}, below every trained model's layers "
                "({trained})",
                trained[0],
                control["spearman"][1],
                **values,
            )
        )
        claims.append(
            greater(
                f"mlem.untrained_above_trained.{control['model']}",
                "The untrained control `{model}` has held-out Spearman {control}, above every trained "
                "model's layers ({trained})",
                control["spearman"][0],
                trained[1],
                **values,
            )
        )
    return claims


def _spearman_group_claims(groups: Mapping[str, Any]) -> list[Claim]:
    """The bridges' rise or fall after the first block and GPT-NeoX's embeddings against its blocks."""
    claims: list[Claim] = []
    low, high = groups.get("bridges_embeddings"), groups.get("bridges_first_block")
    if low and high:
        change = _middle(high) - _middle(low)
        values = {"embeddings": low, "first_block": high}
        claims.append(
            Claim(
                "mlem.bridges_rise_after_first_block",
                "The GeLU/SoLU bridges' held-out Spearman rises from {embeddings} at the embeddings to "
                "{first_block} after the first block",
                change,
                values,
            )
        )
        claims.append(
            Claim(
                "mlem.bridges_fall_after_first_block",
                "The GeLU/SoLU bridges' held-out Spearman falls from {embeddings} at the embeddings to "
                "{first_block} after the first block",
                -change,
                values,
            )
        )
    emb, blocks = groups.get("neox_embeddings"), groups.get("neox_blocks")
    if emb and blocks:

        def above(a: Sequence[float], b: Sequence[float]) -> float:
            return max(a[0] - b[1], min(_middle(a) - _middle(b), a[1] - b[1]))

        values = {"embeddings": emb, "blocks": blocks}
        claims.append(
            Claim(
                "mlem.neox_highest_at_embeddings",
                "The GPT-NeoX family's held-out Spearman is highest at the embeddings ({embeddings}) and "
                "lower after ({blocks})",
                above(emb, blocks),
                values,
            )
        )
        claims.append(
            Claim(
                "mlem.neox_highest_after_embeddings",
                "The GPT-NeoX family's held-out Spearman is higher after the embeddings ({blocks}) than at "
                "them ({embeddings})",
                above(blocks, emb),
                values,
            )
        )
    return claims


def _feature_claims(mlem: Mapping[str, Any]) -> list[Claim]:
    """Which feature is on top at the most layers, at every layer, and the runner-up in each group."""
    claims: list[Claim] = []
    if mlem.get("top_counts") is None:
        return claims
    counts = {str(f): int(n) for f, n in mlem["top_counts"].items()}
    spans: dict[str, list[float] | None] = dict(mlem["top_spans"])
    n_layers, n_models = mlem.get("n_layers"), mlem.get("n_models")
    extra = {
        f: {
            "label": _feature(f),
            "count": counts[f],
            "n_layers": n_layers,
            "n_models": n_models,
            **({"span": spans[f]} if spans.get(f) else {}),
        }
        for f in counts
    }
    most = best_of("mlem.most_layers_on_top", "", {f: float(n) for f, n in counts.items()}, higher=True, values=extra)
    for claim in most:
        feature = claim.id.rsplit(".", 1)[1]
        template = (
            "{label} has the largest permutation importance at more layers than any other feature: at "
            "{count:d} of {n_layers:d} layers of the {n_models:d} models"
            + (" ({span} there)" if "span" in claim.values else "")
        )
        claims.append(Claim(claim.id, template, claim.margin, {**claim.values, **extra[feature]}))
    for feature in counts:
        values = extra[feature]
        template = (
            "{label} has the largest permutation importance at every one of the {n_layers:d} layers of the "
            "{n_models:d} models" + (" ({span} there)" if "span" in values else "")
        )
        claims.append(Claim(f"mlem.on_top_at_every_layer.{feature}", template, mlem["top_excess"].get(feature), values))
    group_importance = mlem["group_importance"]
    for group, where in RUNNER_UP_WHERE.items():
        part = group_importance.get(group)
        if not part:
            continue
        scores = {f: v.get("mean") for f, v in part.items()}
        candidates = [
            (f, _second_margin(scores, f), {"span": v.get("span"), "mean": v.get("mean")}) for f, v in part.items()
        ]
        for feature, margin, numbers in candidates:
            values = {"label": _feature(feature), "where": where, **{k: v for k, v in numbers.items() if v is not None}}
            mean = " (mean {mean})" if "mean" in values else ""
            claims.append(
                Claim(
                    f"mlem.runner_up.{group}.{feature}",
                    "{label} has the second-largest mean permutation importance {where}" + mean + ", ranging {span}",
                    margin,
                    values,
                    "The runner-up (the second-largest mean permutation importance) is",
                    "{label} {where} ({span})",
                )
            )
    return claims


def _last_layer_claims(mlem: Mapping[str, Any]) -> list[Claim]:
    """Which feature is on top at each Mamba's last layer: it keeps the dominant feature or switches."""
    claims: list[Claim] = []
    dominant = mlem.get("dominant")
    for m in mlem.get("mamba") or []:
        scores = dict(m["importances"])
        dominant_score = scores.get(dominant) if dominant else None
        extra = {
            f: {
                "model": m["model"],
                "layer": m["layer"],
                "label": _feature(f),
                **(
                    {"dominant_label": _feature(dominant), "dominant_score": dominant_score}
                    if dominant and dominant_score is not None and f != dominant
                    else {}
                ),
            }
            for f in scores
        }
        for claim in best_of(f"mlem.last_layer_top.{m['model']}", "", scores, higher=True, values=extra):
            feature = claim.id.rsplit(".", 1)[1]
            if feature == dominant:
                template = "`{model}`'s last layer (layer {layer:d}) keeps {label} on top ({score})"
            else:
                template = "`{model}`'s last layer (layer {layer:d}) switches to {label} ({score}" + (
                    "; {dominant_label} {dominant_score})" if "dominant_score" in claim.values else ")"
                )
            claims.append(Claim(claim.id, template, claim.margin, claim.values))
    return claims


def _odd_one_out_claims(odd: Mapping[str, Any]) -> list[Claim]:
    """Which layer is the odd one out of each similarity (the lowest mean similarity to other models' layers)."""
    claims: list[Claim] = []
    for method, (label, measure) in SIMILARITY_LABELS.items():
        o = odd.get(method)
        if not o:
            continue
        template = (
            "`{model}` layer {layer:d} is the odd one out of the "
            + label
            + " ("
            + measure
            + " {score:+2} on average with other models' layers, down to {min:+2})"
        )
        layers = o["layers"]
        scores = {f"{r['model']}.layer{r['layer']}": r["mean"] for r in layers}
        extra = {
            f"{r['model']}.layer{r['layer']}": {"model": r["model"], "layer": r["layer"], "min": r["min"]}
            for r in layers
        }
        claims += best_of(f"mlem.odd_one_out.{method}", template, scores, higher=False, values=extra)
    return claims
