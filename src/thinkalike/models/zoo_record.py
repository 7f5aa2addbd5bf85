"""A zoo model's facts, parsed once into one typed record (no Kedro): :class:`ZooModel`, from its configuration
entry (``zoo.models.<name>``) or its saved model config (``models.<name>.model_config``), and the rules that
compare records.

* :func:`zoo_model` / :func:`zoo_models` — the record(s): family, kind, objective, seed, depth, width, heads, head
  dimension and the settings that make the model what it is (:meth:`ZooModel.signature`);
* :func:`seed_families` — groups of models identical but for their seed (*seed replicas*): equal signatures,
  pairwise different seeds;
* :func:`neox_twins` — ``{off-trend member: twin}``: GPT-NeoX models identical but for their heads (equal
  signatures without the head settings, hence equal depth and width, and equal seeds) whose head dimensions
  differ, the twin's being the family's most common one;
* :func:`family_roles` — who is who in the findings: SoLU/GeLU pairs and the same-seed control, seed replicas,
  the GPT-NeoX family, encoders, Mamba models and the others.

The objective's default and the depth (its keys, :data:`~thinkalike.models.zoo_entry.DEPTH_KEYS`) are read by
:mod:`thinkalike.models.zoo_entry` (their one home).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from thinkalike.models.zoo_entry import MASKED, depth_of, objective_of, seed_of

#: The architecture keys of a model's heads (TransformerLens, transformers).
HEAD_KEYS: tuple[str, ...] = ("n_heads", "d_head", "num_attention_heads", "head_dim")
#: Keys that name a model rather than shape it: left out of its signature.
_NAMING_KEYS: tuple[str, ...] = ("seed", "name")


@dataclass(frozen=True)
class ZooModel:
    """One zoo model's facts. ``kind``: ``solu`` | ``gelu`` | ``encoder`` | ``gpt_neox`` | ``mamba`` | another
    activation or model type; ``architecture``: its architecture's settings without seed and name (sorted
    ``(key, JSON value)`` pairs); ``training``: its entry's training overrides (none in a saved config)."""

    name: str
    family: str
    kind: str
    objective: str
    seed: int | None
    depth: int | None
    width: int | None
    heads: int | None
    head_dim: int | None
    architecture: tuple[tuple[str, str], ...]
    training: tuple[tuple[str, str], ...] = ()

    def signature(self, without: Collection[str] = ()) -> str:
        """Everything that makes the model what it is but its seed and name (and the architecture keys
        ``without``), as a comparable string: equal for seed replicas."""
        architecture = [(key, value) for key, value in self.architecture if key not in without]
        return json.dumps([self.family, self.objective, architecture, list(self.training)])


def _as_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _settings(values: Mapping[str, Any], leave_out: Collection[str] = ()) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(key), json.dumps(value, sort_keys=True, default=str))
        for key, value in sorted(values.items())
        if key not in leave_out
    )


def zoo_model(name: str, config: Any) -> ZooModel:
    """The record of zoo model ``name`` from its saved config (``bridge_config`` / ``hf_config``) or its zoo entry
    (``architecture``). A ``bridge`` model's kind is ``encoder`` when masked (or its attention bidirectional), else
    ``solu`` for every SoLU activation, else its activation; another family's is ``encoder`` when masked, else its
    ``model_type``. The seed is a saved config's, else its architecture's (None when neither gives one); an entry's,
    else :data:`~thinkalike.models.zoo_entry.DEFAULT_SEED` (the seed it is trained with)."""
    config = config if isinstance(config, Mapping) else {}
    family = str(config.get("family", ""))
    objective = objective_of(config)
    arch = dict(config.get("bridge_config") or config.get("hf_config") or config.get("architecture") or {})
    saved = "bridge_config" in config or "hf_config" in config
    seed = config.get("seed", arch.get("seed")) if saved else seed_of(config)  # an entry's seed defaults as training's
    if family == "bridge":
        act = str(arch.get("act_fn", ""))
        masked = objective == MASKED or arch.get("attention_dir") == "bidirectional"
        kind = "encoder" if masked else ("solu" if act.startswith("solu") else act)
        width, heads, head_dim = arch.get("d_model"), arch.get("n_heads"), arch.get("d_head")
    else:
        kind = "encoder" if objective == MASKED else str(arch.get("model_type", family))
        width, heads = arch.get("hidden_size"), arch.get("num_attention_heads")
        head_dim = (int(width) // int(heads)) if width and heads else None
    return ZooModel(
        name,
        family,
        kind,
        objective,
        _as_int(seed),
        depth_of(arch),
        _as_int(width),
        _as_int(heads),
        _as_int(head_dim),
        _settings(arch, _NAMING_KEYS),
        _settings(dict(config.get("training") or {})),
    )


def zoo_models(entries: Mapping[str, Any], names: Sequence[str] | None = None) -> dict[str, ZooModel]:
    """The records of ``entries`` (``{name: entry or saved config}``), of ``names`` only when given (in their
    order; names without an entry left out)."""
    chosen = list(entries) if names is None else [name for name in names if entries.get(name)]
    return {str(name): zoo_model(str(name), entries[name]) for name in chosen}


def seed_families(models: Sequence[ZooModel]) -> list[list[ZooModel]]:
    """Groups (≥ 2, each in the models' order, ordered by their first member) of models identical but for their
    seed: equal :meth:`~ZooModel.signature`, every seed different."""
    groups: dict[str, list[ZooModel]] = {}
    for model in models:
        groups.setdefault(model.signature(), []).append(model)
    return [group for group in groups.values() if len(group) > 1 and len({m.seed for m in group}) == len(group)]


def neox_twins(models: Sequence[ZooModel]) -> dict[str, str]:
    """``{off-trend member: twin}`` among the GPT-NeoX ``models``: pairs identical but for their heads (equal
    signatures without :data:`HEAD_KEYS`, equal seeds) whose head dimensions differ, the twin's being the most
    common head dimension of those models (the scaling pipeline's ``twins: auto``). Later pairs overwrite
    earlier ones."""
    neox = [model for model in models if model.kind == "gpt_neox"]
    head_dims = [model.head_dim for model in neox]
    if not head_dims:
        return {}
    trend = max(set(head_dims), key=head_dims.count)
    twins = {}
    for a, b in combinations(neox, 2):
        if (
            (a.seed, a.signature(HEAD_KEYS)) == (b.seed, b.signature(HEAD_KEYS))
            and a.head_dim != b.head_dim
            and trend in (a.head_dim, b.head_dim)
        ):
            odd, twin = (b, a) if a.head_dim == trend else (a, b)
            twins[odd.name] = twin.name
    return twins


def _solu_gelu_pairs(bridges: Sequence[ZooModel]) -> list[dict[str, Any]]:
    """Every SoLU with every GeLU of equal depth, width and heads (``same_seed``: a same-seed control)."""
    return [
        {"solu": s.name, "gelu": g.name, "depth": s.depth, "same_seed": s.seed == g.seed}
        for s in bridges
        if s.kind == "solu"
        for g in bridges
        if g.kind == "gelu" and (s.depth, s.width, s.heads) == (g.depth, g.width, g.heads)
    ]


def family_roles(facts: Mapping[str, ZooModel]) -> dict[str, Any]:
    """SoLU/GeLU pairs (``solu_gelu``: different seeds; ``control``: the same seed), groups of seed replicas
    (:func:`seed_families`, but for those holding the SoLU of a same-seed control: a SoLU with a GeLU's seed is
    the control's point), the GPT-NeoX family (less the twins of :func:`neox_twins`; ``gpt_neox_odd``: members of
    a family of more than 2 whose head dimension no other member has), encoders, Mamba models and other models
    (names in ``facts`` order; plain JSON, saved in the findings)."""
    models = list(facts.values())
    bridges = [f for f in models if f.family == "bridge" and f.kind in ("solu", "gelu")]
    pairs = _solu_gelu_pairs(bridges)
    controls = {p["solu"] for p in pairs if p["same_seed"]}
    replicas: list[dict[str, Any]] = [
        {"models": [f.name for f in group], "kind": group[0].kind, "depth": group[0].depth}
        for group in seed_families(models)
        if not controls & {f.name for f in group}
    ]
    all_neox = [f for f in models if f.kind == "gpt_neox"]
    twins = neox_twins(all_neox)
    neox = [f for f in all_neox if f.name not in twins.values()]
    head_dims = [f.head_dim for f in neox]
    paired = {name for p in pairs for name in (p["solu"], p["gelu"])} | {n for g in replicas for n in g["models"]}
    return {
        "solu_gelu": [p for p in pairs if not p["same_seed"]],
        "control": [p for p in pairs if p["same_seed"]],
        "replicas": replicas,
        "bridges": [f.name for f in bridges],
        "gpt_neox": [f.name for f in neox],
        "gpt_neox_head_dims": {f.name: f.head_dim for f in all_neox},
        "gpt_neox_odd": [f.name for f in neox if len(neox) > 2 and head_dims.count(f.head_dim) == 1],
        "gpt_neox_twins": twins,
        "encoders": [f.name for f in models if f.kind == "encoder"],
        "mamba": [f.name for f in models if f.kind == "mamba"],
        "others": [f.name for f in models if f.kind not in ("gpt_neox", "encoder", "mamba") and f.name not in paired],
        "n_layers": {f.name: f.depth for f in models},
    }
