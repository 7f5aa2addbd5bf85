"""The findings page's deviations table: per experiment, what the paper did against what these replicates did.

The paper's side quotes the papers (``shared/papers``; Jalouzot et al. from the generated summary there); ours is
read from one replicate's collected findings (numbers of the saved outputs, never typed in), so the table moves
with the configuration. Estimand deviations (which cells, layers, nulls) are the plan's and stand in each question's
estimand; this table is the set-up: models, data, steps, copies, k/V, φ kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: (experiment, the paper's set-up as it states it)
PAPERS: dict[str, str] = {
    "stitching": "Brown et al. §3: 3- and 4-layer SoLU and GeLU models of Nanda (9.4 M and 13 M parameters) trained "
    "on the Pile; φ a learned linear layer, fitted on the Pile's validation set",
    "nli": "Brown et al. §4: 100 fine-tunes of one pretrained BERT on MNLI (McCoy et al. 2020), differing in head "
    "initialisation and batch order; HANS lexical overlap out of distribution; the top 10 against the bottom 10; "
    'the copies\' MNLI accuracy "near identical" (Brown et al. §4), their HANS lexical-overlap non-entailed '
    'accuracy 0.05–0.55 (McCoy et al. 2020; Brown et al.: "up to 50 %")',
    "scaling": "Brown et al. §5: Pythia 70m–6.9b (deduped), trained on the deduplicated Pile",
    "keep_k": "Dar et al. App. A: GPT-2 (V = 50,257), keep-k at k = 1000 (2 % of V) and below",
    "embedding": "Dar et al. §3–4: GPT-2 medium read through its embedding matrix; the fine-tune of 12-layer GPT-2 base "
    "with a classification head on IMDB sentiment",
    "mlem": "Jalouzot et al. (the generated summary): BERT, GPT-2 and Mamba layers on controlled sentences",
}


def _section(findings: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = findings.get(name)
    return value if isinstance(value, Mapping) and "error" not in value and "missing" not in value else {}


def _span(values: Sequence[Any]) -> str:
    numbers = sorted({int(v) for v in values if v is not None})
    if not numbers:
        return "?"
    return str(numbers[0]) if numbers[0] == numbers[-1] else f"{numbers[0]}–{numbers[-1]}"


def _proportions(values: Sequence[Any] | None) -> str:
    """A range of proportions (lowest and highest) to 3 decimals, "?" when not measured."""
    known = sorted(float(v) for v in values or [] if v is not None)
    return "?" if not known else f"{known[0]:.3f}–{known[-1]:.3f}"


def _stitching(findings: Mapping[str, Any]) -> str | None:
    stitching, roles = _section(findings, "stitching"), findings.get("roles") or {}
    pairs = roles.get("solu_gelu") or []
    if not stitching or not pairs:
        return None
    steps = (_section(findings, "zoo").get("steps")) or {}
    models = sorted({p["solu"] for p in pairs} | {p["gelu"] for p in pairs})
    return (
        f"{len(models)} zoo SoLU and GeLU models of {_span([p['depth'] for p in pairs])} layers, trained "
        f"{_span([steps.get(m) for m in models])} steps on the grammar's corpus; φ kinds "
        f"{', '.join(stitching.get('kinds') or [])}, {_span(stitching.get('steps') or [])} steps, "
        f"{stitching.get('phi_seeds', '?')} φ seed(s) a cell, evaluated on "
        f"{_span(stitching.get('n_eval_sequences') or [])} held-out sequences"
    )


def _nli(findings: Mapping[str, Any]) -> str | None:
    nli = _section(findings, "nli")
    if not nli or not nli.get("n_copies"):
        return None
    source = nli.get("encoder_source") or "zoo"
    encoder = "zoo encoder pretrained on the grammar" if source == "zoo" else f"pretrained checkpoint ({source})"
    return (
        f"{nli['n_copies']} fine-tunes ({_span(nli.get('finetune_steps') or [])} steps) of one "
        f"{nli.get('encoder_layers', '?')}-layer {encoder}; the grammar's NLI pairs "
        f"({nli.get('counterexample_fraction', '?')} of them counterexamples to the overlap heuristic); HANS-style "
        "subcases out of distribution; groups by OOD non-entailed accuracy; the copies' in-distribution accuracy "
        f"{_proportions(nli.get('test'))}, their OOD non-entailed accuracy {_proportions(nli.get('ood_non_entailed'))}"
    )


def _scaling(findings: Mapping[str, Any]) -> str | None:
    family = [str(m) for m in _section(findings, "scaling").get("family") or []]
    layers = (findings.get("roles") or {}).get("n_layers") or {}
    if not family:
        return None
    return (
        f"{len(family)} GPT-NeoX zoo members of {_span([layers.get(m) for m in family])} layers (and a twin of the "
        "off-trend member), trained on the grammar's corpus"
    )


def _keep_k(findings: Mapping[str, Any]) -> str | None:
    keep = _section(findings, "embedding").get("keep_k") or {}
    size, k = keep.get("V"), keep.get("k_paper")
    if not size:
        return None
    share = f"k = {k} ({100 * k / size:.1f} % of V)" if k else f"the grid's smallest k, {keep.get('k_small')}"
    return f"the zoo's models (V = {size}) at {share}; the grid {', '.join(str(x) for x in keep.get('ks') or [])}"


def _embedding(findings: Mapping[str, Any]) -> str | None:
    keep = _section(findings, "embedding").get("keep_k") or {}
    finetune = _section(findings, "embedding").get("finetune") or {}
    if not keep:
        return None
    task = finetune.get("task") or "a grammar feature"
    return f"the zoo's models through their {keep.get('V', '?')}-token embedding matrix; fine-tunes on {task}"


def _mlem(findings: Mapping[str, Any]) -> str | None:
    mlem = _section(findings, "mlem")
    if not mlem.get("n_models"):
        return None
    return f"{mlem['n_models']} zoo models ({mlem.get('n_layers', '?')} layers in all) on the grammar's sentences"


OURS: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "stitching": _stitching,
    "nli": _nli,
    "scaling": _scaling,
    "keep_k": _keep_k,
    "embedding": _embedding,
    "mlem": _mlem,
}


def deviations_table(findings: Mapping[str, Any], real_nli: Mapping[str, Any] | None = None) -> str:
    """The Markdown table: one row per experiment, the paper's set-up against this replicate's (``findings``: one
    replicate's collected findings); "not run" where the replicate has no such section. ``real_nli``: one of
    conf/real_nli's replicates, whose NLI set-up is a row of its own (the real column's NLI row)."""
    lines = ["| experiment | the paper | ours |", "|---|---|---|"]
    for key, paper in PAPERS.items():
        ours = OURS[key](findings) or "not run in these replicates"
        lines.append(f"| {key.replace('_', '-')} | {paper} | {ours} |")
        if key == "nli" and real_nli is not None:
            lines.append(f"| nli (real column) | {paper} | {_nli(real_nli) or 'not run'} |")
    return "\n".join(lines)


def amendments_text(amendments: Sequence[Any], earlier: Sequence[Mapping[str, Any]]) -> str:
    """The plan's amendments in words (each :class:`~thinkalike.analysis.plan.Amendment`) and the plans the document
    was collected under before them (sha256 and commit); empty without amendments."""
    if not amendments:
        return ""
    said = " ".join(
        f"{a.date}, {a.question} ({a.column} column): {' '.join(a.what.split())}; fixed before {a.before}."
        for a in amendments
    )
    before = "; ".join(f"sha256 {e['sha256'][:12]}… at commit {str(e.get('git_commit'))[:7]}" for e in earlier)
    return (
        f"Amendments to the plan after a column's deciding replicates began, each with the data it was fixed "
        f"before: {said}"
        + (f" Replicates kept in this document were run under the plans before them ({before})." if before else "")
    )
