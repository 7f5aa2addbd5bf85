"""The trained φ's of one ordered pair f → g as one flat tensor dict (a safetensors file) and one JSON config,
and one φ read back from them (for :func:`~thinkalike.stitching.stitcher.evaluate_saved`).

A stitch is named ``l<layer_f>_m<layer_g>.<kind>`` (:func:`stitch_key`, e.g. ``l1_m1.affine_ln``) for φ seed 0
and ``l<layer_f>_m<layer_g>_s<seed>.<kind>`` for φ seed ``seed`` > 0 (e.g. ``l1_m1_s2.affine_ln``; no key is a
prefix of another's ``<key>.``). Its tensors (``StitchLayer.state_dict()``: the initial map, the trained deltas,
the LayerNorm's gain and bias) are stored under ``<stitch key>.<state key>`` (e.g.
``l1_m1_s2.affine_ln.delta_weight``); identity stitches have none (and one key: nothing is trained, φ seed 0).
The config holds ``f``, ``g``, ``settings`` (:meth:`StitchSettings.to_dict`: evaluation batches, masking seed,
bootstrap, ``exclude_special_targets`` — what a re-evaluation needs to repeat the evaluation exactly),
``excluded_target_ids`` (the token ids that were never targets, given to ``evaluate_saved`` as
``special_ids``), ``phi_seeds`` (the seeds of the trained kinds) and, per stitch key, ``layer_f``, ``layer_g``,
``kind``, ``init``, ``objective``, ``phi_seed`` and ``phi`` (:meth:`StitchLayer.config`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from thinkalike.stitching.layers import StitchConfigError
from thinkalike.stitching.stitcher import StitchResult


def stitch_key(layer_f: int, layer_g: int, kind: str, phi_seed: int = 0) -> str:
    """``l<layer_f>_m<layer_g>.<kind>`` (φ seed 0) or ``l<layer_f>_m<layer_g>_s<seed>.<kind>``: the name of one
    stitch in a saved pair."""
    seed = f"_s{int(phi_seed)}" if int(phi_seed) else ""
    return f"l{int(layer_f)}_m{int(layer_g)}{seed}.{kind}"


def pack_stitches(
    results: Iterable[StitchResult], f: str, g: str, *, excluded_target_ids: Iterable[int] | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(state, config)`` of the stitches of f → g, every φ seed of each (module docstring). All results must
    share one settings. ``excluded_target_ids``: the ids left out of the targets, recorded for re-evaluation."""
    state: dict[str, torch.Tensor] = {}
    stitches: dict[str, dict[str, Any]] = {}
    settings: dict[str, Any] | None = None
    seeds: list[int] = []
    for result in results:
        if (result.f, result.g) != (f, g):
            raise ValueError(f"a stitch of {result.f!r} -> {result.g!r} among the stitches of {f!r} -> {g!r}")
        if settings is not None and result.settings.to_dict() != settings:
            raise ValueError(f"the stitches of {f!r} -> {g!r} were trained with different settings")
        settings = result.settings.to_dict()
        key = stitch_key(result.layer_f, result.layer_g, result.kind, result.phi_seed)
        if key in stitches:
            raise ValueError(f"stitch {key!r} of {f!r} -> {g!r} twice")
        if result.kind != "identity" and result.phi_seed not in seeds:
            seeds.append(int(result.phi_seed))
        stitches[key] = {
            "layer_f": result.layer_f,
            "layer_g": result.layer_g,
            "kind": result.kind,
            "init": result.init,
            "objective": result.objective,
            "phi_seed": int(result.phi_seed),
            "phi": dict(result.phi_config),
        }
        state.update({f"{key}.{name}": tensor.detach().cpu().contiguous() for name, tensor in result.phi_state.items()})
    config = {"f": f, "g": g, "settings": settings or {}, "phi_seeds": seeds, "stitches": stitches}
    if excluded_target_ids is not None:
        config["excluded_target_ids"] = sorted(int(i) for i in excluded_target_ids)
    return state, config


def unpack_stitch(
    state: Mapping[str, torch.Tensor],
    config: Mapping[str, Any],
    layer_f: int,
    layer_g: int,
    kind: str,
    phi_seed: int = 0,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """``(phi_config, phi_state)`` of one saved stitch (φ seed ``phi_seed``); :class:`StitchConfigError` listing
    the saved ones if absent."""
    key = stitch_key(layer_f, layer_g, kind, phi_seed)
    stitches = config.get("stitches", {})
    if key not in stitches:
        raise StitchConfigError(
            f"no saved stitch {key!r} of {config.get('f')!r} -> {config.get('g')!r}; saved: {sorted(stitches)}"
        )
    prefix = f"{key}."
    phi_state = {name[len(prefix) :]: tensor for name, tensor in state.items() if name.startswith(prefix)}
    return dict(stitches[key]["phi"]), phi_state
