"""The CKA section of the findings: SoLU vs GeLU at equal depth, seed replicas, the same-seed control and the
GPT-NeoX family against its largest member, from ``cka_distances`` (:mod:`thinkalike.reports.findings`):
:func:`collect_cka` (the numbers) and :func:`claims_cka` (the claims).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.reports.findings.claims import Claim, best_of, either_way, greater, mirrored
from thinkalike.reports.findings.text import as_float, missing_section, not_run_sentence, pair_row, span_of, table_of


def collect_cka(tables: Mapping[str, Any], roles: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The CKA paragraph's numbers from ``cka_distances``: SoLU vs GeLU pairs, seed replicas, the same-seed control and
    the GPT-NeoX family (``roles``: :func:`thinkalike.reports.findings.model_roles`)."""
    distances = table_of(tables, "cka_distances")
    if distances is None:
        return missing_section("cka_distances")

    def value(first: str, second: str, **extra: Any) -> dict[str, Any] | None:
        row = pair_row(distances, first, second)
        if row is None:
            return None
        return {**extra, "cka": as_float(row["mean_matched_cka"]), "distance": as_float(row["arccos_distance"])}

    solu_gelu = [v for p in roles["solu_gelu"] if (v := value(p["solu"], p["gelu"], **p))]
    control = [v for p in roles["control"] if (v := value(p["solu"], p["gelu"], **p))]
    replicas = []
    for group in roles["replicas"]:
        members = group["models"]
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if v := value(a, b, a=a, b=b, depth=group["depth"], kind=group["kind"]):
                    replicas.append(v)
    family = roles["gpt_neox"]
    in_family = distances[
        distances["model_a"].isin(family)
        & distances["model_b"].isin(family)
        & (distances["model_a"] != distances["model_b"])
    ]
    neox = None
    if len(in_family):
        counts = pd.concat([in_family["model_a"], in_family["model_b"]]).value_counts()
        reference = max(family, key=lambda m: (int(counts.get(m, 0)), roles["n_layers"].get(m) or 0))
        members = [
            v
            for m in family
            if m != reference
            if (v := value(reference, m, model=m, head_dim=roles["gpt_neox_head_dims"].get(m)))
        ]
        neox = {
            "reference": reference,
            "members": sorted(members, key=lambda v: -(v["cka"] or -math.inf)),
            "odd": [m for m in roles["gpt_neox_odd"] if m != reference],
        }
    intra = intra_block_findings(distances)
    return {
        "intra_blocks": intra,
        "intra_block_runs": [f"{m}: {e['blocks'] or 'no blocks'}" for m, e in intra.items()],
        "intra_block_contrasts": [e["contrast"] for e in intra.values() if e["contrast"] is not None],
        "n_pairs": int(len(distances)),
        "n_between_pairs": int((distances["model_a"] != distances["model_b"]).sum()),
        "n_tokens": span_of(distances["n_tokens"]) if "n_tokens" in distances else None,
        "exclude_special_tokens": (parameters.get("cka") or {}).get("exclude_special_tokens"),
        "solu_gelu": solu_gelu,
        "control": control,
        "replicas": replicas,
        "neox": neox,
    }


def intra_block_findings(distances: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each model compared with itself: its layers, the best block contrast of its own CKA matrix and that split's
    layer runs (``cka_distances``' ``block_contrast`` and ``blocks``: :func:`thinkalike.cka.compute.intra_blocks`)."""
    if "block_contrast" not in distances:
        return {}
    own = distances[(distances["model_a"] == distances["model_b"]) & distances["block_contrast"].notna()]
    return {
        str(row.model_a): {
            "n_layers": int(row.layers_a),
            "contrast": as_float(row.block_contrast),
            "null": as_float(getattr(row, "block_contrast_null", None)),
            "blocks": str(row.blocks),
        }
        for row in own.itertuples()
    }


def claims_cka(findings: Mapping[str, Any]) -> list[Claim]:
    """The CKA paragraph's claims (:mod:`thinkalike.reports.findings.claims`): SoLU/GeLU against seed replicas (both
    directions, intervals over the pairs separated), the same-seed control's gain against the activation function's
    loss, and which GPT-NeoX member is closest to and furthest from the family's reference."""
    cka = findings.get("cka") or {}
    if not_run_sentence("CKA", cka):
        return []
    sg, replicas, control = cka.get("solu_gelu") or [], cka.get("replicas") or [], cka.get("control") or []
    claims = _replica_claims(sg, replicas)
    if control and sg:
        claims += _control_claims(control[0], sg, replicas)
    return claims + _neox_claims(cka.get("neox") or {})


def _replica_claims(sg: Sequence[Mapping[str, Any]], replicas: Sequence[Mapping[str, Any]]) -> list[Claim]:
    """SoLU vs GeLU at equal depth below (or above) GeLU seed replicas, every pair of one side against every pair of
    the other: margins ``min(replicas) − max(SoLU/GeLU)`` and ``min(SoLU/GeLU) − max(replicas)``."""
    sg_span, rep_span = span_of(p["cka"] for p in sg), span_of(p["cka"] for p in replicas)
    if not (sg_span and rep_span):
        return []
    values: dict[str, Any] = {
        "solu_gelu": sg_span,
        "replicas": rep_span,
        "sg_distance": span_of(p["distance"] for p in sg),
        "rep_distance": span_of(p["distance"] for p in replicas),
    }
    return [
        greater(
            "cka.solu_gelu_below_replicas",
            "SoLU vs GeLU at equal depth (different seeds) have lower matched-layer CKA ({solu_gelu}; "
            "arccos distance {sg_distance}) than GeLU seed replicas ({replicas}; distance "
            "{rep_distance})",
            rep_span[0],
            sg_span[1],
            **values,
        ),
        greater(
            "cka.solu_gelu_above_replicas",
            "SoLU vs GeLU at equal depth (different seeds) have higher matched-layer CKA ({solu_gelu}) "
            "than GeLU seed replicas ({replicas})",
            sg_span[0],
            rep_span[1],
            **values,
        ),
    ]


def _control_claims(
    c: Mapping[str, Any], sg: Sequence[Mapping[str, Any]], replicas: Sequence[Mapping[str, Any]]
) -> list[Claim]:
    """The same-seed control ``c`` against SoLU vs GeLU at its depth (a shared initialisation's gain, and its
    mirror), and that gain against what the activation function takes away (GeLU seed replicas over SoLU vs GeLU at
    the same depth), both ways."""
    same_depth = [p for p in sg if p["depth"] == c["depth"]] or sg
    reps = [p for p in replicas if p["depth"] == c["depth"]] or replicas
    base = float(np.mean([p["cka"] for p in same_depth]))
    gain = None if c["cka"] is None else c["cka"] - base
    values = {"control": c["cka"], "control_distance": c["distance"], "gain": gain, "base": base}
    raises = Claim(
        "cka.shared_init_raises",
        "The same-seed control (a SoLU that shares GeLU's initial weights) has higher matched-layer "
        "CKA ({control}) than SoLU vs GeLU with different seeds ({base}): a shared initialisation "
        "alone raises CKA by {gain}",
        gain,
        values,
    )
    claims = mirrored(
        raises,
        "cka.shared_init_lowers",
        "The same-seed control has lower matched-layer CKA ({control}) than SoLU vs GeLU with different seeds ({base})",
    )
    if not reps or gain is None:
        return claims
    loss = float(np.mean([p["cka"] for p in reps])) - base
    values = {**values, "loss": loss}
    claims.append(
        Claim(
            "cka.activation_lowers",
            "GeLU seed replicas have higher matched-layer CKA than SoLU vs GeLU at the same depth "
            "by {loss}: the activation function takes CKA away",
            loss,
            values,
        )
    )
    return claims + either_way(
        "cka.shared_init_outweighs_activation",
        "A shared initialisation raises CKA by more ({gain}) than the activation function takes away ({loss})",
        "cka.activation_outweighs_shared_init",
        "The activation function takes away more CKA ({loss}) than a shared initialisation adds ({gain})",
        gain,
        loss,
        **values,
    )


def _neox_claims(neox: Mapping[str, Any]) -> list[Claim]:
    """Which GPT-NeoX member is closest to, and which furthest from, the family's reference (:func:`best_of`)."""
    members = neox.get("members") or []
    if len(members) <= 1:
        return []
    scores = {m["model"]: m["cka"] for m in members}
    extra = {
        m["model"]: {
            "reference": neox["reference"],
            "distance": m["distance"],
            "odd": " (odd head size)" if m["model"] in set(neox.get("odd") or []) else "",
        }
        for m in members
    }
    return best_of(
        "cka.neox_closest",
        "In the GPT-NeoX family, `{name}`{odd} is the closest to `{reference}` "
        "(matched-layer CKA {score}; distance {distance})",
        scores,
        higher=True,
        values=extra,
    ) + best_of(
        "cka.neox_furthest",
        "In the GPT-NeoX family, `{name}`{odd} is the furthest from "
        "`{reference}` (matched-layer CKA {score}; distance {distance})",
        scores,
        higher=False,
        values=extra,
    )
