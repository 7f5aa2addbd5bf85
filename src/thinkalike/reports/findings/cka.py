"""The CKA paragraph of the findings: SoLU vs GeLU at equal depth, seed replicas, the same-seed control and the
GPT-NeoX family against its largest member, from ``cka_distances`` (:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.reports.findings.text import (as_float, code_text, list_text, missing_section, not_run_sentence,
                                              number_text, pair_row, range_text, span_of, table_of, tokens_text)


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
    return {"n_pairs": int(len(distances)),
            "n_between_pairs": int((distances["model_a"] != distances["model_b"]).sum()),
            "n_tokens": span_of(distances["n_tokens"]) if "n_tokens" in distances else None,
            "exclude_special_tokens": (parameters.get("cka") or {}).get("exclude_special_tokens"),
            "solu_gelu": solu_gelu, "control": control, "replicas": replicas, "neox": neox}


def render_cka(findings: Mapping[str, Any]) -> str:
    """The paragraph "What the default run finds … CKA: …" from the collected numbers."""
    cka = findings["cka"]
    intro = "What the default run finds"
    if (message := not_run_sentence("CKA", cka)):
        return f"{intro}. {message}"
    special = "special tokens excluded, " if cka.get("exclude_special_tokens") else ""
    sentences = []
    sg, replicas, control = cka["solu_gelu"], cka["replicas"], cka["control"]
    if sg:
        by_depth = list_text([f"{number_text(p['distance'])} at {p['depth']} layers" for p in sg])
        text = (f"SoLU vs GeLU at equal depth have matched-layer CKA {range_text(span_of(p['cka'] for p in sg))} "
                f"(arccos distance {by_depth})")
        if replicas:
            rep = span_of(p["cka"] for p in replicas)
            sg_span = span_of(p["cka"] for p in sg)
            relation = ("less than" if sg_span[1] < rep[0] else "more than" if sg_span[0] > rep[1]
                        else "overlapping with the CKA")
            text += (f", {relation} between GeLU seed replicas ({range_text(rep)}, distance "
                     f"{range_text(span_of(p['distance'] for p in replicas))})")
        sentences.append(text)
    else:
        sentences.append("no SoLU/GeLU pair at equal depth with different seeds was compared")
    if control:
        c = control[0]
        text = (f"the same-seed control (a SoLU that shares GeLU's initial weights) gives {number_text(c['cka'])} "
                f"(distance {number_text(c['distance'])})")
        same_depth = [p for p in sg if p["depth"] == c["depth"]] or sg
        reps = [p for p in replicas if p["depth"] == c["depth"]] or replicas
        if same_depth and reps:
            base = float(np.mean([p["cka"] for p in same_depth]))
            gain = c["cka"] - base
            loss = float(np.mean([p["cka"] for p in reps])) - base
            if loss > 0:
                comparison = ("more than" if gain > loss else "less than") + \
                    f" the {number_text(loss)} the activation function takes away (seed replicas against SoLU/GeLU)"
            else:
                comparison = "while the activation function takes nothing away (SoLU/GeLU are not below the replicas)"
            text += (f", so a shared initialisation alone {'raises' if gain >= 0 else 'lowers'} CKA by "
                     f"{number_text(abs(gain))}, {comparison}")
        sentences.append(text)
    neox = cka["neox"]
    if neox and neox["members"]:
        members = neox["members"]
        odd = set(neox["odd"])

        def name(m: Mapping[str, Any]) -> str:
            return (f"the odd-head-size {code_text(m['model'])}" if m["model"] in odd else code_text(m["model"]))

        if len(members) == 1:
            family = (f"In the GPT-NeoX family, {name(members[0])} against {code_text(neox['reference'])}: "
                      f"{number_text(members[0]['cka'])} (distance {number_text(members[0]['distance'])})")
        else:
            middle = "".join(f", then {name(m)} ({number_text(m['cka'])})" for m in members[1:-1])
            family = (f"In the GPT-NeoX family against {code_text(neox['reference'])}, {name(members[0])} is closest "
                      f"({number_text(members[0]['cka'])}){middle}, and {name(members[-1])} furthest "
                      f"({number_text(members[-1]['cka'])}, distance {number_text(members[-1]['distance'])})")
    else:
        family = "No GPT-NeoX family pairs were compared"
    return (f"{intro} ({special}{tokens_text(cka['n_tokens'])} tokens). CKA: " + "; ".join(sentences) + ". "
            + family + ".")
