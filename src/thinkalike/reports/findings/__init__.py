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

One module per paragraph, each with its ``collect_*`` (numbers from tables) and ``render_*`` (the sentences):
:mod:`.timing`, :mod:`.cka`, :mod:`.stitching`, :mod:`.mlem`, :mod:`.embedding`, :mod:`.nli`, :mod:`.measures`
(the scaling family's sentences are :mod:`thinkalike.reports.scaling`'s); :mod:`.text` writes numbers and lists,
:mod:`.readme` finds and replaces the README region and digests the source. This module puts them together.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinkalike.models.sources import is_initialisation
from thinkalike.reports.findings.cka import collect_cka, render_cka
from thinkalike.reports.findings.embedding import collect_embedding, render_embedding
from thinkalike.reports.findings.measures import collect_measures, render_measure_guide, render_measures
from thinkalike.reports.findings.mlem import collect_mlem, render_mlem
from thinkalike.reports.findings.nli import collect_nli, render_nli
from thinkalike.reports.findings.readme import (  # the README region and its digest: this package's API too
    END_MARKER,
    REGENERATE,
    START_MARKER,
    readme_region,
    replace_region,
    source_digest,
)
from thinkalike.reports.findings.stitching import collect_stitching, render_stitching
from thinkalike.reports.findings.text import (LITERATURE, code_text, guarded, jsonable, missing_section,
                                              not_run_sentence, table_of, without_models, wrap)
from thinkalike.reports.findings.timing import (RUN_BUDGET_SECONDS, collect_corpus, collect_timing, collect_zoo,
                                                render_timing)
from thinkalike.reports.scaling import scaling_sentences


__all__ = ["END_MARKER", "REGENERATE", "START_MARKER", "TABLES", "collect_errors", "collect_findings", "missing_tables",
           "model_facts", "model_roles", "readme_region", "render_findings", "replace_region", "source_digest", "wrap"]

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
    summary = table_of(tables, "zoo_summary")
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
        "corpus": guarded(collect_corpus, tables),
        "zoo": guarded(collect_zoo, tables, parameters),
        "timing": guarded(collect_timing, tables),
        "cka": guarded(collect_cka, tables, roles, parameters),
        "stitching": guarded(collect_stitching, tables, roles, parameters),
        "mlem": guarded(collect_mlem, tables, roles, untrained),
        "embedding": guarded(collect_embedding, without_models(tables, untrained), roles),
        "nli": guarded(collect_nli, tables, parameters),
        "scaling": guarded(_collect_scaling, tables),
        "measures": guarded(collect_measures, tables, roles),
    }
    return json.loads(json.dumps(jsonable(findings), allow_nan=False))


def untrained_models(parameters: Mapping[str, Any]) -> list[str]:
    """The models of ``activations.models`` that are zoo initialisations (``zoo:<m>?weights=initial``): untrained
    controls, kept out of the findings about trained models."""
    specs = ((parameters.get("activations") or {}).get("models") or {})
    return sorted(name for name, spec in specs.items() if isinstance(spec, str) and is_initialisation(spec))


def _collect_scaling(tables: Mapping[str, Any]) -> dict[str, Any]:
    """The scaling pipeline's summary as it is (its answers are already numbers: :mod:`thinkalike.reports.scaling`)."""
    summary = tables.get("scaling_summary")
    if not summary:
        return missing_section("scaling_summary")
    return dict(summary)


def collect_errors(findings: Any, where: str = "") -> list[str]:
    """``"<section>: <error>"`` for every section that could not be collected."""
    if isinstance(findings, Mapping):
        found = [f"{where or 'findings'}: {findings['error']}"] if "error" in findings else []
        return found + [e for key, value in findings.items() for e in collect_errors(value,
                                                                                     f"{where}.{key}".strip("."))]
    return []


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


def render_findings(findings: Mapping[str, Any]) -> str:
    """The README region's markdown (module docstring): the timing paragraph, then the findings paragraphs, each
    wrapped at :data:`WIDTH` columns like the rest of the README (:func:`wrap`)."""
    paragraphs = [render_timing(findings), render_cka(findings), render_stitching(findings),
                  render_mlem(findings), render_embedding(findings), render_nli(findings),
                  _render_scaling(findings), render_measures(findings)]
    guide = render_measure_guide(findings)
    if guide:
        paragraphs.append(guide)
    note = ("<!-- Generated by `python -m thinkalike.reports.findings_cli --write` from the default run's outputs "
            "(numbers in docs/findings.json); do not edit by hand. -->")
    return "\n\n".join([note, *(wrap(p) for p in paragraphs)]) + "\n"


def _render_scaling(findings: Mapping[str, Any]) -> str:
    """The scaling family's answers, in the report's own sentences (:func:`thinkalike.reports.scaling.scaling_sentences`)."""
    scaling = findings.get("scaling") or missing_section("scaling_summary")
    if (message := not_run_sentence("Scaling family (Brown et al. §5)", scaling)):
        return message
    family = scaling.get("family") or []
    head = (f"Scaling family (Brown et al. §5; {len(family)} GPT-NeoX sizes, "
            f"{code_text(family[0]) if family else 'n/a'} … {code_text(family[-1]) if family else 'n/a'}; "
            "`report.html` shows its figures).")
    return " ".join([head, *scaling_sentences(scaling)])
