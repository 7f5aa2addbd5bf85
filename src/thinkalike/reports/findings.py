"""The README's findings — the timing paragraph and "What the default run finds" — computed from a run's saved
outputs (no Kedro import: :mod:`thinkalike.reports.findings_cli` loads the tables through the catalog).

* :func:`collect_findings` ``(tables) -> dict``: every number the paragraphs quote, from the loaded tables
  (catalog name → DataFrame or dict; :data:`TABLES` lists them; ``model_configs`` maps every zoo model to its
  saved ``models.<model>.model_config``; ``parameters`` is the run's parameters). The dict is plain JSON (NaN is
  ``None``), so ``render_findings(json.load(...))`` gives exactly what ``render_findings(collect_findings(...))``
  gives.
* :func:`render_findings` ``(findings) -> str``: the markdown of the README region between
  :data:`START_MARKER` and :data:`END_MARKER`; deterministic. Every number is read from the dict and every
  claim that depends on numbers (an asymmetry, an order, "below what the paper reports", "the groups do not
  diverge") is decided from them, so the sentence says whichever way it comes out. A section whose tables are
  missing (its pipeline was not run) says so instead.

Who is who comes from the saved model configs (:func:`model_facts`, :func:`model_roles`), not from names:
SoLU/GeLU pairs are causal TransformerLens bridges of equal shape whose activations are ``solu*`` and ``gelu``
(different seeds; equal seeds make the *same-seed control*); *seed replicas* are models identical but for
their seed; the *GPT-NeoX family* is every ``gpt_neox`` model; encoders are masked-LM models.

Stitching asymmetries are measured against the self-stitching floor: a penalty of f → g at layers (l, m) is
compared with g → g at (m, m), same φ kind — the penalty a φ trained on g's own stream already costs (or gains).
"Above the floor" means the two bootstrap intervals are separated; ``excess`` is the penalty less the floor's.
Where a penalty table holds several rows per stitch (one per φ seed), they are averaged and their intervals
joined (lowest low, highest high).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.reports.scaling import scaling_sentences
from thinkalike.models.sources import is_initialisation
from thinkalike.timings import RUN_PIPELINE, START_ROW, TOTAL, format_seconds, most_at_once, pipeline_totals

START_MARKER = "<!-- findings:start -->"
END_MARKER = "<!-- findings:end -->"

#: Catalog datasets :func:`collect_findings` reads (any may be missing); plus ``parameters`` and ``model_configs``.
TABLES: tuple[str, ...] = (
    "corpus_statistics", "zoo_summary", "run_timings",
    "cka_distances",
    "stitching_penalties", "stitching_phis",
    "mlem_profiles", "mlem_feature_similarity", "mlem_rsa_similarity",
    "embedding_keep_k", "embedding_alignment", "embedding_feature_fractions", "embedding_zero_shot",
    "embedding_finetune_curves",
    "models.nli.pairs", "models.nli.accuracy", "models.nli.groups", "models.nli.training_curves",
    "models.nli.stitching", "models.nli.stitching_groups", "models.nli.cka_group_curves", "models.nli.sweep",
    "models.nli.encoder.model_config",
    "scaling_summary",
    "similarity_measures", "dimension_shares", "rogue_remedies", "similarity_calibration", "measure_grounding",
)

#: Numbers from the papers the findings are compared with (not measured here).
LITERATURE: dict[str, Any] = {
    "mlem_spearman": 0.7,                   # Jalouzot et al. 2024: held-out Spearman > 0.7 on BERT, GPT-2, Mamba
    "keep_k_transpose": 0.83,               # Dar et al. 2022 appendix A, GPT-2: E' = E^T at k ≈ 1000 ...
    "keep_k_pinv": 0.10,                    # ... against E' = E^+
    "keep_k_k": 1000,
    "keep_k_vocabulary": 50257,             # GPT-2's vocabulary
    "mccoy_ood_non_entailed": [0.05, 0.55],  # McCoy et al. 2020, 100 BERTs on HANS lexical overlap, non-entailed
}

#: The default run's time budget on 2 idle CPU cores (the README's "two commands" promise; issues 19 and 21 set it
#: at 10 minutes with the scaling family, every measure and the report).
RUN_BUDGET_SECONDS = 10 * 60
#: keep-k: E' = E^T counts as "level with" E^+ within this much.
KEEP_K_LEVEL = 0.02
#: Fine-tune fractions: ΔW rows count as "above" random rows by at least this much.
FRACTION_MARGIN = 0.05
#: OOD penalties / fractions: an NLI copy is "mostly heuristic" below this OOD non-entailed accuracy.
HEURISTIC_BELOW = 0.5

MINUS = "\u2212"
KIND_LABELS = {"identity": "identity", "affine": "affine", "affine_ln": "affine + LayerNorm"}
FEATURE_LABELS = {"pos": "part of speech", "word_role": "the word's syntactic role", "word_position": "word position",
                  "number": "number", "tense": "tense", "in_relative_clause": "inside/outside a relative clause"}
GROUP_LABELS = {"FF_key": "FF keys", "FF_value": "FF values", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V",
                "W_O": "W_O", "head": "the classifier head"}
DISTRIBUTION_LABELS = {"normal": "N(0,1)", "ff_values": "FF values", "residual": "residual states"}
TASK_LABELS = {"tense": "tense", "subject_number": "the subject's number", "sentence_type": "the sentence type"}
RELATION_LABELS = {"between": "between groups", "within_generalizing": "within the generalizing copies",
                   "within_heuristic": "within the heuristic ones"}
SUBCASE_LABELS = {"passive": "passives", "relative_clause": "relative clauses", "preposition": "prepositional phrases",
                  "conjunction": "conjunctions", "swap": "swaps"}
PIPELINE_ORDER = ("corpus", "zoo", "activations", "stitching", "cka", "mlem", "embedding", "nli")


# =========================================================================== numbers and JSON


def _f(value: Any, digits: int = 6) -> float | None:
    """A finite float rounded to ``digits`` decimals, else ``None``."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number, digits) if math.isfinite(number) else None


def _span(values: Iterable[Any]) -> list[float] | None:
    """``[min, max]`` of the finite values, or ``None`` when there are none."""
    finite = [float(v) for v in values if v is not None and _f(v) is not None]
    return [_f(min(finite)), _f(max(finite))] if finite else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _f(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)


def _table(tables: Mapping[str, Any], name: str) -> pd.DataFrame | None:
    table = tables.get(name)
    return table if isinstance(table, pd.DataFrame) else None


def _ints(values: Iterable[Any]) -> list[int]:
    return sorted({int(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))})


def _missing(*names: str) -> dict[str, Any]:
    return {"missing": list(names)}


# =========================================================================== who is who


@dataclass(frozen=True)
class ModelFacts:
    """What the findings need of a model's configuration."""

    name: str
    family: str
    kind: str          # solu | gelu | encoder | gpt_neox | mamba | another activation or model type
    objective: str
    seed: int | None
    n_layers: int | None
    d_model: int | None
    n_heads: int | None
    head_dim: int | None
    signature: str     # the architecture without seed and name (seed replicas share it)


def _facts(name: str, config: Mapping[str, Any]) -> ModelFacts:
    family = str(config.get("family", ""))
    objective = str(config.get("objective", "causal"))
    arch = dict(config.get("bridge_config") or config.get("hf_config") or config.get("architecture") or {})
    seed = config.get("seed", arch.get("seed"))
    if family == "bridge":
        act = str(arch.get("act_fn", ""))
        masked = objective == "masked" or arch.get("attention_dir") == "bidirectional"
        kind = "encoder" if masked else ("solu" if act.startswith("solu") else act)
        n_layers, d_model, n_heads = arch.get("n_layers"), arch.get("d_model"), arch.get("n_heads")
        head_dim = arch.get("d_head")
        shape = {k: arch.get(k) for k in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "act_fn",
                                           "positional_embedding_type")}
    else:
        model_type = str(arch.get("model_type", family))
        kind = "encoder" if objective == "masked" else model_type
        n_layers, d_model = arch.get("num_hidden_layers"), arch.get("hidden_size")
        n_heads = arch.get("num_attention_heads")
        head_dim = (int(d_model) // int(n_heads)) if d_model and n_heads else None
        shape = {k: arch.get(k) for k in ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads",
                                           "intermediate_size", "state_size", "expand")}
    signature = json.dumps({"family": family, "objective": objective, **shape}, sort_keys=True, default=str)
    as_int = lambda v: None if v is None else int(v)  # noqa: E731
    return ModelFacts(name, family, kind, objective, as_int(seed), as_int(n_layers), as_int(d_model), as_int(n_heads),
                      as_int(head_dim), signature)


def model_facts(tables: Mapping[str, Any]) -> dict[str, ModelFacts]:
    """Every zoo model's facts, in ``zoo_summary`` order, from its saved config (``model_configs``), else from the
    parameters' ``zoo.models``."""
    configs = dict(tables.get("model_configs") or {})
    parameters = tables.get("parameters") or {}
    zoo_models = ((parameters.get("zoo") or {}).get("models") or {})
    summary = _table(tables, "zoo_summary")
    names = list(summary["model"]) if summary is not None else list(configs or zoo_models)
    facts = {}
    for name in names:
        config = configs.get(name) or zoo_models.get(name)
        if config:
            facts[str(name)] = _facts(str(name), config)
    return facts


def neox_twins(neox: Sequence[ModelFacts]) -> dict[str, str]:
    """``{off-trend member: twin}``: GPT-NeoX models of equal depth, width and seed whose head dimensions differ, the
    twin's being the family's most common one (the scaling pipeline's ``twins: auto``)."""
    head_dims = [f.head_dim for f in neox]
    if not head_dims:
        return {}
    trend = max(set(head_dims), key=head_dims.count)
    twins = {}
    for i, a in enumerate(neox):
        for b in neox[i + 1:]:
            if (a.n_layers, a.d_model, a.seed) == (b.n_layers, b.d_model, b.seed) and a.head_dim != b.head_dim \
                    and trend in (a.head_dim, b.head_dim):
                odd, twin = (b, a) if a.head_dim == trend else (a, b)
                twins[odd.name] = twin.name
    return twins


def model_roles(facts: Mapping[str, ModelFacts]) -> dict[str, Any]:
    """SoLU/GeLU pairs (``solu_gelu``: different seeds; ``control``: the same seed), groups of seed replicas, the
    GPT-NeoX family, encoders, Mamba models and other models (names in zoo order)."""
    bridges = [f for f in facts.values() if f.family == "bridge" and f.kind in ("solu", "gelu")]
    pairs = []
    for s in (f for f in bridges if f.kind == "solu"):
        for g in (f for f in bridges if f.kind == "gelu"):
            if (s.n_layers, s.d_model, s.n_heads) == (g.n_layers, g.d_model, g.n_heads):
                pairs.append({"solu": s.name, "gelu": g.name, "depth": s.n_layers, "same_seed": s.seed == g.seed})
    by_signature: dict[str, list[ModelFacts]] = {}
    for f in facts.values():
        by_signature.setdefault(f.signature, []).append(f)
    controls = {p["solu"] for p in pairs if p["same_seed"]}
    # groups of models identical but for their seed; not the SoLUs of a same-seed control (the control is their
    # point: a SoLU with a GeLU's seed)
    replicas = [{"models": [f.name for f in group], "kind": group[0].kind, "depth": group[0].n_layers}
                for group in by_signature.values() if len(group) > 1 and len({f.seed for f in group}) == len(group)
                and not controls & {f.name for f in group}]
    all_neox = [f for f in facts.values() if f.kind == "gpt_neox"]
    twins = neox_twins(all_neox)
    neox = [f for f in all_neox if f.name not in twins.values()]
    head_dims = [f.head_dim for f in neox]
    odd = [f.name for f in neox if len(neox) > 2 and head_dims.count(f.head_dim) == 1]
    return {
        "solu_gelu": [p for p in pairs if not p["same_seed"]],
        "control": [p for p in pairs if p["same_seed"]],
        "replicas": replicas,
        "bridges": [f.name for f in bridges],
        "gpt_neox": [f.name for f in neox],
        "gpt_neox_head_dims": {f.name: f.head_dim for f in all_neox},
        "gpt_neox_odd": odd,
        "gpt_neox_twins": twins,
        "encoders": [f.name for f in facts.values() if f.kind == "encoder"],
        "mamba": [f.name for f in facts.values() if f.kind == "mamba"],
        "others": [f.name for f in facts.values()
                   if f.kind not in ("gpt_neox", "encoder", "mamba")
                   and not any(f.name in (p["solu"], p["gelu"]) for p in pairs)
                   and not any(f.name in g["models"] for g in replicas)],
        "n_layers": {f.name: f.n_layers for f in facts.values()},
    }


# =========================================================================== collect


def collect_findings(tables: Mapping[str, Any]) -> dict[str, Any]:
    """Every number of the findings paragraphs, from the loaded tables (module docstring); plain JSON."""
    facts = model_facts(tables)
    roles = model_roles(facts)
    parameters = tables.get("parameters") or {}
    untrained = untrained_models(parameters)  # controls: the MLEM and embedding findings are about trained models
    findings = {
        "machine": {"cpu_count": os.cpu_count(), "system": platform.system(), "architecture": platform.machine(),
                    "platform": platform.platform(), "python": platform.python_version()},
        "literature": LITERATURE,
        "budget_seconds": RUN_BUDGET_SECONDS,
        "roles": roles,
        "corpus": _guarded(_collect_corpus, tables),
        "zoo": _guarded(_collect_zoo, tables, parameters),
        "timing": _guarded(_collect_timing, tables),
        "cka": _guarded(_collect_cka, tables, roles, parameters),
        "stitching": _guarded(_collect_stitching, tables, roles, parameters),
        "mlem": _guarded(_collect_mlem, tables, roles, untrained),
        "embedding": _guarded(_collect_embedding, without_models(tables, untrained), roles),
        "nli": _guarded(_collect_nli, tables, parameters),
        "scaling": _guarded(_collect_scaling, tables),
        "measures": _guarded(_collect_measures, tables, roles),
    }
    return json.loads(json.dumps(_jsonable(findings), allow_nan=False))


def untrained_models(parameters: Mapping[str, Any]) -> list[str]:
    """The models of ``activations.models`` that are zoo initialisations (``zoo:<m>?weights=initial``): untrained
    controls, kept out of the findings about trained models."""
    specs = ((parameters.get("activations") or {}).get("models") or {})
    return sorted(name for name, spec in specs.items() if isinstance(spec, str) and is_initialisation(spec))


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


def _collect_untrained(tables: Mapping[str, Any], untrained: Sequence[str]) -> list[dict[str, Any]]:
    """Each untrained control's MLEM held-out Spearman over its layers (the trained models' is beside it)."""
    profiles = _table(tables, "mlem_profiles")
    if profiles is None or profiles.empty:
        return []
    overall = profiles[(profiles["fold"] == -1) & profiles["model"].isin(untrained)]
    return [{"model": str(model), "spearman": _span(rows.groupby("layer")["spearman_heldout"].first()),
             "n_layers": int(rows["layer"].nunique())} for model, rows in overall.groupby("model", sort=True)]


def _controls(mlem: Mapping[str, Any]) -> str:
    """" and N untrained control(s)" when MLEM also fitted untrained controls, else ""."""
    controls = mlem.get("untrained") or []
    return f" and {_plural(len(controls), 'untrained control')}" if controls else ""


def _collect_scaling(tables: Mapping[str, Any]) -> dict[str, Any]:
    """The scaling pipeline's summary as it is (its answers are already numbers: :mod:`thinkalike.reports.scaling`)."""
    summary = tables.get("scaling_summary")
    if not summary:
        return _missing("scaling_summary")
    return dict(summary)


def _collect_measures(tables: Mapping[str, Any], roles: Mapping[str, Any]) -> dict[str, Any]:
    """Per measure: seed replicas against SoLU vs GeLU (different seeds); rogue-dimension shares; what the remedies
    change on CKA."""
    summary = _table(tables, "similarity_measures")
    if summary is None or summary.empty:
        return _missing("similarity_measures")
    replica_pairs = [(a, b) for group in roles["replicas"] for i, a in enumerate(group["models"])
                     for b in group["models"][i + 1:]]
    solu_gelu = [(p["solu"], p["gelu"]) for p in roles["solu_gelu"]]
    per_measure = []
    for name, rows in summary.groupby("measure", sort=False):
        def values(pairs: Sequence[tuple[str, str]]) -> list[float]:
            found = (_pair_row(rows, a, b) for a, b in pairs)
            return [float(row["matched_mean"]) for row in found if row is not None]

        replicas, different = values(replica_pairs), values(solu_gelu)
        if not replicas or not different:
            continue
        distance = rows["kind"].iloc[0] == "distance"
        separates = (max(replicas) < min(different)) if distance else (min(replicas) > max(different))
        per_measure.append({"measure": name, "kind": rows["kind"].iloc[0], "replicas": _span(replicas),
                            "solu_gelu": _span(different), "separates": bool(separates)})
    shares = _table(tables, "dimension_shares")
    rogue = None
    if shares is not None and len(shares):
        top = shares.loc[shares["top1_share"].idxmax()]
        rogue = {"max_top1": _f(top["top1_share"]), "model": str(top["model"]), "layer": int(top["layer"]),
                 "n_layers": int(len(shares)), "n_above_half": int((shares["top1_share"] > 0.5).sum()),
                 "n_tokens": int(shares["n_tokens"].max())}
    remedies = _table(tables, "rogue_remedies")
    changes = None
    if remedies is not None and len(remedies):
        cross = remedies[(remedies["model_a"] != remedies["model_b"]) & (remedies["measure"] == "cka")]
        raw = cross[cross["variant"] == "raw"].set_index(["model_a", "model_b"])["matched_mean"]
        changes = {}
        for variant in sorted(set(cross["variant"]) - {"raw"}):
            other = cross[cross["variant"] == variant].set_index(["model_a", "model_b"])["matched_mean"]
            delta = (other - raw).dropna()
            if len(delta):
                pair = delta.abs().idxmax()
                changes[variant] = {"max_abs_change": _f(abs(delta[pair])), "change": _f(delta[pair]),
                                    "pair": list(pair), "n_pairs": int(len(delta))}
    calibration = _table(tables, "similarity_calibration")
    calibrated = None
    if calibration is not None and len(calibration):
        calibrated = {"n_pairs": int(calibration[["model_a", "model_b"]].drop_duplicates().shape[0]),
                      "n_permutations": int(calibration["n_permutations"].max()), "statistics": {}}
        for (statistic, name), rows in calibration.groupby(["statistic", "measure"], sort=False):
            calibrated["statistics"].setdefault(statistic, []).append(
                {"measure": name, "z": _span(rows["z"]), "n_significant": int((rows["p_value"] <= 0.05).sum()),
                 "min_p": _f(rows["p_value"].min())})
    grounding = _table(tables, "measure_grounding")
    grounded = None
    if grounding is not None and len(grounding):
        grounded = [{"measure": str(row["measure"]), "kind": str(row["kind"]), "n_models": int(row["n_models"]),
                     "monotonicity": _f(row["monotonicity"]), "specificity": _f(row["specificity"]),
                     "chance": _f(row["specificity_chance"]), "sensitivity": _f(row.get("sensitivity")),
                     "null_permuted": _f(row.get("null_permuted")), "null_independent": _f(row.get("null_independent")),
                     "trained_vs_untrained": _f(row.get("trained_vs_untrained")),
                     "untrained_chance": _f(row.get("trained_vs_untrained_chance")),
                     "n_untrained_pairs": int(row.get("n_untrained_pairs") or 0)}
                    for row in grounding.to_dict("records")]
    return {"n_tokens": int(summary["n_tokens"].max()), "n_measures": int(summary["measure"].nunique()),
            "per_measure": per_measure, "rogue": rogue, "remedies": changes, "calibration": calibrated,
            "grounding": grounded}


def _guarded(collect: Any, *args: Any) -> dict[str, Any]:
    """``collect(*args)``, or ``{"error": …}`` when a table does not have what it needs (a changed schema): one
    section's failure does not stop the others (the command reports errors and does not write the README)."""
    try:
        return collect(*args)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as error:
        return {"error": f"{type(error).__name__}: {error}"}


def collect_errors(findings: Any, where: str = "") -> list[str]:
    """``"<section>: <error>"`` for every section that could not be collected."""
    if isinstance(findings, Mapping):
        found = [f"{where or 'findings'}: {findings['error']}"] if "error" in findings else []
        return found + [e for key, value in findings.items() for e in collect_errors(value, f"{where}.{key}".strip("."))]
    return []


def _collect_corpus(tables: Mapping[str, Any]) -> dict[str, Any]:
    statistics = tables.get("corpus_statistics")
    if not isinstance(statistics, Mapping):
        return _missing("corpus_statistics")
    return {key: statistics.get(key) for key in ("n_sentences", "vocab_size", "n_train_sequences",
                                                 "n_heldout_sequences", "n_evaluation_texts", "n_evaluation_tokens",
                                                 "unigram_entropy_nats")}


def _collect_zoo(tables: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    summary = _table(tables, "zoo_summary")
    if summary is None or summary.empty:
        return _missing("zoo_summary")
    margin = (parameters.get("zoo") or {}).get("baseline_margin")
    return {"n_models": len(summary), "models": list(summary["model"]),
            "min_improvement": _f(summary["improvement"].min()), "max_improvement": _f(summary["improvement"].max()),
            "n_beat_margin": int(summary["beats_baseline"].astype(bool).sum()), "margin": _f(margin),
            "steps": {str(m): int(s) for m, s in zip(summary["model"], summary["steps"])}}


def _collect_timing(tables: Mapping[str, Any]) -> dict[str, Any]:
    table = _table(tables, "run_timings")
    if table is None or table.empty:
        return _missing("run_timings")
    totals = pipeline_totals(table)
    pipelines = {str(row["pipeline"]): {"seconds": _f(row["seconds"], 3), "nodes": int(row["nodes"])}
                 for row in totals.to_dict("records") if row["pipeline"] not in (RUN_PIPELINE, TOTAL)}
    total = totals[totals["pipeline"] == TOTAL].iloc[0]
    started = pd.to_datetime(table["started_at"], utc=True)
    nodes = table[table["node"] != START_ROW]
    function = nodes["node"].astype(str).str.rsplit(".", n=1).str[-1]
    nli = nodes["pipeline"] == "nli"
    parts = {"encoder": ["pretrain_encoder"], "copies": ["finetune_copy"],
             "stitching": ["stitch_from_copy", "summarise_stitching"]}
    nli_parts = {part: _f(nodes.loc[nli & function.isin(names), "span_seconds"].sum(), 3)
                 for part, names in parts.items()}
    named = [name for names in parts.values() for name in names]
    nli_parts["rest"] = _f(nodes.loc[nli & ~function.isin(named), "span_seconds"].sum(), 3)
    workers = nodes["worker"].fillna("").astype(str) if "worker" in nodes else pd.Series([], dtype=str)
    return {"date": started.min().strftime("%Y-%m-%d"), "started_at": started.min().isoformat(),
            "workers": int(workers[workers != ""].nunique()), "most_at_once": most_at_once(nodes),
            "total_seconds": _f(total["seconds"], 3), "peak_rss_mb": _f(table["peak_rss_mb"].max(), 1),
            "failed_nodes": int((table["status"] == "failed").sum()), "pipelines": pipelines,
            "nli_parts": nli_parts if nli.any() else None}


# --------------------------------------------------------------------------- CKA


def _pair_row(table: pd.DataFrame, a: str, b: str, first: str = "model_a", second: str = "model_b") -> pd.Series | None:
    rows = table[((table[first] == a) & (table[second] == b)) | ((table[first] == b) & (table[second] == a))]
    return None if rows.empty else rows.iloc[0]


def _collect_cka(tables: Mapping[str, Any], roles: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    distances = _table(tables, "cka_distances")
    if distances is None:
        return _missing("cka_distances")

    def value(first: str, second: str, **extra: Any) -> dict[str, Any] | None:
        row = _pair_row(distances, first, second)
        if row is None:
            return None
        return {**extra, "cka": _f(row["mean_matched_cka"]), "distance": _f(row["arccos_distance"])}

    solu_gelu = [v for p in roles["solu_gelu"] if (v := value(p["solu"], p["gelu"], **p))]
    control = [v for p in roles["control"] if (v := value(p["solu"], p["gelu"], **p))]
    replicas = []
    for group in roles["replicas"]:
        members = group["models"]
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if (v := value(a, b, a=a, b=b, depth=group["depth"], kind=group["kind"])):
                    replicas.append(v)
    family = roles["gpt_neox"]
    in_family = distances[distances["model_a"].isin(family) & distances["model_b"].isin(family)
                          & (distances["model_a"] != distances["model_b"])]
    neox = None
    if len(in_family):
        counts = pd.concat([in_family["model_a"], in_family["model_b"]]).value_counts()
        reference = max(family, key=lambda m: (int(counts.get(m, 0)), roles["n_layers"].get(m) or 0))
        members = [v for m in family if m != reference
                   if (v := value(reference, m, model=m, head_dim=roles["gpt_neox_head_dims"].get(m)))]
        neox = {"reference": reference, "members": sorted(members, key=lambda v: -(v["cka"] or -math.inf)),
                "odd": [m for m in roles["gpt_neox_odd"] if m != reference]}
    return {"n_pairs": int(len(distances)), "n_between_pairs": int((distances["model_a"] != distances["model_b"]).sum()),
            "n_tokens": _span(distances["n_tokens"]) if "n_tokens" in distances else None,
            "exclude_special_tokens": (parameters.get("cka") or {}).get("exclude_special_tokens"),
            "solu_gelu": solu_gelu, "control": control, "replicas": replicas, "neox": neox}


# --------------------------------------------------------------------------- stitching


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
    return {"layers": layers, "penalty": [_f(p) for p in penalties], "excess": [_f(e) for e in excess],
            "penalty_span": _span(penalties), "excess_span": _span(excess),
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
                         "mean_asymmetry": _f(np.mean(asym)) if asym else None}
    return {**pair, "kinds": by_kind}


def _seed_columns(trained: pd.DataFrame) -> dict[str, Any] | None:
    """φ seeds per trained stitch (``n_phi_seeds``) and the largest spread of a stitch's penalty across them
    (``penalty_seed_max − penalty_seed_min``) and standard deviation, when the table has those columns."""
    if "n_phi_seeds" not in trained or trained.empty:
        return None
    spread = (trained["penalty_seed_max"] - trained["penalty_seed_min"]) if {"penalty_seed_max", "penalty_seed_min"} \
        <= set(trained.columns) else pd.Series(dtype=float)
    return {"n": _ints(trained["n_phi_seeds"]), "max_spread": _f(spread.max()) if len(spread) else None,
            "max_std": _f(trained["penalty_seed_std"].max()) if "penalty_seed_std" in trained else None}


def _collect_stitching(tables: Mapping[str, Any], roles: Mapping[str, Any],
                       parameters: Mapping[str, Any]) -> dict[str, Any]:
    penalties = _table(tables, "stitching_penalties")
    if penalties is None:
        return _missing("stitching_penalties")
    if penalties.empty:
        return {"empty": True}
    cells = stitch_cells(penalties)
    order = ["identity", "affine", "affine_ln"]
    kinds = sorted(set(cells["stitch"]), key=lambda k: (order.index(k) if k in order else len(order), k))
    trained_kinds = [k for k in kinds if k != "identity"]
    trained = penalties[penalties["stitch"] != "identity"]
    settings = (parameters.get("stitching") or {})
    phis = _table(tables, "stitching_phis")
    column = lambda table, name: _ints(table[name]) if table is not None and name in table and len(table) else []  # noqa: E731
    grid = settings.get("layers") or ("diagonal" if (cells["layer_f"] == cells["layer_g"]).all() else None)
    self_rows = cells[cells["model_f"] == cells["model_g"]]
    self_trained = {}
    for kind in trained_kinds:
        part = self_rows[self_rows["stitch"] == kind]
        if len(part):
            by_layer = part.groupby("layer_f")["penalty"].mean()
            self_trained[kind] = {"span": _span(part["penalty"]),
                                  "layer0": _span(part.loc[part["layer_f"] == 0, "penalty"]),
                                  "lowest_layer": int(by_layer.idxmin())}
    self_all = self_rows[self_rows["stitch"].isin(trained_kinds)]
    self_identity = self_rows[self_rows["stitch"] == "identity"]

    def identity_span(pairs: Sequence[Mapping[str, Any]]) -> list[float] | None:
        values = []
        for p in pairs:
            for f, g in ((p["solu"], p["gelu"]), (p["gelu"], p["solu"])):
                values += list(cells.loc[(cells["model_f"] == f) & (cells["model_g"] == g)
                                         & (cells["stitch"] == "identity"), "penalty"])
        return _span(values)

    zoo_steps = (tables.get("zoo_summary") if isinstance(tables.get("zoo_summary"), pd.DataFrame) else None)
    self_models = sorted(set(self_rows["model_f"]))
    steps_of_self = (_ints(zoo_steps.loc[zoo_steps["model"].isin(self_models), "steps"])
                     if zoo_steps is not None else [])
    return {
        "grid": grid, "kinds": kinds, "n_stitches": int(len(cells)), "n_trained": int((cells["stitch"] != "identity").sum()),
        "n_rows": int(len(penalties)), "n_ordered_pairs": int(len(cells[["model_f", "model_g"]].drop_duplicates())),
        "steps": column(trained, "steps"), "tokens_per_step": column(trained, "tokens_per_step"),
        "train_tokens": column(trained, "train_tokens"), "eval_tokens": column(penalties, "eval_tokens"),
        "n_eval_sequences": column(phis, "n_eval_sequences"),
        "train_source": sorted(set(penalties["train_source"].dropna().astype(str))) if "train_source" in penalties else [],
        "ci_level": _span(penalties["ci_level"]) if "ci_level" in penalties else None,
        "exclude_special_targets": (sorted({bool(v) for v in penalties["exclude_special_targets"].dropna()})
                                    if "exclude_special_targets" in penalties else None),
        "phi_seeds": int(cells["n_rows"].max()),
        "n_targets": column(penalties, "n_targets"),
        "seed_columns": _seed_columns(trained),
        "solu_gelu": [_stitch_pair(cells, p, kinds) for p in roles["solu_gelu"]],
        "control": [_stitch_pair(cells, p, kinds) for p in roles["control"]],
        "self": {"trained": self_trained, "span": _span(self_all["penalty"]),
                 "n_negative": int((self_all["penalty"] < 0).sum()), "n": int(len(self_all)),
                 "identity_max_abs": _f(self_identity["penalty"].abs().max()) if len(self_identity) else None,
                 "zoo_steps": steps_of_self, "models": self_models},
        "identity_between": identity_span(roles["solu_gelu"]),
        "identity_control": identity_span(roles["control"]),
    }


# --------------------------------------------------------------------------- MLEM


def _collect_mlem(tables: Mapping[str, Any], roles: Mapping[str, Any],
                  untrained: Sequence[str] = ()) -> dict[str, Any]:
    """MLEM of the trained models; the ``untrained`` controls' held-out Spearman beside it."""
    controls = _collect_untrained(tables, untrained)
    tables = without_models(tables, untrained)
    profiles = _table(tables, "mlem_profiles")
    if profiles is None:
        return _missing("mlem_profiles")
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
        return {"feature": feature, "span": _span(part[feature]), "max": _f(part[feature].max())}

    bridges = [m for m in roles["bridges"] if m in models]
    neox = [m for m in roles["gpt_neox"] if m in models]
    groups = {
        "bridges_embeddings": rows_of(bridges, "embeddings"), "bridges_first_block": rows_of(bridges, "first_block"),
        "bridges_blocks": rows_of(bridges, "blocks"),
        "neox_embeddings": rows_of(neox, "embeddings"), "neox_blocks": rows_of(neox, "blocks"),
    }
    mamba = [{"model": m, "layer": last[m], "spearman": _f(spearman[(m, last[m])]),
              "top": str(top[(m, last[m])]), "top_importance": _f(wide.loc[(m, last[m])].max()),
              "dominant_importance": _f(wide.loc[(m, last[m]), dominant]) if dominant in wide else None}
             for m in roles["mamba"] if m in models]
    exceptions = [{"model": m, "layer": int(layer), "top": str(feature)} for (m, layer), feature in top.items()
                  if feature != dominant]
    return {
        "level": sorted(set(overall["level"].astype(str))) if "level" in overall else [],
        "stimuli": sorted(set(overall["stimuli"].astype(str))) if "stimuli" in overall else [],
        "n_stimuli": _span(overall["n_stimuli"]) if "n_stimuli" in overall else None,
        "n_folds": int(folds.max()) + 1 if len(folds) else None,
        "pairs_per_step": _ints(overall["pairs_per_step"]) if "pairs_per_step" in overall else [],
        "n_models": len(models), "n_layers": int(len(spearman)),
        "spearman": _span(spearman),
        "spearman_groups": {name: _span(spearman.loc[keys]) if len(keys) else None for name, keys in groups.items()},
        "mamba": mamba,
        "dominant": dominant, "dominant_top": int((top == dominant).sum()),
        "dominant_span": _span(wide.loc[top[top == dominant].index, dominant]),
        "exceptions": exceptions,
        "runner_up": {"bridges_blocks": runner_up(groups["bridges_blocks"]),
                      "neox_embeddings": runner_up(groups["neox_embeddings"]),
                      "neox_blocks": runner_up(groups["neox_blocks"])},
        "minor": {f: _span(wide[f]) for f in ("number", "tense") if f in wide},
        "minor_span": _span(pd.concat([wide[f] for f in ("number", "tense") if f in wide])
                            if any(f in wide for f in ("number", "tense")) else []),
        "odd_one_out": {method: _odd_one_out(_table(tables, f"mlem_{method}_similarity"))
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
    return {"model": str(model), "layer": int(layer), "mean": _f(means.min()), "min": _f(own.min()),
            "overall_min": _f(other["similarity"].min())}


# --------------------------------------------------------------------------- embedding


def _collect_embedding(tables: Mapping[str, Any], roles: Mapping[str, Any]) -> dict[str, Any]:
    statistics = tables.get("corpus_statistics") if isinstance(tables.get("corpus_statistics"), Mapping) else {}
    return {"keep_k": _guarded(_collect_keep_k, _table(tables, "embedding_keep_k"), roles,
                               statistics.get("vocab_size"), tables),
            "alignment": _guarded(_collect_alignment, _table(tables, "embedding_alignment")),
            "finetune": _guarded(_collect_finetune, _table(tables, "embedding_feature_fractions"),
                                 _table(tables, "embedding_finetune_curves"), _table(tables, "embedding_zero_shot")),
            "zero_shot": _guarded(_collect_zero_shot, _table(tables, "embedding_zero_shot"))}


def _collect_keep_k(keep: pd.DataFrame | None, roles: Mapping[str, Any], vocab: int | None,
                    tables: Mapping[str, Any]) -> dict[str, Any]:
    if keep is None:
        return _missing("embedding_keep_k")
    if keep.empty:
        return {"empty": True}
    one = keep[keep["variant"] == "one_sample"] if "one_sample" in set(keep["variant"]) else keep
    ks = _ints(one["k"])
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
    finetuned = _table(tables, "embedding_feature_fractions")
    models = list(dict.fromkeys(one["model"]))
    reference = (str(finetuned["model"].iloc[0]) if finetuned is not None and len(finetuned)
                 and finetuned["model"].iloc[0] in models else models[0])
    condition = one.groupby("model")["condition_number"].first()
    families = {"bridges": roles["bridges"], "mamba": roles["mamba"], "encoders": roles["encoders"],
                "gpt_neox": roles["gpt_neox"]}
    return {
        "V": size, "n": _ints(one["n"]), "variant": sorted(set(one["variant"].astype(str))), "ks": ks,
        "k_mid": mid, "k_small": small, "V_in_ks": size in ks,
        "pinv_at_V": _span(scores("pinv", size)) if size in ks else None,
        "reference": reference,
        "reference_mid": {d: _f(scores("pinv", mid, [reference], [d]).mean())
                          for d in ("normal", "ff_values") if len(scores("pinv", mid, [reference], [d]))},
        "transpose_peak_k": _span(peaks["k"]) if len(peaks) else None,
        "transpose_peak": _span(peaks["score"]) if len(peaks) else None,
        "transpose_at_V": _span(scores("transpose", size)) if size in ks else None,
        "small_transpose": _span(scores("transpose", small)), "small_pinv": _span(scores("pinv", small)),
        "small_level": small_level, "small_n": small_n, "level_ks": level_ks,
        "condition": {name: _span(condition[condition.index.isin(members)])
                      for name, members in families.items() if condition.index.isin(members).any()},
        "condition_all": _span(condition),
        "neox_ff_mid": _span(scores("pinv", mid, roles["gpt_neox"], ["ff_values"])),
    }


def _collect_alignment(matches: pd.DataFrame | None) -> dict[str, Any]:
    if matches is None:
        return _missing("embedding_alignment")
    between = matches[matches["model_a"] != matches["model_b"]]
    if between.empty:
        return {"empty": True}
    pairs = between[["model_a", "model_b"]].drop_duplicates()
    models = list(dict.fromkeys([*pairs["model_a"], *pairs["model_b"]]))
    by_space = between.groupby("space")["diagonal_fraction"].mean()
    projected = between[between["space"] == "projected"]
    by_group = projected.groupby("group", sort=False)["diagonal_fraction"].mean()
    n_layers = _ints([*between["n_layers_a"], *between["n_layers_b"]])
    return {"models": models, "n_pairs": int(len(pairs)), "n_layers": n_layers,
            "by_space": {str(k): _f(v) for k, v in by_space.items()},
            "by_group": [{"group": str(k), "fraction": _f(v)}
                         for k, v in by_group.sort_values(ascending=False, kind="mergesort").items()],
            "chance": _f(1.0 / n_layers[0]) if len(n_layers) == 1 else None}


def _collect_finetune(fractions: pd.DataFrame | None, curves: pd.DataFrame | None,
                      zero_shot: pd.DataFrame | None) -> dict[str, Any]:
    if fractions is None:
        return _missing("embedding_feature_fractions")
    if fractions.empty:
        return {"empty": True}
    model = str(fractions["model"].iloc[0])
    part = fractions[fractions["model"] == model]
    diff = part[part["source"] == "finetune_diff"].set_index(["group", "layer"])
    random = part[part["source"] == "random_rows"].set_index(["group", "layer"])
    cells = []
    for key, row in diff.iterrows():
        if key in random.index:
            cells.append({"group": str(key[0]), "layer": int(key[1]), "finetune": _f(row["feature_fraction"]),
                          "random": _f(random.loc[key, "feature_fraction"])})
    above = [c for c in cells if c["finetune"] - c["random"] >= FRACTION_MARGIN]
    classifier = part[part["source"] == "classifier"]
    own = chance = None
    if zero_shot is not None and len(zero_shot):
        mine = zero_shot[zero_shot["model_a"] == model]
        if len(mine):
            own, chance = _f(mine["own_accuracy"].iloc[0]), _f(mine["chance"].iloc[0])
    steps = None
    if curves is not None and len(curves) and "step" in curves:
        steps = int(curves.loc[curves["model"] == model, "step"].max()) if "model" in curves else int(curves["step"].max())
    return {"model": model, "task": str(part["task"].iloc[0]), "top_layers": _ints(diff.reset_index()["layer"]),
            "k": _ints(part["k"]), "steps": steps, "accuracy": own, "chance": chance, "n_cells": len(cells),
            "above": sorted(above, key=lambda c: c["random"] - c["finetune"]),
            "classifier": ({"fraction": _f(classifier["feature_fraction"].mean()),
                            "chance": _f(classifier["chance_fraction"].mean())} if len(classifier) else None)}


def _collect_zero_shot(zero_shot: pd.DataFrame | None) -> dict[str, Any]:
    if zero_shot is None:
        return _missing("embedding_zero_shot")
    others = zero_shot[zero_shot["model_a"] != zero_shot["model_b"]]
    if others.empty:
        return {"empty": True}
    model = str(others["model_a"].iloc[0])
    others = others[others["model_a"] == model]
    embeddings = others[others["layers_from_b"] == 0]
    blocks = others[others["layers_from_b"] >= 1]
    chance = float(others["chance"].iloc[0])
    return {"model": model, "own": _f(others["own_accuracy"].iloc[0]), "chance": _f(chance),
            "embeddings_only": [{"model": str(r.model_b), "accuracy": _f(r.accuracy)} for r in embeddings.itertuples()],
            "blocks": _span(blocks["accuracy"]), "n_blocks": int(len(blocks)),
            "blocks_below_chance": int((blocks["accuracy"] < chance).sum())}


# --------------------------------------------------------------------------- NLI


def _collect_nli(tables: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    groups, accuracy = _table(tables, "models.nli.groups"), _table(tables, "models.nli.accuracy")
    if groups is None or accuracy is None:
        return _missing(*[n for n in ("models.nli.groups", "models.nli.accuracy") if _table(tables, n) is None])
    from thinkalike.nli.analysis import BASELINE, GENERALIZING, HEURISTIC, accuracy_summary

    nli = parameters.get("nli") or {}
    result: dict[str, Any] = {}
    pairs = _table(tables, "models.nli.pairs")
    pair_settings = nli.get("pairs") or {}
    if pairs is not None:
        sizes = pairs.groupby("split").size()
        ood = pairs[pairs["split"] == "ood"].groupby(["subcase", "label"]).size()
        result["pairs"] = {"train": int(sizes.get("train", 0)), "test": int(sizes.get("test", 0)),
                           "ood_subcases": int(pairs.loc[pairs["split"] == "ood", "subcase"].nunique()),
                           "ood_per_subcase_label": _ints(ood.values)}
    result["counterexample_fraction"] = _f(pair_settings.get("counterexample_fraction"))
    result["counterexample_subcases"] = list(pair_settings.get("counterexample_subcases") or [])
    encoder = tables.get("models.nli.encoder.model_config")
    arch = (encoder.get("bridge_config") or encoder.get("architecture") or {}) if isinstance(encoder, Mapping) else {}
    result["encoder_layers"] = arch.get("n_layers") or ((nli.get("encoder") or {}).get("architecture") or {}).get("n_layers")
    curves = _table(tables, "models.nli.training_curves")
    if curves is not None and "stage" in curves:
        tuned = curves[curves["stage"] == "fine-tuning"]
        result["finetune_steps"] = _ints(tuned.groupby("model")["step"].max()) if len(tuned) else []
    copies = groups
    baseline = accuracy_summary(accuracy[accuracy["model"] == BASELINE])
    base = baseline.iloc[0] if len(baseline) else None
    result["n_copies"] = int(len(copies))
    result["test"] = _span(copies["test_accuracy"])
    result["ood_non_entailed"] = _span(copies["ood_non_entailed_accuracy"])
    result["mostly_heuristic"] = bool((copies["ood_non_entailed_accuracy"] < HEURISTIC_BELOW).all())
    result["n_heuristic"] = int((copies["ood_non_entailed_accuracy"] < HEURISTIC_BELOW).sum())
    result["baseline"] = (None if base is None else
                          {"test": _f(base["test_accuracy"]), "ood_non_entailed": _f(base["ood_non_entailed_accuracy"]),
                           "ood_entailed": _f(base["ood_entailed_accuracy"])})
    ood = accuracy[(accuracy["split"] == "ood") & (accuracy["model"].isin(copies["model"]))]
    subcases = ood[(ood["subcase"] != "all") & (ood["label"] == "non_entailed")]
    by_subcase = subcases.groupby("subcase")["accuracy"]
    means = by_subcase.mean().sort_values(ascending=False, kind="mergesort")
    result["subcases"] = {str(s): {"span": _span(by_subcase.get_group(s)), "mean": _f(m)} for s, m in means.items()}
    result["highest_subcase"] = str(means.index[0]) if len(means) else None
    result["lowest_subcase"] = str(means.index[-1]) if len(means) else None
    overall = ood[ood["subcase"] == "all"].pivot_table(index="model", columns="label", values=["accuracy", "n_pairs"],
                                                        aggfunc="first")
    if {"entailed", "non_entailed"} <= set(overall["accuracy"].columns):
        said = ((overall["accuracy"]["entailed"] * overall["n_pairs"]["entailed"]
                 + (1 - overall["accuracy"]["non_entailed"]) * overall["n_pairs"]["non_entailed"])
                / (overall["n_pairs"]["entailed"] + overall["n_pairs"]["non_entailed"]))
        result["ood_said_entailed"] = _span(said)
    gen = copies[copies["group"] == GENERALIZING]["ood_non_entailed_accuracy"]
    heur = copies[copies["group"] == HEURISTIC]["ood_non_entailed_accuracy"]
    result["groups"] = {"k": int(len(gen)), "generalizing": _span(gen), "heuristic": _span(heur)}
    result["stitching"] = _guarded(_collect_nli_stitching, _table(tables, "models.nli.stitching_groups"),
                                   _table(tables, "models.nli.stitching"))
    result["cka"] = _guarded(_collect_nli_cka, _table(tables, "models.nli.cka_group_curves"))
    result["sweep"] = _guarded(_collect_sweep, _table(tables, "models.nli.sweep"))
    return result


def _collect_nli_stitching(by_group: pd.DataFrame | None, stitches: pd.DataFrame | None) -> dict[str, Any]:
    if by_group is None:
        return _missing("models.nli.stitching_groups")
    from thinkalike.nli.analysis import RELATIONS
    from thinkalike.reports.nli import stitching_divergence

    test = by_group[by_group["data"] == "test"]
    if test.empty or not set(RELATIONS) <= set(test["relation"]):
        return {"empty": True}
    layers = _ints(test["layer"])
    curves = {relation: [_f(test.loc[(test["relation"] == relation) & (test["layer"] == layer), "mean_penalty"].mean())
                         for layer in layers] for relation in RELATIONS}
    increasing = [r for r, values in curves.items() if all(b >= a for a, b in zip(values, values[1:]))]
    means = {r: float(np.nanmean([v for v in values if v is not None])) for r, values in curves.items()}
    strict, means_only = stitching_divergence(by_group, "test")
    ood = by_group[by_group["data"] == "ood"]
    ood_strict, ood_means_only = stitching_divergence(by_group, "ood") if len(ood) else ([], [])
    n_ordered = (int(len(stitches[["model_f", "model_g"]].drop_duplicates()))
                 if stitches is not None and len(stitches) else None)
    return {"layers": layers, "curves": curves, "increasing": increasing,
            "most_interchangeable": min(means, key=means.get), "diverge": strict, "diverge_means_only": means_only,
            "ood_span": _span(ood["mean_penalty"]) if len(ood) else None,
            "ood_diverge": ood_strict, "ood_diverge_means_only": ood_means_only, "n_ordered_pairs": n_ordered}


def _collect_nli_cka(curves: pd.DataFrame | None) -> dict[str, Any]:
    if curves is None:
        return _missing("models.nli.cka_group_curves")
    from thinkalike.reports.nli import cka_divergence

    deep = curves[curves["relative_depth"] > 0]
    if deep.empty:
        return {"empty": True}
    between = deep[deep["group_a"] != deep["group_b"]]
    within = deep[(deep["group_a"] == deep["group_b"]) & (deep["group_a"] != "middle")]
    strict, means_only = cka_divergence(curves)
    return {"depths": _span(deep["relative_depth"]), "between": _span(between["mean"]),
            "within": _span(within["mean"]), "diverge": strict, "diverge_means_only": means_only}


def _collect_sweep(sweep: pd.DataFrame | None) -> dict[str, Any]:
    if sweep is None:
        return _missing("models.nli.sweep")
    if sweep.empty:
        return {"empty": True}
    status = str(sweep["status"].iloc[0])
    if status != "swept":
        return {"status": status, "note": str(sweep["note"].iloc[0])}
    by_fraction = sweep.groupby("counterexample_fraction")["ood_non_entailed_accuracy"]
    return {"status": status, "fractions": [{"fraction": _f(fraction), "span": _span(values)}
                                            for fraction, values in by_fraction]}


# =========================================================================== render


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.{digits}f}"
    if text.startswith("-"):
        text = text[1:] if float(text) == 0 else MINUS + text[1:]
    return text


def _signed(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    text = f"{value:+.{digits}f}"
    if float(text) == 0:
        return text[1:]
    return text.replace("-", MINUS)


def _range(span: Sequence[float] | None, digits: int = 2, signed: bool = False) -> str:
    """``0.80–0.83``; ``−0.013 to +0.022`` (signed, or when a bound is negative); one number when equal."""
    if not span:
        return "n/a"
    low, high = span
    signed = signed or (low is not None and _num(low, digits).startswith(MINUS))
    show = (lambda v: _signed(v, digits)) if signed else (lambda v: _num(v, digits))
    a, b = show(low), show(high)
    if a == b:
        return a
    return f"{a} to {b}" if signed else f"{a}–{b}"


def _int(value: Any) -> str:
    return "n/a" if value is None else f"{int(value):,}"


def _ints_text(values: Sequence[int] | None) -> str:
    if not values:
        return "n/a"
    return _list([_int(v) for v in values], "or")


def _list(items: Sequence[str], last: str = "and") -> str:
    items = list(items)
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def _code(name: str) -> str:
    return f"`{name}`"


def missing_tables(findings: Any) -> list[str]:
    """The tables a findings dict says were missing, in any section (sorted, once each)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            found.update(value.get("missing") or [])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(findings)
    return sorted(found)


def _not_run(what: str, section: Mapping[str, Any]) -> str | None:
    if "error" in section:
        return f"{what}: its tables could not be read ({section['error']})."
    if "missing" in section:
        names = ", ".join(_code(n) for n in section["missing"])
        return f"{what}: not in these outputs (no {names}: the pipeline was not run)."
    if section.get("empty"):
        return f"{what}: the pipeline ran but compared nothing (its table is empty)."
    return None


def render_findings(findings: Mapping[str, Any]) -> str:
    """The README region's markdown (module docstring): the timing paragraph, then the findings paragraphs, each
    wrapped at :data:`WIDTH` columns like the rest of the README (:func:`wrap`)."""
    paragraphs = [_render_timing(findings), _render_cka(findings), _render_stitching(findings),
                  _render_mlem(findings), _render_embedding(findings), _render_nli(findings),
                  _render_scaling(findings), _render_measures(findings)]
    guide = _render_measure_guide(findings)
    if guide:
        paragraphs.append(guide)
    note = ("<!-- Generated by `python -m thinkalike.reports.findings_cli --write` from the default run's outputs "
            "(numbers in docs/findings.json); do not edit by hand. -->")
    return "\n\n".join([note, *(wrap(p) for p in paragraphs)]) + "\n"


WIDTH = 100
#: A word that must not start a wrapped line: markdown would read it as a list item, heading, quote, HTML,
#: code fence, table row or setext underline and break the paragraph.
_LINE_START = re.compile(r"^(?:[-+*]|#{1,6}|>.*|\d{1,9}[.)]|=+|-+|`{3,}.*|~{3,}.*|<.*|\|.*)$")


def wrap(paragraph: str, width: int = WIDTH) -> str:
    """``paragraph`` on lines of at most ``width`` columns where possible (words are never split), no line starting
    with a word that markdown would read as a block marker (such a word stays on the line before)."""
    words = paragraph.split(" ")
    glued: list[str] = []
    for word in words:
        if glued and (not word or _LINE_START.match(word)):
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


# --------------------------------------------------------------------------- timing


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else format_seconds(float(value))


def _zoo_composition(findings: Mapping[str, Any]) -> str:
    roles = findings["roles"]
    parts = []
    depths = sorted({p["depth"] for p in roles["solu_gelu"]})
    if depths:
        parts.append(f"SoLU and GeLU bridges at {_list([str(d) for d in depths])} layers with different seeds")
    if roles["control"]:
        parts.append("a SoLU with GeLU's seed as a control" if len(roles["control"]) == 1
                     else f"{len(roles['control'])} SoLUs with GeLU's seed as controls")
    replicas = [g for g in roles["replicas"] if g["kind"] in ("gelu", "solu")]
    if replicas:
        parts.append(_list([f"{len(g['models'])} {g['depth']}-layer" for g in replicas])
                     + " GeLU seed replicas" if all(g["kind"] == "gelu" for g in replicas)
                     else _list([f"{len(g['models'])} {g['depth']}-layer {g['kind']}" for g in replicas])
                     + " seed replicas")
    if roles["gpt_neox"]:
        text = (f"a GPT-NeoX family of {len(roles['gpt_neox'])} sizes" if len(roles["gpt_neox"]) > 1
                else f"a GPT-NeoX model ({_code(roles['gpt_neox'][0])})")
        if roles["gpt_neox_odd"]:
            text += " of which " + _list([f"{_code(m)} has head dimension {roles['gpt_neox_head_dims'][m]}"
                                          for m in roles["gpt_neox_odd"]])
        twins = roles.get("gpt_neox_twins") or {}
        if twins:
            text += " (" + _list([f"and {_code(twin)}, its twin of head dimension {roles['gpt_neox_head_dims'][twin]}"
                                  for twin in twins.values()]) + ")"
        parts.append(text)
    if roles["encoders"]:
        parts.append("a BERT-style masked-LM encoder" if len(roles["encoders"]) == 1
                     else f"{len(roles['encoders'])} masked-LM encoders")
    if roles["mamba"]:
        parts.append("a Mamba" if len(roles["mamba"]) == 1 else f"{len(roles['mamba'])} Mambas")
    if roles["others"]:
        parts.append(_list([_code(m) for m in roles["others"]]))
    return _list(parts)


def _render_timing(findings: Mapping[str, Any]) -> str:
    timing, zoo, machine = findings["timing"], findings["zoo"], findings["machine"]
    head = (f"The default run (measured on {machine['cpu_count']} CPU cores, {machine['system']} "
            f"{machine['architecture']}")
    workers = findings["timing"].get("workers") or 0
    if workers > 1:
        at_once = findings["timing"].get("most_at_once")
        busy = f", at most {at_once} at work at once" if at_once and at_once < workers else ""
        head += (f"; `--runner thinkalike.runners.DaskRunner`, {workers} worker processes{busy}: a pipeline's time is "
                 "its nodes' work summed over the workers, the run's is its wall-clock time")
    head += ")"
    if "missing" in timing:
        return head + ": no `run_timings` table in these outputs, so no timings."
    if "error" in timing:
        return head + f": its `run_timings` table could not be read ({timing['error']})."
    pipelines = timing["pipelines"]
    stitching, cka, mlem, nli = findings["stitching"], findings["cka"], findings["mlem"], findings["nli"]
    # each pipeline: (what it did, before its time; details after its time)
    described: dict[str, tuple[str, str]] = {
        "zoo": ((f"zoo of {_plural(zoo['n_models'], 'model')}", f" ({_zoo_composition(findings)}), "
                 + _zoo_margin(zoo)) if "n_models" in zoo else ("zoo", "")),
        "stitching": ((f"stitching ({_int(stitching['n_stitches'])} stitches, {_int(stitching['n_trained'])} of them "
                       f"trained on {_ints_text(stitching['train_tokens'])} tokens)", "")
                      if "n_stitches" in stitching else ("stitching", "")),
        "cka": (f"CKA of {_plural(cka['n_pairs'], 'pair')}" if "n_pairs" in cka else "CKA", ""),
        "mlem": ((f"MLEM of {_plural(mlem['n_models'], 'model')}{_controls(mlem)} "
                  f"({mlem['n_layers'] + sum(c['n_layers'] for c in mlem.get('untrained') or [])} layers in all)", "")
                 if "n_models" in mlem else ("MLEM", "")),
        "embedding": ("embedding space (readings, keep-k, alignment, fine-tuning, zero-shot stitching)", ""),
        "nli": ("the NLI experiment", ""),
    }
    items = []
    for name in [*PIPELINE_ORDER, *sorted(set(pipelines) - set(PIPELINE_ORDER))]:
        if name not in pipelines:
            continue
        before, after = described.get(name, (name, ""))
        parts = timing.get("nli_parts")
        if name == "nli" and parts:
            copies = nli.get("n_copies")
            ordered = (nli.get("stitching") or {}).get("n_ordered_pairs")
            after = (f" (encoder {_seconds(parts['encoder'])}, "
                     f"{_plural(copies, 'copy', 'copies') if copies is not None else 'copies'} "
                     f"{_seconds(parts['copies'])}, identity stitching"
                     f"{f' of {ordered} ordered pairs' if ordered else ''} {_seconds(parts['stitching'])}, pairs, "
                     f"accuracy, CKA, sweep and report {_seconds(parts['rest'])})")
        items.append(f"{before} {_seconds(pipelines[name]['seconds'])}{after}")
    missing = [name for name in PIPELINE_ORDER if name not in pipelines]
    total = timing["total_seconds"]
    budget = findings["budget_seconds"]
    verdict = (f"within its {budget // 60}-minute budget" if total is not None and total <= budget
               else f"over its {budget // 60}-minute budget")
    text = (f"{head}: " + "; ".join(items) + f" — {_seconds(total)} in all (measured {timing['date']}, "
            f"{_num((timing['peak_rss_mb'] or 0) / 1024, 1)} GB peak memory): {verdict}")
    if missing:
        text += f". Not timed in this run: {_list(missing)}"
    if timing["failed_nodes"]:
        text += f". {_plural(timing['failed_nodes'], 'node')} failed"
    return text + ". `python benchmarks/default_run.py` repeats the run idle and beside a busy process."


def _plural(n: int | None, one: str, many: str | None = None) -> str:
    if n is None:
        return f"n/a {many or one + 's'}"
    return f"{_int(n)} {one if n == 1 else (many or one + 's')}"


def _zoo_margin(zoo: Mapping[str, Any]) -> str:
    if zoo["n_beat_margin"] == zoo["n_models"]:
        return (f"every model at least {math.floor(zoo['min_improvement'] * 100)} % below the corpus unigram entropy "
                "on held-out text")
    return (f"{zoo['n_beat_margin']} of {zoo['n_models']} models at least {_num(zoo['margin'] * 100, 0)} % below "
            f"the corpus unigram entropy on held-out text (the least {_num(zoo['min_improvement'] * 100, 0)} %)")


# --------------------------------------------------------------------------- CKA


def _render_cka(findings: Mapping[str, Any]) -> str:
    cka = findings["cka"]
    intro = "What the default run finds"
    if (message := _not_run("CKA", cka)):
        return f"{intro}. {message}"
    special = "special tokens excluded, " if cka.get("exclude_special_tokens") else ""
    sentences = []
    sg, replicas, control = cka["solu_gelu"], cka["replicas"], cka["control"]
    if sg:
        by_depth = _list([f"{_num(p['distance'])} at {p['depth']} layers" for p in sg])
        text = (f"SoLU vs GeLU at equal depth have matched-layer CKA {_range(_span(p['cka'] for p in sg))} "
                f"(arccos distance {by_depth})")
        if replicas:
            rep = _span(p["cka"] for p in replicas)
            sg_span = _span(p["cka"] for p in sg)
            relation = ("less than" if sg_span[1] < rep[0] else "more than" if sg_span[0] > rep[1]
                        else "overlapping with the CKA")
            text += (f", {relation} between GeLU seed replicas ({_range(rep)}, distance "
                     f"{_range(_span(p['distance'] for p in replicas))})")
        sentences.append(text)
    else:
        sentences.append("no SoLU/GeLU pair at equal depth with different seeds was compared")
    if control:
        c = control[0]
        text = (f"the same-seed control (a SoLU that shares GeLU's initial weights) gives {_num(c['cka'])} "
                f"(distance {_num(c['distance'])})")
        same_depth = [p for p in sg if p["depth"] == c["depth"]] or sg
        reps = [p for p in replicas if p["depth"] == c["depth"]] or replicas
        if same_depth and reps:
            base = float(np.mean([p["cka"] for p in same_depth]))
            gain = c["cka"] - base
            loss = float(np.mean([p["cka"] for p in reps])) - base
            if loss > 0:
                comparison = ("more than" if gain > loss else "less than") + \
                    f" the {_num(loss)} the activation function takes away (seed replicas against SoLU/GeLU)"
            else:
                comparison = "while the activation function takes nothing away (SoLU/GeLU are not below the replicas)"
            text += (f", so a shared initialisation alone {'raises' if gain >= 0 else 'lowers'} CKA by "
                     f"{_num(abs(gain))}, {comparison}")
        sentences.append(text)
    neox = cka["neox"]
    if neox and neox["members"]:
        members = neox["members"]
        odd = set(neox["odd"])

        def name(m: Mapping[str, Any]) -> str:
            return (f"the odd-head-size {_code(m['model'])}" if m["model"] in odd else _code(m["model"]))

        if len(members) == 1:
            family = (f"In the GPT-NeoX family, {name(members[0])} against {_code(neox['reference'])}: "
                      f"{_num(members[0]['cka'])} (distance {_num(members[0]['distance'])})")
        else:
            middle = "".join(f", then {name(m)} ({_num(m['cka'])})" for m in members[1:-1])
            family = (f"In the GPT-NeoX family against {_code(neox['reference'])}, {name(members[0])} is closest "
                      f"({_num(members[0]['cka'])}){middle}, and {name(members[-1])} furthest "
                      f"({_num(members[-1]['cka'])}, distance {_num(members[-1]['distance'])})")
    else:
        family = "No GPT-NeoX family pairs were compared"
    return (f"{intro} ({special}{_tokens(cka['n_tokens'])} tokens). CKA: " + "; ".join(sentences) + ". "
            + family + ".")


def _tokens(span: Sequence[float] | None) -> str:
    if not span:
        return "n/a"
    low, high = int(span[0]), int(span[1])
    return _int(low) if low == high else f"{_int(low)}–{_int(high)}"


# --------------------------------------------------------------------------- stitching


def _direction_text(label: str, side: Mapping[str, Any], target: str) -> str:
    floor = []
    if side["above_floor"]:
        floor.append(f"above {target}'s floor at {side['above_floor']}")
    if side["below_floor"]:
        floor.append(f"below it at {side['below_floor']}" if side["above_floor"]
                     else f"below {target}'s floor at {side['below_floor']}")
    where = ((_list(floor) + f" of {side['n']} layers") if floor
             else f"overlapping {target}'s floor at all {side['n']} layers")
    return (f"{label} {_range(side['penalty_span'], 3, signed=True)} ({_range(side['excess_span'], 3, signed=True)} "
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


def _render_stitching(findings: Mapping[str, Any]) -> str:
    st = findings["stitching"]
    if (message := _not_run("Stitching", st)):
        return message
    trained = [k for k in st["kinds"] if k != "identity"]
    level = f"{_num(st['ci_level'][0] * 100, 0)} %" if st.get("ci_level") else "n/a"
    source = {"train_sequences": "the corpus's training sequences", "heldout": "held-out sequences"}
    sources = _list([source.get(s, s) for s in st["train_source"]]) or "n/a"
    seeds = f", {st['phi_seeds']} φ seeds each (averaged)" if st["phi_seeds"] > 1 else ""
    seed_columns = st.get("seed_columns")
    if seed_columns and seed_columns["n"] and max(seed_columns["n"]) > 1:
        seeds = (f", {_ints_text(seed_columns['n'])} φ seeds per stitch (penalties are the first seed's; across seeds "
                 f"a penalty varies by up to {_num(seed_columns['max_spread'], 3)})")
    targets = ""
    if st.get("n_targets"):
        excluded = st.get("exclude_special_targets") == [True]
        targets = (f" ({_ints_text(st['n_targets'])} scored targets"
                   + (", special tokens excluded" if excluded else "") + ")")
    per_step = f" of {_ints_text(st['tokens_per_step'])} tokens" if st.get("tokens_per_step") else ""
    head = (f"Stitching ({st['grid'] or 'mixed'} layers; φ trained for {_ints_text(st['steps'])} SGD steps{per_step} on "
            f"{sources}, {_ints_text(st['train_tokens'])} tokens{seeds}, and evaluated on "
            f"{_ints_text(st['n_eval_sequences'])} held-out sequences, {_ints_text(st['eval_tokens'])} tokens{targets}; "
            f"penalties in nats/token with {level} bootstrap intervals, each set against its floor: the target "
            "model stitched into itself at the same layer with the same φ kind).")
    sentences = [head]
    sg = [p for p in st["solu_gelu"] if p["kinds"]]
    if sg:
        asym, rev, n = _asymmetry(sg, trained)
        depths = sorted({p["depth"] for p in sg})
        if n and asym == n:
            scope = "at every layer" + (", with both φ kinds" if len(trained) == 2 else ", with every φ kind"
                                        if len(trained) > 2 else "") + (f" and at both depths" if len(depths) == 2
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
        steps = f" ({_ints_text(own['zoo_steps'])} training steps)" if own["zoo_steps"] else ""
        text = f"Self-stitching floors are {_range(own['span'], 3, signed=True)}"
        if own["n_negative"] * 2 > own["n"]:
            text += (f": with {_ints_text(st['train_tokens'])} training tokens a trained φ on an under-trained "
                     f"model{steps} acts as a little extra training")
            if lowest_at_0 and embeddings:
                text += (", most at the embeddings (layer 0: "
                         f"{_range([min(e[0] for e in embeddings), max(e[1] for e in embeddings)], 3, signed=True)})")
            text += ", so penalties down to the floor are not a gain from the other model"
        sentences.append(text + ".")
    identity = []
    if own["identity_max_abs"] is not None:
        identity.append("Identity stitching costs " + ("exactly 0" if own["identity_max_abs"] == 0 else
                                                       f"at most {_num(own['identity_max_abs'], 3)}")
                        + " for a model with itself")
    if st["identity_between"]:
        identity.append(f"{_range(st['identity_between'], 2)} between SoLU and GeLU with different seeds")
    if st["identity_control"]:
        text = f"{_range(st['identity_control'], 2)} for the same-seed control"
        if st["identity_between"] and st["identity_control"][1] < st["identity_between"][0]:
            text += (": identity stitching between two separately trained models measures mostly their "
                     "initialisation")
        identity.append(text)
    if identity:
        sentences.append(_list(identity[:1] + [", ".join(identity[1:])] if len(identity) > 1 else identity,
                               "and").replace(" and ", " and ", 1) + ".")
    sentences.append("(`stitching.train_source: heldout`, φ trained on the held-out sequences left after the "
                     "evaluation split, is not part of the default run; conf/base/parameters_stitching.yml notes "
                     "what it gave.)")
    return " ".join(sentences)


def _merged_direction(label: str, sides: Sequence[Mapping[str, Any]], key: str, target: str) -> str:
    parts = [s[key] for s in sides]
    merged = {"penalty_span": _span(v for p in parts for v in (p["penalty_span"] or [])),
              "excess_span": _span(v for p in parts for v in (p["excess_span"] or [])),
              "above_floor": sum(p["above_floor"] for p in parts), "below_floor": sum(p["below_floor"] for p in parts),
              "n": sum(p["n"] for p in parts)}
    return _direction_text(label, merged, target)


# --------------------------------------------------------------------------- MLEM


def _distribution_order(name: str) -> tuple[int, str]:
    order = list(DISTRIBUTION_LABELS)
    return (order.index(name) if name in order else len(order), name)


def _feature(name: str) -> str:
    return FEATURE_LABELS.get(name, _code(name))


def _render_mlem(findings: Mapping[str, Any]) -> str:
    mlem = findings["mlem"]
    if (message := _not_run("MLEM", mlem)):
        return message
    paper = findings["literature"]["mlem_spearman"]
    stimuli = {"corpus": "of the evaluation sentences", "controlled": "of the controlled stimuli"}
    words = ("words" if mlem["level"] == ["word"] else "sentences" if mlem["level"] == ["sentence"]
             else "stimuli")
    n_stimuli = _tokens(mlem["n_stimuli"]) if mlem["n_stimuli"] else "n/a"
    head = (f"MLEM ({_list(mlem['level'])} level: {n_stimuli} {words} "
            f"{_list([stimuli.get(s, s) for s in mlem['stimuli']])}, {mlem['n_folds']} folds, "
            f"{_ints_text(mlem['pairs_per_step'])} pairs per step; held-out Spearman of each layer, layer 0 = "
            f"embeddings): {_range(mlem['spearman'])} over the {mlem['n_models']} models — "
            + (f"below the > {_num(paper, 1)} the paper reports on BERT, GPT-2 and Mamba" if mlem["spearman"][1] < paper
               else f"reaching the > {_num(paper, 1)} the paper reports on BERT, GPT-2 and Mamba only at its top")
            + ".")
    groups = mlem["spearman_groups"]
    details = []
    if groups.get("bridges_embeddings") and groups.get("bridges_first_block"):
        low, high = groups["bridges_embeddings"], groups["bridges_first_block"]
        verb = "rise" if sum(high) > sum(low) else "fall"
        details.append(f"GeLU/SoLU bridges {verb} from {_range(low)} at the embeddings to {_range(high)} after the "
                       "first block")
    if groups.get("neox_embeddings") and groups.get("neox_blocks"):
        emb, blocks = groups["neox_embeddings"], groups["neox_blocks"]
        if emb[0] > blocks[1] or (sum(emb) > sum(blocks) and emb[1] > blocks[1]):
            details.append(f"the GPT-NeoX family is highest at the embeddings ({_range(emb)}) and lower after "
                           f"({_range(blocks)})")
        else:
            details.append(f"the GPT-NeoX family gives {_range(emb)} at the embeddings and {_range(blocks)} after")
    for m in mlem["mamba"]:
        details.append(f"{_code(m['model'])} reaches {_num(m['spearman'])} at its last layer")
    text = head + (" " + _capital(_list(details)) + "." if details else "")
    n = mlem["n_layers"]
    dominant = _feature(mlem["dominant"])
    share = ("every layer" if mlem["dominant_top"] == n else f"{mlem['dominant_top']} of {n} layers")
    runner = []
    labels = {"bridges_blocks": "in the GeLU/SoLU bridges after the embeddings",
              "neox_embeddings": "at GPT-NeoX's embeddings", "neox_blocks": "in GPT-NeoX's blocks"}
    for key, where in labels.items():
        r = mlem["runner_up"].get(key)
        if r:
            runner.append(f"{_feature(r['feature'])} {where} ({_range(r['span'])})")
    text += (f" {_capital(dominant)} has the largest permutation importance at {share} of the {mlem['n_models']} "
             f"models ({_range(mlem['dominant_span'])} there)")
    if runner:
        text += "; the runner-up is " + _list(runner)
    text += "."
    odd = mlem["odd_one_out"]
    for m in mlem["mamba"]:
        if m["top"] != mlem["dominant"]:
            text += (f" {_code(m['model'])}'s last layer switches to {_feature(m['top'])} ({_num(m['top_importance'])}, "
                     f"{dominant} {_num(m['dominant_importance'])})")
        else:
            text += f" {_code(m['model'])}'s last layer keeps {dominant} on top"
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
                who = "it is" if is_it else f"{_code(o['model'])} layer {o['layer']} is"
                measure = "weighted τ" if label.startswith("feature") else "Spearman ρ"
                said.append(f"{who} the odd one out of the {label} ({measure} {_signed(o['mean'], 2)} on average "
                            f"with other models' layers, down to {_signed(o['min'], 2)})")
            text += "; " + "; ".join(said)
        text += "."
    if mlem["minor_span"]:
        minor = [f for f in ("number", "tense") if f in mlem["minor"]]
        names = _list([_capital(_feature(f)) if i == 0 else _feature(f) for i, f in enumerate(minor)])
        text += f" {names} explain {_range(mlem['minor_span'], 2, signed=True)}."
    controls = [c for c in mlem.get("untrained") or [] if c.get("spearman")]
    if controls:
        text += (" Untrained control" + ("s" if len(controls) > 1 else "") + " (a zoo model's initialisation, left "
                 "out above): " + _list([f"{_code(c['model'])} {_range(c['spearman'])}" for c in controls]) + ".")
    return text


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:] if text and not text.startswith("`") else text


# --------------------------------------------------------------------------- embedding


def _render_embedding(findings: Mapping[str, Any]) -> str:
    emb = findings["embedding"]
    keep, alignment, finetune, zero = emb["keep_k"], emb["alignment"], emb["finetune"], emb["zero_shot"]
    lit = findings["literature"]
    sentences = []
    if (message := _not_run("keep-k", keep)):
        head = "Embedding space."
        sentences.append(message)
    else:
        V = keep["V"]
        head = f"Embedding space (V = {_int(V)})."
        n = _ints_text(keep["n"])
        clauses = []
        if keep["pinv_at_V"]:
            clause = f"with E′ = E⁺ the score reaches {_range(keep['pinv_at_V'])} at k = V"
            if keep["reference_mid"]:
                values = _list([f"{_num(keep['reference_mid'][d])} for {DISTRIBUTION_LABELS.get(d, d)}"
                                for d in sorted(keep["reference_mid"], key=_distribution_order)])
                clause += f" ({values} at k = {keep['k_mid']} on {keep['reference']})"
            clauses.append(clause)
        if keep["transpose_peak_k"]:
            clause = (f"with E′ = Eᵀ it peaks at k = {_range(keep['transpose_peak_k'], 0)} "
                      f"({_range(keep['transpose_peak'])})")
            if keep["transpose_at_V"]:
                clause += f" and ends at {_range(keep['transpose_at_V'])} at k = V"
            clauses.append(clause)
        text = f"keep-k (appendix A protocol, one sample of {n}, k = {_list([str(k) for k in keep['ks']])}): " + \
            ", ".join(clauses)
        small = keep["k_small"]
        share = f"{_num(100 * small / V, 1)} % of V"
        if keep["level_ks"]:
            where = ("only at k = " if len(keep["level_ks"]) < len(keep["ks"]) else "at every k: ") + \
                _list([str(k) for k in keep["level_ks"]])
            text += f"{'; ' if clauses else ''}{where} is Eᵀ level with or ahead of E⁺ for every model and distribution"
        else:
            text += f"{'; ' if clauses else ''}at no k is Eᵀ level with or ahead of E⁺ for every model and distribution"
        paper_share = f"{_num(100 * lit['keep_k_k'] / lit['keep_k_vocabulary'], 1)} %"
        text += (f" (at k = {small}, {share}, Eᵀ vs E⁺ give {_range(keep['small_transpose'])} vs "
                 f"{_range(keep['small_pinv'])}, level or ahead in {keep['small_level']} of {keep['small_n']} cases; "
                 f"the paper, at k ≈ {_int(lit['keep_k_k'])} ({paper_share} of GPT-2's {_int(lit['keep_k_vocabulary'])}), "
                 f"reports {_num(lit['keep_k_transpose'])} vs {_num(lit['keep_k_pinv'])}).")
        names = {"bridges": "the bridges", "mamba": "Mamba", "encoders": "the encoder", "gpt_neox": "GPT-NeoX"}
        conditions = _list([f"{_range(keep['condition'][key], 1)} for {name}" for key, name in names.items()
                            if key in keep["condition"]])
        if conditions:
            text += f" E's condition number is {conditions}"
            if keep["neox_ff_mid"]:
                text += f"; GPT-NeoX's FF values reach {_range(keep['neox_ff_mid'])} at k = {keep['k_mid']} (E⁺)"
            text += "."
        sentences.append(text)
    if (message := _not_run("Layer alignment", alignment)):
        sentences.append(message)
    else:
        projected = alignment["by_space"].get("projected")
        raw = alignment["by_space"].get("raw")
        groups = ", ".join(f"{GROUP_LABELS.get(g['group'], g['group'])} {_num(g['fraction'])}"
                           for g in alignment["by_group"])
        chance = f" (chance for {alignment['n_layers'][0]} layers: {_num(alignment['chance'] * 100, 0)} %)" \
            if alignment["chance"] is not None else ""
        text = (f"Layer alignment of {_list([_code(m) for m in alignment['models']])} ({_plural(alignment['n_pairs'], 'pair')}): "
                f"projected into vocabulary space the Hungarian matching puts {_num((projected or 0) * 100, 0)} % of "
                f"layers on the diagonal ({groups}), not projected {_num((raw or 0) * 100, 0)} %{chance}")
        if projected is not None and raw is not None and projected > raw:
            best = alignment["by_group"][0]["group"] if alignment["by_group"] else None
            text += (" — the paper's finding, most clearly for " + GROUP_LABELS.get(best, best) if best else "")
        else:
            text += " — not the paper's finding (projection does not help)"
        sentences.append(text + ".")
    if (message := _not_run("Fine-tuning", finetune)):
        sentences.append(message)
    else:
        layers = _list([str(layer) for layer in finetune["top_layers"]])
        text = (f"Fine-tuning {finetune['model']}'s top {_plural(len(finetune['top_layers']), 'block')} "
                f"(layer{'s' if len(finetune['top_layers']) > 1 else ''} {layers}) and a "
                f"head on {TASK_LABELS.get(finetune['task'], finetune['task'])}"
                + (f" ({finetune['steps']} steps)" if finetune["steps"] else ""))
        if finetune["accuracy"] is not None:
            text += (f" reaches {_num(finetune['accuracy'], 3)} held-out accuracy against a majority rate of "
                     f"{_num(finetune['chance'], 3)}")
        k = _ints_text(finetune["k"])
        if finetune["above"]:
            above = _list([f"{GROUP_LABELS.get(c['group'], c['group'])} at layer {c['layer']} "
                           f"({_num(c['finetune'])} vs {_num(c['random'])})" for c in finetune["above"]])
            text += (f"; among the top {k} tokens of its largest ΔW rows, the fraction that carry the task's "
                     f"feature is above that of random rows of the same matrices (by ≥ {_num(FRACTION_MARGIN)}) in "
                     f"{above}, and level or below in the other {finetune['n_cells'] - len(finetune['above'])} of "
                     f"{finetune['n_cells']}")
        else:
            text += (f"; among the top {k} tokens of its largest ΔW rows, the fraction that carry the task's feature "
                     f"is nowhere above that of random rows of the same matrices by {_num(FRACTION_MARGIN)} "
                     f"({finetune['n_cells']} group × layer cells)")
        if finetune["classifier"]:
            c = finetune["classifier"]
            text += (f"; the classifier rows give {_num(c['fraction'])} ({_num(c['chance'])} by chance)")
        sentences.append(text + ".")
    if (message := _not_run("Zero-shot stitching", zero)):
        sentences.append(message)
    else:
        only = _list([f"{_num(e['accuracy'])} from {_code(e['model'])}" for e in zero["embeddings_only"]])
        text = (f"Zero-shot stitching x_A = x_B E_B E_A⁺ into the fine-tuned {zero['model']} (own accuracy "
                f"{_num(zero['own'], 3)}, majority rate {_num(zero['chance'], 3)}): keeping only B's embeddings gives "
                f"{only}")
        if zero["n_blocks"]:
            below = zero["blocks_below_chance"] == zero["n_blocks"]
            text += (f", and running B's blocks gives {_range(zero['blocks'])}, "
                     + ("below the majority rate every time — across seeds the map through the vocabulary does not "
                        "carry these small models' block outputs" if below else
                        f"below the majority rate in {zero['blocks_below_chance']} of {zero['n_blocks']} cases"
                        if zero["blocks_below_chance"] else "never below the majority rate"))
        sentences.append(text + ".")
    return head + " " + " ".join(sentences)


# --------------------------------------------------------------------------- NLI


def _render_nli(findings: Mapping[str, Any]) -> str:
    nli = findings["nli"]
    if (message := _not_run("NLI (Brown et al. §4 offline)", nli)):
        return message
    pairs = nli.get("pairs") or {}
    fraction = nli.get("counterexample_fraction")
    subcases = _list(nli.get("counterexample_subcases") or [])
    per_label = _ints_text(pairs.get("ood_per_subcase_label"))
    steps = _ints_text(nli.get("finetune_steps"))
    head = (f"NLI (Brown et al. §4 offline; {_int(pairs.get('train'))} training pairs with "
            f"{_num((fraction or 0) * 100, 0)} % {subcases} counterexamples, {_int(pairs.get('test'))} test pairs, "
            f"{pairs.get('ood_subcases', 'n/a')} × {per_label} OOD pairs per label; {nli['n_copies']} copies of one "
            f"{nli.get('encoder_layers') or 'n/a'}-layer encoder, {steps} fine-tuning steps each).")
    base = nli.get("baseline") or {}
    mccoy = findings["literature"]["mccoy_ood_non_entailed"]
    mostly = ("are all mostly heuristic out of distribution" if nli["mostly_heuristic"]
              else f"{nli['n_heuristic']} of {nli['n_copies']} are mostly heuristic out of distribution")
    text = (f"The copies score {_range(nli['test'], 3)} in distribution (the lexical-overlap rule: "
            f"{_num(base.get('test'), 3)}) and {mostly}: OOD non-entailed accuracy {_range(nli['ood_non_entailed'])} "
            f"(the rule: {_num(base.get('ood_non_entailed'))}; McCoy et al.'s 100 BERTs: {_range(mccoy)})")
    if nli.get("highest_subcase") and nli["highest_subcase"] != nli["lowest_subcase"]:
        hi, lo = nli["highest_subcase"], nli["lowest_subcase"]
        text += (f", highest on {SUBCASE_LABELS.get(hi, hi)} ({_range(nli['subcases'][hi]['span'])}) and lowest "
                 f"on {SUBCASE_LABELS.get(lo, lo)} ({_range(nli['subcases'][lo]['span'])})")
    text += "."
    groups = nli["groups"]
    st = nli["stitching"]
    split = (f"Split into the top and bottom {groups['k']} of {nli['n_copies']} by that accuracy (generalizing "
             f"{_range(groups['generalizing'])}, heuristic {_range(groups['heuristic'])})")
    if (message := _not_run("identity stitching", st)):
        text += f" {split}; {message}"
    else:
        layers = st["layers"]
        order = ["between", "within_generalizing", "within_heuristic"]
        curves = "; ".join(f"{RELATION_LABELS[r]} " + " / ".join(_num(v) for v in st["curves"][r]) for r in order)
        if len(st["increasing"]) == len(order):
            deeper = "costs more accuracy the deeper it is for every relation"
        elif st["increasing"]:
            deeper = ("costs more accuracy the deeper it is " + _list([RELATION_LABELS[r] for r in st["increasing"]])
                      + " but not for every relation")
        else:
            deeper = "does not cost more accuracy the deeper it is"
        most = st["most_interchangeable"]
        interchangeable = {"within_heuristic": "the heuristic copies are the most interchangeable",
                           "within_generalizing": "the generalizing copies are the most interchangeable",
                           "between": "copies of different groups are the most interchangeable"}[most]
        if st["diverge"]:
            verdict = (f"at layer(s) {_list([str(v) for v in st['diverge']])} stitching *between* the groups is worse "
                       "than within both with separated intervals: the groups diverge there, as Brown et al. found")
        elif st["diverge_means_only"]:
            verdict = (f"stitching *between* the groups is worse than within both by the means only (an interval "
                       f"is undefined) at layer(s) {_list([str(v) for v in st['diverge_means_only']])}")
        else:
            verdict = ("at no layer is stitching *between* the groups worse than within both with separated "
                       "intervals: the groups do not diverge as Brown et al. found")
        text += (f" {split}, identity stitching on in-distribution test pairs {deeper} — at layers "
                 f"{layers[0]}–{layers[-1]}: {curves} — so {interchangeable}, but {verdict}.")
        if st["ood_span"]:
            text += f" On OOD pairs the penalties are {_range(st['ood_span'], 2, signed=True)}"
            said = nli.get("ood_said_entailed")
            if said and said[0] > 0.5:
                text += (f" (every copy answers \"entailed\" to most of them: "
                         f"{_num(said[0] * 100, 0)}–{_num(said[1] * 100, 0)} %)")
            text += "."
    cka = nli["cka"]
    if (message := _not_run("CKA of the copies", cka)):
        text += " " + message
    else:
        separated = bool(cka["diverge"])
        text += (f" CKA {'separates the groups' if separated else 'does not separate the groups either'} "
                 f"(between {_range(cka['between'])} vs within {_range(cka['within'])} at relative depths "
                 f"{_range(cka['depths'], 2)}"
                 + (f"; separated at {_list([_num(d) for d in cka['diverge']])}" if separated else "") + ").")
    sweep = nli["sweep"]
    if (message := _not_run("Counterexample-fraction sweep", sweep)):
        text += " " + message
    elif sweep["status"] == "swept":
        values = _list([f"{_range(f['span'])} at {_num(f['fraction'], 2).rstrip('0').rstrip('.')}"
                        for f in sweep["fractions"]])
        text += f" A sweep of the counterexample fraction gives OOD non-entailed accuracy {values}."
    else:
        text += (" The counterexample-fraction sweep did not run (" + sweep["note"].replace(">=", "≥")
                 + "); `kedro run --pipelines nli --nodes models.nli.sweep_fractions --params "
                   "\"nli.min_spread=1.0,nli.sweep.n_copies=3\"` runs it.")
    text += (" How the encoder's pretraining masking decides how well the copies learn the task is measured by "
             "`benchmarks/nli_pretraining.py`, outside the default run.")
    return head + " " + text


# =========================================================================== provenance and the README region

#: What decides the numbers: the git-tracked files under these folders (:func:`source_digest`).
DIGEST_FOLDERS: tuple[str, ...] = ("src", "conf/base")
REGENERATE = ("regenerate the findings from a default run of this code: `HF_HUB_OFFLINE=1 kedro run`, then "
              "`python -m thinkalike.reports.findings_cli --write` (writes docs/findings.json and the README region)")


def tracked_files(root: str | os.PathLike, folders: Sequence[str] = DIGEST_FOLDERS) -> list[str]:
    """The git-tracked files under ``folders`` of the repository at ``root`` (POSIX paths, sorted);
    ``RuntimeError`` when ``root`` is not a git work tree."""
    import subprocess

    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", *folders], check=True,
                                capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise RuntimeError(f"{root} is not a git work tree ({error})") from error
    return sorted(path for path in listed.decode().split("\0") if path)


def source_digest(root: str | os.PathLike, folders: Sequence[str] = DIGEST_FOLDERS) -> str:
    """SHA-256 over the path and the working-tree content of every git-tracked file under ``folders`` (a tracked
    file deleted from the work tree counts as such): the code and configuration that decide the numbers."""
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    for path in tracked_files(root, folders):
        file = Path(root) / path
        content = file.read_bytes() if file.is_file() else b"\0deleted\0"
        digest.update(path.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
    return digest.hexdigest()


def readme_region(text: str) -> str | None:
    """The generated text between the markers (without the newline after the start marker), or ``None``."""
    start, end = text.find(START_MARKER + "\n"), text.find(END_MARKER)
    if start < 0 or end < start:
        return None
    return text[start + len(START_MARKER) + 1:end]


def replace_region(text: str, rendered: str) -> str:
    """``text`` with the region between the markers replaced by ``rendered``. Without markers (the first
    generation), the hand-written paragraphs are replaced: from the line starting "The default run (measured" to
    the last line before the next heading after "What the default run finds"; ``ValueError`` if neither is
    found."""
    block = f"{START_MARKER}\n{rendered}{END_MARKER}"
    if readme_region(text) is not None:
        start, end = text.find(START_MARKER), text.find(END_MARKER) + len(END_MARKER)
        return text[:start] + block + text[end:]
    lines = text.split("\n")
    try:
        first = next(i for i, line in enumerate(lines) if line.startswith("The default run (measured"))
        finds = next(i for i in range(first, len(lines)) if lines[i].startswith("What the default run finds"))
        heading = next(i for i in range(finds, len(lines)) if lines[i].startswith("#"))
    except StopIteration:
        raise ValueError(f"README has neither the markers {START_MARKER} … {END_MARKER} nor the hand-written "
                         "findings paragraphs to replace") from None
    last = heading
    while last > finds and not lines[last - 1].strip():
        last -= 1
    return "\n".join([*lines[:first], block, *lines[last:]])


# --------------------------------------------------------------------------- scaling


def _render_scaling(findings: Mapping[str, Any]) -> str:
    """The scaling family's answers, in the report's own sentences (:func:`thinkalike.reports.scaling.scaling_sentences`)."""
    scaling = findings.get("scaling") or _missing("scaling_summary")
    if (message := _not_run("Scaling family (Brown et al. §5)", scaling)):
        return message
    family = scaling.get("family") or []
    head = (f"Scaling family (Brown et al. §5; {len(family)} GPT-NeoX sizes, "
            f"{_code(family[0]) if family else 'n/a'} … {_code(family[-1]) if family else 'n/a'}; "
            "`report.html` shows its figures).")
    return " ".join([head, *scaling_sentences(scaling)])


# --------------------------------------------------------------------------- measures beyond CKA


def _remedy_label(variant: str) -> str:
    """``standardised`` / ``top<k>_removed`` (:mod:`thinkalike.reports.measures`) in words."""
    if variant == "standardised":
        return "standardising every dimension"
    return f"removing each layer's top {variant.removeprefix('top').removesuffix('_removed')} dimensions"


def _render_measures(findings: Mapping[str, Any]) -> str:
    measures = findings.get("measures") or _missing("similarity_measures")
    if (message := _not_run("Measures beyond CKA", measures)):
        return message
    sentences = [f"Measures beyond CKA ({measures['n_measures']} measures on {_int(measures['n_tokens'])} rows per "
                 "pair)."]
    per = measures["per_measure"]
    if per:
        separating = [m["measure"] for m in per if m["separates"]]
        others = [m["measure"] for m in per if not m["separates"]]
        text = (f"Seed replicas are more alike than every SoLU vs GeLU pair (different seeds) by "
                f"{len(separating)} of {len(per)} measures" + (f" ({_list([_code(m) for m in separating])})"
                                                              if separating else ""))
        if others:
            detail = _list([f"{_code(m['measure'])} (replicas {_range(m['replicas'])}, SoLU vs GeLU "
                            f"{_range(m['solu_gelu'])})" for m in per if not m["separates"]])
            text += f"; not by {detail}"
        sentences.append(text + ".")
    rogue = measures.get("rogue")
    if rogue:
        sentences.append(f"Rogue dimensions: the largest dimension of any layer carries at most "
                         f"{_num(rogue['max_top1'] * 100, 0)} % of its variance ({_code(rogue['model'])}, layer "
                         f"{rogue['layer']}); {rogue['n_above_half']} of {rogue['n_layers']} layers are above one half.")
    remedies = measures.get("remedies") or {}
    if remedies:
        parts = [f"{_remedy_label(variant)} by at most {_num(change['max_abs_change'])} ({_code(change['pair'][0])} "
                 f"vs {_code(change['pair'][1])}: {_signed(change['change'])})" for variant, change in remedies.items()]
        n_pairs = max(change["n_pairs"] for change in remedies.values())
        sentences.append(f"Over the {n_pairs} pairs of different models, matched-layer CKA changes with "
                         f"{_list(parts)}.")
    grounding = [g for g in measures.get("grounding") or [] if g["monotonicity"] is not None]
    if grounding:
        ranked = sorted(grounding, key=lambda g: -g["monotonicity"])
        models = max(g["n_models"] for g in grounding)
        text = (f"Grounding: layer monotonicity within the {models} models compared with themselves (Spearman of "
                f"alikeness against layer distance; chance 0) is highest for {_code(ranked[0]['measure'])} "
                f"({_num(ranked[0]['monotonicity'])}) and lowest for {_code(ranked[-1]['measure'])} "
                f"({_num(ranked[-1]['monotonicity'])})")
        specific = [g for g in grounding if g["specificity"] is not None]
        if specific:
            perfect = [g["measure"] for g in specific if g["specificity"] >= 1 - 1e-9]
            worst = min(specific, key=lambda g: g["specificity"])
            text += (f"; specificity (average precision of seed replicas above other architectures, chance "
                     f"{_num(specific[0]['chance'])}) is 1 for {len(perfect)} of {len(specific)} measures, lowest "
                     f"for {_code(worst['measure'])} ({_num(worst['specificity'])})")
        sentences.append(text + ".")
    calibration = measures.get("calibration")
    if calibration:
        parts = []
        for statistic, label in (("matched_mean", "matched-layer means"), ("best", "best layer pairs")):
            entries = calibration["statistics"].get(statistic) or []
            if entries:
                parts.append(f"{label}: " + _list([f"{_code(e['measure'])} z {_range(e['z'], 1, signed=True)}, "
                                                    f"{e['n_significant']} at p ≤ 0.05" for e in entries]))
        sentences.append(f"Against a permutation null of the token correspondence ({calibration['n_permutations']} "
                         f"shuffles, smallest possible p {_num(1 / (calibration['n_permutations'] + 1), 3)}; "
                         f"{calibration['n_pairs']} pairs of different models): " + "; ".join(parts) + ".")
    return " ".join(sentences)


#: What a measure must score to be trusted for a test in the guide (:func:`_render_measure_guide`).
RANK_PASS = 0.7  # Spearman ρ of layer monotonicity and of sensitivity (the zoo's 2–8-layer models cap
#                  monotonicity near 0.8 for most measures: 0.7 separates the two that fall behind)
NULL_PASS = 0.05  # |mean alikeness| on inputs with no correspondence
AP_PASS = 0.99  # average precision of a ranking test (specificity, trained vs untrained)


def _scores(grounding: Sequence[Mapping[str, Any]], test: str) -> list[tuple[str, float]]:
    return [(g["measure"], g[test]) for g in grounding if g.get(test) is not None]


def _guide_line(what: str, scored: list[tuple[str, float]], passes: Any, criterion: str, signed: bool = False) -> str:
    """"<what> (<criterion>): <passing measures>; not <failing ones, worst first, with their scores>"."""
    good = [name for name, value in scored if passes(value)]
    bad = sorted([(name, value) for name, value in scored if not passes(value)], key=lambda item: abs(item[1]),
                 reverse=True)
    text = f"{what} ({criterion}): " + (_list([_code(name) for name in good]) if good else "no measure")
    if bad:
        text += "; not " + _list([f"{_code(name)} ({_signed(value, 2) if signed else _num(value)})"
                                 for name, value in bad])
    return text


def _render_measure_guide(findings: Mapping[str, Any]) -> str | None:
    """**Which measure to trust for what**: per grounding test, the measures that pass it (criteria above) and
    the scores of those that do not; then the measures that pass every test that was run."""
    measures = findings.get("measures") or {}
    grounding = measures.get("grounding") or []
    if not grounding or "error" in measures:
        return None
    lines, passed = [], {g["measure"]: True for g in grounding}

    def test(key: str, what: str, passes: Any, criterion: str, signed: bool = False) -> None:
        scored = _scores(grounding, key)
        if scored:
            lines.append(_guide_line(what, scored, passes, criterion, signed))
            for name, value in scored:
                passed[name] = passed[name] and bool(passes(value))

    test("monotonicity", "to follow a model's layers in order", lambda v: v >= RANK_PASS,
         f"layer monotonicity ρ ≥ {_num(RANK_PASS, 1)}")
    test("sensitivity", "to register the loss of a layer's main directions", lambda v: v >= RANK_PASS,
         f"ρ ≥ {_num(RANK_PASS, 1)} as the top 1 … 5 principal components go")
    test("null_permuted", "to read 0 on rows with no correspondence", lambda v: abs(v) <= NULL_PASS,
         f"|alikeness| ≤ {_num(NULL_PASS)} with the rows shuffled", signed=True)
    test("null_independent", "to read 0 on other inputs", lambda v: abs(v) <= NULL_PASS,
         f"|alikeness| ≤ {_num(NULL_PASS)} on other tokens", signed=True)
    chance = next((g["chance"] for g in grounding if g.get("chance") is not None), None)
    test("specificity", "to tell seed replicas from other architectures", lambda v: v >= AP_PASS,
         f"average precision ≥ {_num(AP_PASS)}; chance {_num(chance)}")
    untrained = next((g for g in grounding if g.get("trained_vs_untrained") is not None), None)
    if untrained:
        test("trained_vs_untrained", "to tell a trained model from an untrained one", lambda v: v >= AP_PASS,
             f"average precision ≥ {_num(AP_PASS)} over {untrained['n_untrained_pairs']} trained-vs-untrained pairs; "
             f"chance {_num(untrained['untrained_chance'])}")
    if not lines:
        return None
    every = [name for name, ok in passed.items() if ok]
    closing = (f"Every test: {_list([_code(name) for name in every])}." if every
               else "No measure passes every test.")
    return ("**Which measure to trust for what** (from `measure_grounding` of this run; the criteria are ours, "
            "the scores the table's): " + "; ".join(lines) + ". " + closing)
