"""The papers' scorecard: one row per question the three papers ask, answered by the pre-registered analysis plan
(``conf/base/analysis_plan.yml``, :mod:`thinkalike.analysis.plan`) and the rule (:mod:`thinkalike.analysis.rule`)
over independent replicates (no Kedro).

Each question's **effects** function reads one replicate's collected findings and returns its parts' effects, in the
plan's units, signed and centred so that 0 is the part's reference and > 0 the paper's direction; the plan says which
parts are primary, their δ and the gates they stand behind. :func:`evaluate` decides each part and the row in one
column (``zoo``: seed replicates; ``real``: the real checkpoints' replicates); with one run it gives estimates and no
verdict. The ``alternatives`` of a question (the pilot's estimands: minima over cells, the embeddings' cell
included …) are decided by the same rule into the row's ``robustness``. :func:`render_scorecard` writes the
at-a-glance table, :func:`render_parts` each question's parts, :func:`scorecard_metrics` one run's estimates for
MLflow (``scorecard/<row>.<part index>``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from thinkalike.analysis import rule
from thinkalike.analysis.plan import AnalysisPlan, Column, PlannedColumn, PlannedPart, load_plan, package_plan_path
from thinkalike.measures.blocks import DEFAULT_MIN_CONTRAST
from thinkalike.measures.scaling_summaries import OUTLIER_Z
from thinkalike.reports.findings.forest import forest_svg
from thinkalike.reports.findings.text import as_float, wrap

#: A part's effects in one replicate: label → value (``None``: not measured in that replicate).
Parts = dict[str, float | None]


@dataclass(frozen=True)
class Question:
    """One row: ``key`` (stable, the MLflow name), ``paper`` (who and where), ``question``, ``paper_result`` (what
    the paper found, with its number or figure), ``measure`` (our effect, its units and sign), ``figure`` (where the
    report shows it), ``effects`` (one replicate's findings → its parts), ``unanswered`` (a note: why the default run's
    answer may differ from the paper's, and which configuration asks it better) and ``needs`` (what a run must have
    to ask the question at all: said when it measures nothing, e.g. of the real checkpoints)."""

    key: str
    paper: str
    question: str
    paper_result: str
    measure: str
    figure: str
    effects: Callable[[Mapping[str, Any]], Parts]
    unanswered: str = ""
    needs: str = ""
    alternatives: Callable[[Mapping[str, Any]], Parts] | None = None
    #: The replicates that answer the row's real column: ``real`` (conf/real's checkpoints) or ``real_nli``
    #: (conf/real_nli: fine-tuned copies of one real encoder).
    real_source: str = "real"
    #: The plan's column a run's findings are answered by (default: the zoo's); e.g. the NLI row of a run whose
    #: encoder is a real checkpoint is asked by the real column's parts (its depth's later layers).
    column_of: Callable[[Mapping[str, Any]], Column] | None = None
    #: One run's within-run 95 % intervals of its parts (``within_run(findings) -> {part: (low, high)}``, clustered by
    #: sequence where the method resamples; a part without one is left out): shown beside one run's estimates.
    within_run: Callable[[Mapping[str, Any]], Intervals] | None = None
    #: A confound stated beside the verdict (``confound(replicates) -> sentence``, empty when there is none to state),
    #: e.g. the stitching floors below 0.
    confound: Callable[[Sequence[Mapping[str, Any]]], str] | None = None
    #: The method sections ``effects`` reads (besides the roles and the papers' numbers), the one preferred first: a
    #: run's estimates of the row are made by the pipeline of the first of them the run saves
    #: (:func:`section_estimates`); e.g. the blocks row reads the scaling family, else each model's own CKA matrix.
    sections: tuple[str, ...] = ()


# ---- effects, one replicate's findings at a time (the plan's estimands: conf/base/analysis_plan.yml) ------------------


def _section(findings: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = findings.get(name)
    return value if isinstance(value, Mapping) and "error" not in value and "missing" not in value else {}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _matched_cells(
    findings: Mapping[str, Any], value: str, with_embeddings: bool = False
) -> Iterator[tuple[str, Any, Any]]:
    """Per SoLU/GeLU pair of different seeds, φ kind and diagonal layer cell (post-block cells l ≥ 1 unless
    ``with_embeddings``): its label (``<kind>, <depth> layers, block <l>``) and the stored ``value`` (``excess``,
    ``penalty`` or ``intervals``) of S→G there and of G→S at the transposed cell; cells either direction lacks are
    left out."""
    for pair in _section(findings, "stitching").get("solu_gelu") or []:
        if pair.get("same_seed"):
            continue
        for kind in ("affine_ln", "affine"):
            entry = (pair.get("kinds") or {}).get(kind)
            if not entry or value not in entry["s_to_g"] or value not in entry["g_to_s"]:
                continue
            forward, backward = entry["s_to_g"], entry["g_to_s"]
            reverse = {tuple(layers): v for layers, v in zip(backward["layers"], backward[value])}
            for (lf, lg), there in zip(forward["layers"], forward[value]):
                back = reverse.get((lg, lf))
                if lf != lg or there is None or back is None or (lf == 0 and not with_embeddings):
                    continue
                yield f"{kind}, {pair['depth']} layers, block {lf}", there, back


def _asymmetry_cells(
    findings: Mapping[str, Any], with_embeddings: bool = False, over_floors: bool = True
) -> dict[str, float]:
    """Per φ kind, depth and layer cell (:func:`_matched_cells`): SoLU→GeLU's excess over its floor less GeLU→SoLU's
    at the transposed cell, averaged over the pairs of different seeds at that depth (``over_floors=False``: the raw
    penalties, P(S→G) − P(G→S), the floors not subtracted)."""
    cells: dict[str, list[float]] = {}
    value = "excess" if over_floors else "penalty"
    for label, there, back in _matched_cells(findings, value, with_embeddings):
        cells.setdefault(label, []).append(float(there) - float(back))
    return {label: sum(v) / len(v) for label, v in sorted(cells.items())}


Intervals = dict[str, tuple[float, float]]


def _standard_error(low: Any, high: Any, z: float) -> float | None:
    """A standard error from an interval's ends (``(high − low) / 2z``); None when an end is missing."""
    if low is None or high is None:
        return None
    return (float(high) - float(low)) / (2 * z)


def _asymmetry_within_run(findings: Mapping[str, Any]) -> Intervals:
    """Each asymmetry part's within-run 95 % interval: the estimate ± 1.96 · a bound on its standard error, the sum of
    the standard errors of the four penalties it is made of (S→G, G's floor, G→S, S's floor), each from its
    evaluation-bootstrap interval (resampled batches of held-out sequences: clustered by sequence), averaged over the
    pairs of different seeds and, for a mean over cells, over its cells. A sum of standard errors bounds the standard
    error of the sum whatever their correlation (the penalties share evaluation sequences), so the interval is
    conservative; a part whose penalties lack an interval gets none."""
    stitching = _section(findings, "stitching")
    level = (stitching.get("ci_level") or [0.95])[0]
    z = NormalDist().inv_cdf(0.5 + float(level) / 2)
    bounds: dict[str, list[float]] = {}
    for label, there, back in _matched_cells(findings, "intervals"):
        errors = [_standard_error(ends[i], ends[i + 1], z) for ends in (there, back) for i in (0, 2)]
        if all(e is not None for e in errors):
            bounds.setdefault(label, []).append(sum(e for e in errors if e is not None))
    cell_bounds = {label: sum(v) / len(v) for label, v in bounds.items()}
    for kind in ("affine_ln", "affine"):
        of_kind = [v for label, v in cell_bounds.items() if label.startswith(f"{kind},")]
        if of_kind:
            cell_bounds[f"{kind}, mean over cells"] = sum(of_kind) / len(of_kind)
    estimates = _asymmetry(findings)
    intervals: Intervals = {}
    for label, bound in cell_bounds.items():
        estimate = estimates.get(label)
        if estimate is not None:
            intervals[label] = (estimate - 1.96 * bound, estimate + 1.96 * bound)
    return intervals


def _asymmetry(findings: Mapping[str, Any]) -> Parts:
    """Each post-block cell's asymmetry (:func:`_asymmetry_cells`), and per φ kind the mean over its cells."""
    cells = _asymmetry_cells(findings)
    parts: Parts = dict(cells)
    for kind in ("affine_ln", "affine"):
        parts[f"{kind}, mean over cells"] = _mean([v for k, v in cells.items() if k.startswith(f"{kind},")])
    return parts


def _asymmetry_alternatives(findings: Mapping[str, Any]) -> Parts:
    """The pilot's estimand (the smallest cell, the embeddings' cell included), the mean with that cell, and the
    mean over post-block cells of the raw penalties (no floors: what the self-stitch floors add, :func:`_floor_confound`)."""
    cells = _asymmetry_cells(findings, with_embeddings=True)
    values = [v for k, v in cells.items() if k.startswith("affine_ln,")]
    raw = _asymmetry_cells(findings, over_floors=False)
    return {
        "affine_ln: smallest cell, embeddings included (the pilot's)": min(values) if values else None,
        "affine_ln: mean over cells, embeddings included": _mean(values),
        "affine_ln: mean over cells, raw penalties (floors not subtracted)": _mean(
            [v for k, v in raw.items() if k.startswith("affine_ln,")]
        ),
    }


def _floor_confound(replicates: Sequence[Mapping[str, Any]]) -> str:
    """The self-stitch floors beside the asymmetry's verdict: how many are below 0 (φ trains g's tail further, so a
    floor below 0 is a stitched model better than g itself: the zoo models are not trained to convergence), and what
    they add to the affine_ln asymmetry, floor(SoLU) − floor(GeLU) averaged over its post-block cells (the asymmetry
    over the floors less that of the raw penalties); empty when no replicate has floors."""
    selves = [_section(f, "stitching").get("self") or {} for f in replicates]
    counts = [(int(s["n_negative"]), int(s["n"])) for s in selves if s.get("n")]
    if not counts:
        return ""
    added = []
    for findings in replicates:
        over = [v for k, v in _asymmetry_cells(findings).items() if k.startswith("affine_ln,")]
        raw = [v for k, v in _asymmetry_cells(findings, over_floors=False).items() if k.startswith("affine_ln,")]
        if over and raw:
            added.append(sum(over) / len(over) - sum(raw) / len(raw))
    negative = sorted(n for n, _ in counts)
    totals = sorted({total for _, total in counts})
    text = (
        f"Confound: {negative[0]}–{negative[-1]} of {'/'.join(map(str, totals))} self-stitch floors per replicate are "
        "below 0: φ trains g's tail further (the zoo models are trained for a fixed schedule, not to convergence), so a "
        "floor is a stitched model better than g itself, and the excesses over the floors carry that."
    )
    if added:
        low, high, mean = (f"{v:+.3g}".replace("-", "−") for v in (min(added), max(added), sum(added) / len(added)))
        way = "smaller" if sum(added) < 0 else "larger"
        text += (
            f" The floors add floor(SoLU) − floor(GeLU) to the asymmetry: on affine_ln's post-block cells {low} to "
            f"{high} nats/token over the replicates (mean {mean}), so on average they make it {way}; the raw "
            "penalties' asymmetry, without floors, is a row of the robustness table."
        )
    return text


def _nli_later(findings: Mapping[str, Any]) -> Parts:
    """At each layer at or past 75 % of the encoder's depth: identity stitching's between-group penalty above the
    larger within-group one, and CKA's gap of group means (> 0: between less alike than within)."""
    nli = _section(findings, "nli")
    depth = nli.get("encoder_layers")
    parts: Parts = {}
    if not depth:
        return parts
    for gap in (nli.get("stitching") or {}).get("gaps") or []:
        if int(gap["layer"]) >= LATER_LAYERS * int(depth):
            parts[f"stitching, layer {int(gap['layer'])} of {int(depth)}"] = as_float(gap.get("means"))
    for gap in (nli.get("cka") or {}).get("gaps") or []:
        if float(gap["layer"]) >= LATER_LAYERS:
            parts[f"CKA, depth {round(float(gap['layer']), 3)}"] = as_float(gap.get("means"))
    if all(v is None for v in parts.values()):
        return {}
    return parts


def _nli_column(findings: Mapping[str, Any]) -> Column:
    """The real column for copies of an imported checkpoint (``nli.encoder.source`` not ``zoo``), else the zoo's."""
    return "zoo" if (_section(findings, "nli").get("encoder_source") or "zoo") == "zoo" else "real"


def _nli_alternatives(findings: Mapping[str, Any]) -> Parts:
    """The pilot's estimand: the largest gap over every layer, depth 0 (the shared embeddings) included."""
    nli = _section(findings, "nli")
    parts: Parts = {}
    for label, key in (("stitching", "stitching"), ("CKA", "cka")):
        gaps = [g for g in (as_float(x.get("means")) for x in (nli.get(key) or {}).get("gaps") or []) if g is not None]
        parts[f"{label}: largest gap over all layers (the pilot's)"] = max(gaps) if gaps else None
    return parts


def _fisher(value: float) -> float:
    return math.atanh(min(max(value, -0.999999), 0.999999))


def _early(findings: Mapping[str, Any], with_embeddings: bool = False) -> Parts:
    """At each early post-block relative depth (> 0): the Fisher z of matched early layers' mean CKA over pairs of
    members less the Fisher z of the intermediate band's mean CKA."""
    scaling = _section(findings, "scaling")
    band = as_float(scaling.get("band_mean_between_members"))
    parts: Parts = {}
    for depth, entry in sorted((scaling.get("early") or {}).items(), key=lambda item: float(item[0])):
        if float(depth) == 0 and not with_embeddings:
            continue
        mean = as_float(entry.get("mean"))
        parts[f"relative depth {float(depth):g}"] = (
            None if band is None or mean is None else _fisher(mean) - _fisher(band)
        )
    return parts


def _early_alternatives(findings: Mapping[str, Any]) -> Parts:
    with_zero = _early(findings, with_embeddings=True)
    return {"relative depth 0 (the embeddings), Fisher z": with_zero.get("relative depth 0")}


def _blocks(findings: Mapping[str, Any]) -> Parts:
    """Each member with at least :data:`MIN_BLOCKS` blocks: its best split's block contrast less the mean of the same
    contrast over random layer orders (``block_contrast_null``: the null of blocks of *consecutive* layers). Without
    a scaling family (the real checkpoints): each model's own CKA matrix (``cka.intra_blocks``), the same way. None
    where the null was not measured (outputs saved before it was)."""

    def over_null(contrast: Any, null: Any) -> float | None:
        value, centre = as_float(contrast), as_float(null)
        return None if value is None or centre is None else value - centre

    scaling = _section(findings, "scaling")
    if not scaling:
        intra = _section(findings, "cka").get("intra_blocks") or {}
        return {str(model): over_null(e.get("contrast"), e.get("null")) for model, e in sorted(intra.items())}
    layers = (findings.get("roles") or {}).get("n_layers") or {}
    nulls = scaling.get("block_contrast_null") or {}
    return {
        str(member): over_null(value, nulls.get(member))
        for member, value in sorted((scaling.get("block_contrast") or {}).items())
        if int(layers.get(member, 0)) >= MIN_BLOCKS
    }


def _blocks_alternatives(findings: Mapping[str, Any]) -> Parts:
    """The pilot's estimand: each contrast less the fixed threshold 0.1, and the smallest pair of members less it."""
    scaling = _section(findings, "scaling")
    if not scaling:
        intra = _section(findings, "cka").get("intra_blocks") or {}
        return {
            f"{model} less 0.1 (the pilot's)": None
            if as_float(e.get("contrast")) is None
            else e["contrast"] - DEFAULT_MIN_CONTRAST
            for model, e in sorted(intra.items())
        }
    threshold = as_float(scaling.get("min_contrast"))
    if threshold is None:
        return {}
    layers = (findings.get("roles") or {}).get("n_layers") or {}
    parts: Parts = {
        f"{member} less 0.1 (the pilot's)": None if as_float(value) is None else float(value) - threshold
        for member, value in sorted((scaling.get("block_contrast") or {}).items())
        if int(layers.get(member, 0)) >= MIN_BLOCKS
    }
    pairs = [v for v in (as_float(x) for x in (scaling.get("pair_block_contrast") or {}).values()) if v is not None]
    parts["smallest pair of members less 0.1 (the pilot's)"] = min(pairs) - threshold if pairs else None
    return parts


def _intra_vs_size(findings: Mapping[str, Any]) -> Parts:
    """The least-squares slope of each member's mean off-diagonal intra-model CKA against its rank by size (the
    family's order), CKA per member."""
    scaling = _section(findings, "scaling")
    family = [str(m) for m in scaling.get("family") or []]
    intra = scaling.get("intra_mean") or {}
    ys = [as_float(intra.get(m)) for m in family]
    if len(family) < 3 or any(y is None for y in ys):
        return {}
    xs = list(range(len(family)))
    mx, my = sum(xs) / len(xs), sum(y for y in ys if y is not None) / len(ys)
    slope = sum((x - mx) * ((y or 0.0) - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"slope": slope}


def _outlier(findings: Mapping[str, Any]) -> Parts:
    """The off-trend member's own |robust z| less the outlier threshold; and its same-size twin with the trend's
    head dimension: the twin's mean band CKA less the off-trend member's (> 0: the head dimension is the cause)."""
    twins = _section(findings, "scaling").get("twins") or []
    if not twins:
        return {}
    twin = twins[0]
    z = as_float(twin.get("z_off_trend"))
    closer, own = as_float(twin.get("band_mean_twin")), as_float(twin.get("band_mean_off_trend"))
    return {
        "off-trend member's |z| over 3.5": None if z is None else abs(z) - OUTLIER_Z,
        "why: twin less off-trend band CKA": None if closer is None or own is None else closer - own,
    }


def _outlier_alternatives(findings: Mapping[str, Any]) -> Parts:
    z = [
        abs(v)
        for v in (as_float(x) for x in (_section(findings, "scaling").get("robust_z") or {}).values())
        if v is not None
    ]
    return {"largest |z| of any member over 3.5 (the pilot's)": max(z) - OUTLIER_Z if z else None}


def _keep_k(findings: Mapping[str, Any]) -> Parts:
    """At the k of Dar et al.'s share of V (``k_paper``, 2 %): keep-k with E′ = Eᵀ less with E⁺ (cosine), per
    distribution the mean over models; and the share of (model, distribution) cases with Eᵀ ahead less 1/2
    (secondary: > 0 when more cases are ahead than behind). Where
    the grid has no ``k_paper`` (the real checkpoints' explicit grid), the grid k nearest it."""
    keep = _section(findings, "embedding").get("keep_k") or {}
    entries = {int(entry["k"]): entry for entry in keep.get("by_k") or []}
    target = keep.get("k_paper")
    if not entries or target is None:
        return {}
    k = min(entries, key=lambda grid_k: (abs(grid_k - int(target)), grid_k))
    entry = entries[k]
    parts: Parts = {
        f"{distribution}, k = {k}": as_float(gap)
        for distribution, gap in sorted((entry.get("mean_gap_by_distribution") or {}).items())
    }
    cases = int(entry.get("n_cases") or 0)
    parts[f"share of cases with Eᵀ ahead less 1/2, k = {k}"] = int(entry["n_ahead"]) / cases - 0.5 if cases else None
    return parts


def _keep_k_alternatives(findings: Mapping[str, Any]) -> Parts:
    """The pilot's estimand: the smallest gap over models and distributions at the grid's smallest k above 2 % of V
    (10 on the zoo) and at every grid k below V."""
    keep = _section(findings, "embedding").get("keep_k") or {}
    size = keep.get("V")
    return {
        f"smallest gap, k = {int(entry['k'])} (the pilot's)": as_float(entry.get("min_gap"))
        for entry in keep.get("by_k") or []
        if (not size or int(entry["k"]) < int(size)) and int(entry["k"]) != keep.get("k_paper")
    }


def _kv_overlap(findings: Mapping[str, Any]) -> Parts:
    """Per pair kind (FF key–value, W_V–W_O, W_Q–W_K): the Jaccard overlap of corresponding vectors' top-k tokens
    less that of random pairings, averaged over models and layers."""
    overlap = _section(findings, "embedding").get("overlap") or {}
    return {str(kind): as_float(value) for kind, value in sorted((overlap.get("difference") or {}).items())}


def _finetune(findings: Mapping[str, Any]) -> Parts:
    """Per vector group: the share of task tokens among the top tokens of the fine-tune's weight differences less
    that of random directions, mean over the fine-tuned layers."""
    cells: dict[str, list[float]] = {}
    for cell in (_section(findings, "embedding").get("finetune") or {}).get("cells") or []:
        tuned, random = as_float(cell.get("finetune")), as_float(cell.get("random"))
        if tuned is not None and random is not None:
            cells.setdefault(str(cell["group"]), []).append(tuned - random)
    return {group: sum(v) / len(v) for group, v in sorted(cells.items())}


def _alignment(findings: Mapping[str, Any]) -> Parts:
    """Layer alignment across models: the share of layers matched to their counterpart after projecting into
    embedding space less chance, and less the share without projecting."""
    alignment = _section(findings, "embedding").get("alignment") or {}
    spaces = alignment.get("by_space") or {}
    projected, raw = as_float(spaces.get("projected")), as_float(spaces.get("raw"))
    chance = as_float(alignment.get("chance"))
    if projected is None:
        return {}
    return {
        "projected above chance": None if chance is None else projected - chance,
        "projected above raw": None if raw is None else projected - raw,
    }


def _zero_shot_cases(findings: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], float | None]:
    zero = _section(findings, "embedding").get("zero_shot") or {}
    return list(zero.get("cases") or []), as_float(zero.get("chance"))


def _zero_shot(findings: Mapping[str, Any]) -> Parts:
    """Zero-shot stitching, threshold-free: the stitched models' AUROC less 0.5, mean over the stitched cases; the
    share of cases above 0.5 less 1/2; balanced accuracy less its chance (1 / classes) and accuracy less the majority
    class, means over the cases (secondary). Empty where AUROC was not measured (outputs saved before it was)."""
    cases, chance = _zero_shot_cases(findings)
    balanced_chance = as_float(_section(findings, "embedding").get("zero_shot", {}).get("balanced_chance"))
    aurocs = [a for a in (as_float(c.get("auroc")) for c in cases) if a is not None]
    if not aurocs:
        return {}
    balanced = [b for b in (as_float(c.get("balanced_accuracy")) for c in cases) if b is not None]
    accuracies = [a for a in (as_float(c.get("accuracy")) for c in cases) if a is not None]
    return {
        "mean AUROC over stitches above 0.5": sum(a - 0.5 for a in aurocs) / len(aurocs),
        "share of stitches with AUROC above 0.5, less 1/2": sum(a > 0.5 for a in aurocs) / len(aurocs) - 0.5,
        "mean balanced accuracy above chance": sum(b - balanced_chance for b in balanced) / len(balanced)
        if balanced and balanced_chance is not None
        else None,
        "mean accuracy above majority": sum(a - chance for a in accuracies) / len(accuracies)
        if accuracies and chance is not None
        else None,
    }


def _zero_shot_alternatives(findings: Mapping[str, Any]) -> Parts:
    """The pilot's estimands: accuracy less the majority class, the mean and the best over stitches."""
    cases, chance = _zero_shot_cases(findings)
    accuracies = [a for a in (as_float(c.get("accuracy")) for c in cases) if a is not None]
    if not accuracies or chance is None:
        return {}
    return {
        "mean accuracy over stitches above majority (the pilot's)": sum(a - chance for a in accuracies)
        / len(accuracies),
        "best stitch above majority (the pilot's)": max(accuracies) - chance,
    }


def _spearman(findings: Mapping[str, Any]) -> Parts:
    """MLEM's held-out Spearman, "typically > 0.7 across layers": the mean over every trained model's layers less
    the summary's 0.7."""
    mean = as_float(_section(findings, "mlem").get("spearman_mean_trained"))
    paper = as_float(_section(findings, "literature").get("mlem_spearman"))
    return {} if mean is None or paper is None else {"mean over layers": mean - paper}


def _spearman_alternatives(findings: Mapping[str, Any]) -> Parts:
    """The pilot's estimand: the best layer over every model's layers less 0.7 (a maximum, so it favours the
    claim)."""
    span = _section(findings, "mlem").get("spearman")
    paper = as_float(_section(findings, "literature").get("mlem_spearman"))
    top = as_float(max(span)) if isinstance(span, list) and span else None
    return {} if top is None or paper is None else {"best layer (the pilot's)": top - paper}


def _dominant(findings: Mapping[str, Any]) -> Parts:
    """The dominant feature's weakest lead: its smallest permutation importance where it is on top, less the largest
    importance of a runner-up in any group of layers (Spearman drop)."""
    mlem = _section(findings, "mlem")
    span = mlem.get("dominant_span")
    runners = [as_float(r.get("max")) for r in (mlem.get("runner_up") or {}).values() if isinstance(r, Mapping)]
    known = [r for r in runners if r is not None]
    low = as_float(min(span)) if isinstance(span, list) and span else None
    return {} if low is None or not known else {"lead over the runner-up": low - max(known)}


def _feature_vs_rsa(findings: Mapping[str, Any]) -> Parts:
    """Block structure of each model's layers × layers similarity: the feature-based matrix's best block contrast
    less RSA's (within − between, at most 4 blocks), the mean over the models both measure, and each Mamba's."""
    contrasts = _section(findings, "mlem").get("block_contrast") or {}
    feature, rsa = contrasts.get("feature") or {}, contrasts.get("rsa") or {}
    common = sorted(set(feature) & set(rsa))
    if not common:
        return {}
    parts: Parts = {"mean over models": sum(feature[m] - rsa[m] for m in common) / len(common)}
    for model in (findings.get("roles") or {}).get("mamba") or []:
        if model in feature and model in rsa:
            parts[str(model)] = feature[model] - rsa[model]
    return parts


def _mamba_position(findings: Mapping[str, Any]) -> Parts:
    """Mamba's last layer: word position's permutation importance less the largest other feature's."""
    parts: Parts = {}
    for entry in _section(findings, "mlem").get("mamba") or []:
        importances = {k: as_float(v) for k, v in (entry.get("importances") or {}).items()}
        position = importances.pop("word_position", None)
        others = [v for v in importances.values() if v is not None]
        parts[f"{entry.get('model')}, last layer"] = None if position is None or not others else position - max(others)
    return parts


def _token_structure(findings: Mapping[str, Any]) -> Parts:
    """Per vector group: the part-of-speech coherence of each vector's top-k tokens (the share of pairs of labelled
    tokens with one part of speech) less that of Gaussian vectors read through the same E, mean over models and
    layers."""
    structure = _section(findings, "embedding").get("token_structure") or {}
    return {str(group): as_float(value) for group, value in sorted((structure.get("over_gaussian") or {}).items())}


# ---- gates, one replicate's findings at a time ----------------------------------------------------------------------


def gate_values(findings: Mapping[str, Any]) -> dict[str, float | None]:
    """Each gate's value in one replicate (conf/base/analysis_plan.yml's ``gates``), ``None`` where not measured."""
    zoo = _section(findings, "zoo")
    finetune = _section(findings, "embedding").get("finetune") or {}
    accuracy, chance = as_float(finetune.get("accuracy")), as_float(finetune.get("chance"))
    groups = _section(findings, "nli").get("groups") or {}
    generalizing, heuristic = groups.get("generalizing"), groups.get("heuristic")
    return {
        "zoo_trained": as_float(zoo.get("min_improvement")),
        "finetune_learned": None if accuracy is None or chance is None else accuracy - chance,
        "nli_groups_differ": (float(generalizing[0]) - float(heuristic[1]) if generalizing and heuristic else None),
    }


#: "Later layers": at or past this fraction of the encoder's depth (Brown et al. §4: "exceeds 75 %").
LATER_LAYERS = 0.75
#: Block structure is asked of members with at least this many blocks (a 2- or 3-layer member has too few cells).
MIN_BLOCKS = 4


QUESTIONS: tuple[Question, ...] = (
    Question(
        "brown_solu_gelu",
        "Brown et al. 2023 §3, figs 1 and 6",
        "SoLU→GeLU stitching costs more than GeLU→SoLU",
        "SoLU-into-GeLU stitches incur systematic penalties at every layer, 3- and 4-layer models",
        "each post-block cell's asymmetry over the floors (SoLU→GeLU less GeLU→SoLU), nats/token, mean over the "
        "pairs of different seeds",
        "Stitching",
        _asymmetry,
        alternatives=_asymmetry_alternatives,
        sections=("stitching",),
        needs="two models alike but for their activation function, SoLU and GeLU, and their stitches",
        confound=_floor_confound,
        within_run=_asymmetry_within_run,
    ),
    Question(
        "brown_nli_groups",
        "Brown et al. 2023 §4, figs 2, 7 and 8",
        "Generalizing and heuristic NLI copies are told apart by stitching and by CKA, at later layers",
        "between-group identity stitching costs more than within-group at later layers; CKA distances separate "
        "top-top from top-bottom",
        "at each layer past 75 % of the depth: between-group stitching penalty above the larger within-group one "
        "(accuracy); CKA's gap of group means",
        "NLI",
        _nli_later,
        "the default run's copies are a tiny encoder fine-tuned for 400 steps; conf/gpu's NLI sizes ask it of "
        "larger ones",
        sections=("nli",),
        needs="NLI fine-tunes of one encoder that generalize and that rely on heuristics",
        alternatives=_nli_alternatives,
        real_source="real_nli",
        column_of=_nli_column,
    ),
    Question(
        "brown_early_layers",
        "Brown et al. 2023 §5, fig 3",
        "Early layers are alike across sizes",
        "early layers of pythia-{1b, 1.4b, 2.8b} highly similar to pythia-6.9b's",
        "matched early post-block layers' mean CKA over pairs of members less that of the intermediate band, Fisher z",
        "Scaling family",
        _early,
        sections=("scaling",),
        needs="a width/depth family of one architecture (the zoo's scaling family; conf/pythia)",
        alternatives=_early_alternatives,
    ),
    Question(
        "brown_blocks",
        "Brown et al. 2023 §5, fig 9",
        "Block structure, within a model and between two",
        "blocks of consecutive similar layers (an early block of 3 layers in pythia-{1b, 1.4b, 6.9b})",
        "each member's (≥ 4 blocks) best block contrast (within − between, CKA) less its mean over random layer orders",
        "Scaling family",
        _blocks,
        alternatives=_blocks_alternatives,
        sections=("scaling", "cka"),
        needs="a model of several layers compared with itself",
    ),
    Question(
        "brown_intra_vs_size",
        "Brown et al. 2023 §5, fig 10",
        "Intra-model similarity rises with scale",
        "intra-model CKA of pythia-{70m, 140m, 410m, 1b} higher for larger models",
        "slope of mean off-diagonal intra-model CKA against size rank, CKA per member",
        "Scaling family",
        _intra_vs_size,
        sections=("scaling",),
        needs="a width/depth family of one architecture (the zoo's scaling family; conf/pythia)",
    ),
    Question(
        "brown_outlier",
        "Brown et al. 2023 §5, fig 9 and table 1",
        "One member is an outlier, and why",
        "pythia-2.8b unlike every other member; its head dimension is unexpectedly small (table 1)",
        "the off-trend member's |robust z| less 3.5; the same-size twin with the trend's head dimension against the "
        "off-trend member (band CKA)",
        "Scaling family",
        _outlier,
        sections=("scaling",),
        needs="a width/depth family of one architecture (the zoo's scaling family; conf/pythia)",
        alternatives=_outlier_alternatives,
    ),
    Question(
        "dar_tokens",
        "Dar et al. 2022 §3",
        "Parameters read as token pairs carry structure",
        "W_VO, W_QK, FF keys and values read in the vocabulary give coherent token lists (examples)",
        "a stand-in on the grammar: part-of-speech coherence of each vector's top-k tokens less that of Gaussian "
        "vectors through the same E, per group, mean over models and layers",
        "Embedding space",
        _token_structure,
        sections=("embedding",),
        needs="a model whose tokens carry the grammar's parts of speech: a zoo model (its vocabulary is the corpus "
        "tokenizer's); a real tokenizer's tokens are not labelled",
    ),
    Question(
        "dar_keep_k",
        "Dar et al. 2022 App. A",
        "keep-k: Eᵀ as a right inverse against E⁺",
        "at small k, Eᵀ ahead of E⁺ (0.83 vs 0.10 at k = 1000 of GPT-2's 50,257)",
        "keep-k gap Eᵀ − E⁺ (cosine) at k = 2 % of V, per distribution the mean over models; the share of cases "
        "with Eᵀ ahead",
        "Embedding space",
        _keep_k,
        alternatives=_keep_k_alternatives,
        sections=("embedding",),
        needs="a model with an unembedding",
    ),
    Question(
        "dar_kv_overlap",
        "Dar et al. 2022 App. B, fig 6",
        "FF keys and values, W_V and W_O, W_Q and W_K overlap in embedding space more than random pairs",
        "corresponding pairs' top-k token sets overlap more than random pairs' (Jaccard; GPT-2 medium, k = 100)",
        "Jaccard of corresponding vectors' top-k tokens less random pairings', mean over models and layers",
        "Embedding space",
        _kv_overlap,
        sections=("embedding",),
        needs="a model with an unembedding",
    ),
    Question(
        "dar_finetune",
        "Dar et al. 2022 §4.1",
        "Fine-tune directions read as task tokens",
        "the top tokens of fine-tuning's weight differences are the task's (sentiment words); they classify",
        "per vector group, the share of task tokens among the differences' top tokens less random directions'",
        "Embedding space",
        _finetune,
        sections=("embedding",),
        needs="a model and its fine-tune on a classification task",
    ),
    Question(
        "dar_alignment",
        "Dar et al. 2022 §4.2",
        "Layer alignment across models",
        "parameters of two models align layer by layer once projected into embedding space",
        "share of layers matched to their counterpart less chance, and less the unprojected share",
        "Embedding space",
        _alignment,
        sections=("embedding",),
        needs="two models that share one vocabulary (the projection goes through their common embedding space)",
    ),
    Question(
        "dar_zero_shot",
        "Dar et al. 2022 §4.3",
        "Zero-shot stitching",
        "a classifier's layers stitched onto another model through the embedding spaces work without training",
        "zero-shot stitched AUROC less 0.5, mean over stitches; the share above 0.5; balanced accuracy and accuracy",
        "Embedding space",
        _zero_shot,
        alternatives=_zero_shot_alternatives,
        sections=("embedding",),
        needs="two models that share one vocabulary, one of them with a classifier",
    ),
    Question(
        "mlem_spearman",
        "Jalouzot et al. 2024",
        "MLEM's held-out Spearman above 0.7",
        "typically > 0.7 across BERT, GPT-2 and Mamba layers",
        "mean held-out Spearman over every trained model's layers less 0.7",
        "MLEM",
        _spearman,
        "the zoo's models are d ≤ 96; the paper's are BERT-size (see the real checkpoints' column)",
        alternatives=_spearman_alternatives,
        sections=("mlem",),
        needs="a model whose layers MLEM fits on labelled sentences",
    ),
    Question(
        "mlem_dominant_feature",
        "Jalouzot et al. 2024",
        "Which feature dominates which layers",
        "feature importance profiles name the features that drive each layer's distances",
        "dominant feature's smallest importance where it tops less the largest runner-up importance",
        "MLEM",
        _dominant,
        sections=("mlem",),
        needs="a model whose layers MLEM fits on labelled sentences",
    ),
    Question(
        "mlem_feature_vs_rsa",
        "Jalouzot et al. 2024",
        "Feature-based similarity against RSA: their blocks",
        "feature-based similarity matrices show block structures RSA does not",
        "a model's best block contrast (within − between) in the feature-based similarity less in RSA's: the mean "
        "over models, and Mamba's",
        "MLEM",
        _feature_vs_rsa,
        sections=("mlem",),
        needs="a model whose layers MLEM fits on labelled sentences",
    ),
    Question(
        "mlem_mamba_position",
        "Jalouzot et al. 2024",
        "Mamba's word position in later layers",
        "word position becomes the dominant feature in Mamba's later layers",
        "word position's importance at Mamba's last layer less the largest other feature's",
        "MLEM",
        _mamba_position,
        sections=("mlem",),
        needs="a Mamba model",
    ),
)


# ---- answers: the plan's parts decided by the rule (thinkalike.analysis.rule) ---------------------------------------

RULE = (
    "per part, over n independent replicates: reproduced when the mean's 95 % t-interval lies above 0 (> 0: the "
    "paper's direction), opposite when below, absent when the 90 % interval lies inside ±δ (two one-sided tests "
    "against the plan's smallest effect of interest), else inconclusive (with the n that would decide it); the row, "
    "over its primary parts: not testable when a gate fails, reproduced when every one is, partly when Holm's "
    "step-down at 0.025 rejects one, not reproduced when each is opposite or absent, else inconclusive"
)

#: What the real-model column of the scorecard answers on (``conf/real``: :mod:`thinkalike.models.packaged`).
REAL_CHECKPOINTS = (
    "SmolLM2-135M-Instruct (GGUF Q4_1, dequantised; 30 blocks, d = 576, V = 49,152) and all-MiniLM-L6-v2 "
    "(distilled, sentence-tuned BERT; 6 blocks, d = 384), python -m thinkalike.replicates --env real"
)

#: What the real column's NLI row is asked of (conf/real_nli's replicates).
REAL_NLI_COPIES = (
    "copies of all-MiniLM-L6-v2 (6 blocks, d = 384) fine-tuned on the grammar's NLI pairs, "
    "python -m thinkalike.replicates --env real_nli"
)

#: The word of a one-run answer: estimates, no verdict.
ONE_RUN = "one run"


def _excluded(findings: Mapping[str, Any]) -> bool:
    """The plan's exclusion: a replicate whose run failed a node."""
    return bool((findings.get("timing") or {}).get("failed_nodes"))


def _interval(values: Sequence[float]) -> list[float] | None:
    return [float(v) for v in values] if values and all(math.isfinite(v) for v in values) else None


def _part_entry(
    result: rule.PartResult | None, planned: PlannedPart, effects: Sequence[float | None], primary: bool, why: str = ""
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "effects": [None if e is None else float(e) for e in effects],
        "primary": primary,
        "reference": planned.reference,
        "delta": planned.delta,
        "basis": planned.basis,
    }
    if result is None:
        known = [float(e) for e in effects if e is not None]
        entry |= {"mean": known[0] if len(known) == 1 and len(effects) == 1 else None, "verdict": None, "why": why}
        return entry
    entry |= {
        "mean": result.mean,
        "ci95": _interval(result.ci95),
        "ci90": _interval(result.ci90),
        "p_one_sided": result.p,
        "verdict": result.verdict,
        "smaller_than_delta": result.smaller_than_delta,
    }
    if result.fact:
        entry["fact"] = True
    if result.gate:
        entry["gate"] = result.gate
    if result.verdict == rule.INCONCLUSIVE and not result.gate:
        entry["n_needed"] = result.n_needed
    if result.why:
        entry["why"] = result.why
    return entry


def _unmeasured(planned: PlannedPart, why: str) -> rule.PartResult:
    nan = (math.nan, math.nan)
    return rule.PartResult((), planned.delta, math.nan, nan, nan, rule.INCONCLUSIVE, why=why)


def _gates(names: Sequence[str], replicates: Sequence[Mapping[str, Any]], plan: AnalysisPlan) -> list[rule.GateResult]:
    decided = []
    for name in names:
        values = [gate_values(f).get(name) for f in replicates]
        known = [v for v in values if v is not None]
        if len(known) < len(values):
            decided.append(
                rule.GateResult(
                    name, tuple(known), plan.gates[name].threshold, math.nan, (math.nan, math.nan), rule.GATE_UNDECIDED
                )
            )
        else:
            decided.append(rule.decide_gate(name, known, plan.gates[name].threshold))
    return decided


def _estimate_text(entry: Mapping[str, Any]) -> str:
    mean = entry.get("mean")
    if mean is None:
        return "not measured"
    ci = entry.get("ci95")
    text = f"{mean:+.3g}" + (f" [{ci[0]:+.3g}, {ci[1]:+.3g}]" if ci and ci[0] != ci[1] else "")
    within = entry.get("within_run")
    if within and not ci:
        text += f" [{within[0]:+.3g}, {within[1]:+.3g}] within the run"
    return text.replace("-", "−")


def evaluate(
    question: Question, replicates: Sequence[Mapping[str, Any]], plan: AnalysisPlan, column: Column = "zoo"
) -> dict[str, Any]:
    """One row's answer in one column: ``parts`` (the plan's, each with ``effects`` one per replicate, ``mean``,
    ``ci95``, ``ci90``, ``delta``, ``verdict``, ``smaller_than_delta`` and, where they apply, ``gate``, ``n_needed``,
    ``fact``), ``primary``, ``gates``, ``robustness`` (the alternative specifications under the same rule),
    ``verdict`` (starting with one of :data:`~thinkalike.analysis.rule.ROW_VERDICTS`, then each primary part's),
    ``verdict_word``, ``ours`` (the primary parts' estimates in words), ``n_replicates`` and ``n_excluded``. With
    one replicate: estimates only, no verdict (``verdict_word`` :data:`ONE_RUN`)."""
    kept = [f for f in replicates if not _excluded(f)]
    n = len(kept)
    base: dict[str, Any] = {"n_replicates": n, "n_excluded": len(replicates) - n}
    planned = plan.questions[question.key].column(column) if question.key in plan.questions else None
    per_replicate = [question.effects(f) for f in kept]
    if planned is None or not any(parts.get(name) is not None for parts in per_replicate for name in planned.primary):
        why = f"needs {question.needs}" if question.needs else "not measured"
        earlier = [question.alternatives(f) for f in kept] if question.alternatives else []
        if planned is not None and any(value is not None for parts in earlier for value in parts.values()):
            # the question was asked, by the pilot's estimand: replicates collected before the plan's
            why = (
                "these replicates were collected before the plan's estimand and measured only the pilot's; "
                "new replicates of this column measure it"
            )
        if planned is None:
            why += " (the plan asks nothing of this column)"
        return {
            **base,
            "parts": {},
            "primary": list(planned.primary) if planned else [],
            "gates": {},
            "ours": f"not measured: {why}",
            "verdict": f"{rule.NOT_TESTABLE}: {why}",
            "verdict_word": rule.NOT_TESTABLE,
        }
    gates = _gates(planned.gates, kept, plan) if n >= 2 else []
    parts: dict[str, dict[str, Any]] = {}
    results: dict[str, rule.PartResult] = {}
    for name, part in planned.parts.items():
        effects = [p.get(name) for p in per_replicate]
        primary = name in planned.primary
        measured = sum(e is not None for e in effects)
        if n < 2 or measured < 2:
            why = "one run: an estimate, no verdict" if n < 2 else f"measured in {measured} of {n} replicates"
            parts[name] = _part_entry(None, part, effects, primary, why)
            if n >= 2:
                results[name] = _unmeasured(part, why)
                parts[name]["verdict"] = rule.INCONCLUSIVE
            continue
        results[name] = rule.decide_part([float(e) for e in effects if e is not None], part.delta, gates)
        parts[name] = _part_entry(results[name], part, effects, primary)
        if measured < n:  # decided on the replicates that measured it, and said so
            parts[name]["why"] = f"measured in {measured} of {n} replicates; decided on those"
    ours = "; ".join(f"{name} {_estimate_text(parts[name])}" for name in planned.primary)
    base |= {"estimand": " ".join(planned.estimand.split()), "scale": planned.scale}
    answer = {**base, "parts": parts, "part_order": list(parts), "primary": list(planned.primary), "ours": ours}
    answer["gates"] = {
        g.name: {
            "values": list(g.values),
            "threshold": g.threshold,
            "mean": None if math.isnan(g.mean) else g.mean,
            "ci95": _interval(g.ci95),
            "verdict": g.verdict,
        }
        for g in gates
    }
    if n < 2:
        within = question.within_run(kept[0]) if question.within_run and kept else {}
        for name, interval in within.items():
            if name in parts:
                parts[name]["within_run"] = [float(interval[0]), float(interval[1])]
        answer["ours"] = "; ".join(f"{name} {_estimate_text(parts[name])}" for name in planned.primary)
        return {**answer, "verdict": f"{ONE_RUN}: estimates, no verdict", "verdict_word": ONE_RUN}
    row = rule.decide_row({name: results[name] for name in planned.primary})
    answer["holm"] = list(row.holm)
    answer["robustness"] = _robustness(question, kept, planned)
    confound = question.confound(kept) if question.confound else ""
    if confound:
        answer["confound"] = confound
    return {**answer, "verdict": row.text, "verdict_word": row.verdict}


def _robustness(question: Question, replicates: Sequence[Mapping[str, Any]], planned: PlannedColumn) -> dict[str, Any]:
    """The verdict under each alternative specification (the pilot's estimands), with the first primary part's δ."""
    if question.alternatives is None:
        return {}
    delta = planned.parts[planned.primary[0]].delta
    per_replicate = [question.alternatives(f) for f in replicates]
    out: dict[str, Any] = {}
    for name in dict.fromkeys(k for parts in per_replicate for k in parts):
        effects = [p.get(name) for p in per_replicate]
        if any(e is None for e in effects):
            continue
        result = rule.decide_part([float(e) for e in effects if e is not None], delta)
        out[name] = {"mean": result.mean, "ci95": _interval(result.ci95), "verdict": rule.part_text(result)}
    return out


def scorecard(
    replicates: Sequence[Mapping[str, Any]],
    real: Sequence[Mapping[str, Any]] | None = None,
    plan: AnalysisPlan | None = None,
    real_nli: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Every row of :data:`QUESTIONS` evaluated on the replicates' findings by the plan (default: the repository's
    ``conf/base/analysis_plan.yml``): ``key``, ``paper``, ``question``, ``paper_result``, ``measure``, ``figure``,
    ``rule``, ``plan`` (the paper's sentence, location and number) and :func:`evaluate`'s fields. With ``real`` each row
    also has ``real``: the same row in the real checkpoints' column, by the same rule, with ``checkpoints``; a row
    whose :attr:`Question.real_source` is ``real_nli`` is answered there from ``real_nli`` (conf/real_nli's
    replicates) instead, when given."""
    plan = plan or load_plan(package_plan_path())
    rows = []
    for question in QUESTIONS:
        planned = plan.questions.get(question.key)
        row = {
            "key": question.key,
            "paper": question.paper,
            "question": question.question,
            "paper_result": question.paper_result,
            "measure": question.measure,
            "rule": RULE,
            "figure": question.figure,
            "plan": planned.paper.model_dump() if planned else None,
            **evaluate(question, replicates, plan, _column(question, replicates)),
        }
        if question.real_source == "real_nli" and real_nli:
            row["real"] = {**evaluate(question, real_nli, plan, "real"), "checkpoints": REAL_NLI_COPIES}
        elif real:
            row["real"] = {**evaluate(question, real, plan, "real"), "checkpoints": REAL_CHECKPOINTS}
        rows.append(row)
    return rows


def _column(question: Question, replicates: Sequence[Mapping[str, Any]]) -> Column:
    """The plan's column the replicates answer a row by: :attr:`Question.column_of` when every replicate agrees on
    one, else the zoo's."""
    if question.column_of is None or not replicates:
        return "zoo"
    columns = {question.column_of(findings) for findings in replicates}
    return columns.pop() if len(columns) == 1 else "zoo"


def _ordered(answer: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """An answer's parts in the plan's order (a JSON file written with sorted keys loses the dict's order)."""
    parts = answer["parts"]
    return [(name, parts[name]) for name in answer.get("part_order") or list(parts)]


def exploratory(rows: Sequence[Mapping[str, Any]], limit: int = 20) -> list[dict[str, Any]]:
    """The plan's exploratory observations: the secondary parts of the zoo column, in plan order, at most ``limit``;
    each with its ``mean``, ``ci95``, ``n`` and the size of the family it was picked from (its question's parts)."""
    picked: list[dict[str, Any]] = []
    for row in rows:
        for name, part in _ordered(row):
            if not part["primary"] and part.get("mean") is not None and len(picked) < limit:
                picked.append(
                    {
                        "question": row["key"],
                        "part": name,
                        "mean": part["mean"],
                        "ci95": part.get("ci95"),
                        "n": row["n_replicates"],
                        "family": len(row["parts"]),
                    }
                )
    return picked


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_cell(answer: Mapping[str, Any]) -> str:
    word = answer["verdict_word"]
    primary = [answer["parts"][p] for p in answer.get("primary") or [] if p in answer["parts"]]
    reproduced = sum(p.get("verdict") == rule.REPRODUCED for p in primary)
    failed = [
        (name, gate) for name, gate in (answer.get("gates") or {}).items() if gate.get("verdict") == rule.GATE_FAILS
    ]
    if word == rule.NOT_TESTABLE and failed:  # the gate's measured value, not a count of parts nobody could decide
        return f"**{word}**: " + "; ".join(
            f"gate `{name}` {_interval_text(gate)} against {gate['threshold']:g}" for name, gate in failed
        )
    counted = f" ({reproduced} of {len(primary)} primary parts reproduced)" if primary and word != ONE_RUN else ""
    return f"**{word}**{counted}"


def _interval_text(gate: Mapping[str, Any]) -> str:
    """A gate's mean and 95 % interval."""
    mean, ci = gate.get("mean"), gate.get("ci95")
    if mean is None:
        return "not measured"
    return (f"{mean:.3g}" + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "")).replace("-", "−")


def render_scorecard(rows: Sequence[Mapping[str, Any]]) -> str:
    """The scorecard at a glance: one line per question (its verdict, the primary parts' estimates with their 95 %
    intervals, their forest plot in units of δ, n), a second table for the real checkpoints' column when it was
    run, and the rule beneath."""
    lines = [
        "| question | verdict | estimate [95 % interval] of the primary parts | forest (δ units) | n |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f"{row['question']} ({row['paper']})",
                    _verdict_cell(row),
                    row["ours"],
                    _primary_forest(row),
                    str(row["n_replicates"]),
                )
            )
            + " |"
        )
    real = [row for row in rows if row.get("real")]
    if real:
        lines += [
            "",
            "Real checkpoints (" + REAL_CHECKPOINTS + "):",
            "",
            "| question | verdict | estimate [95 % interval] | forest (δ units) | n |",
            "|---|---|---|---|---|",
        ]
        for row in real:
            answer = row["real"]
            lines.append(
                "| "
                + " | ".join(
                    _cell(c)
                    for c in (
                        row["question"]
                        + (
                            ""
                            if answer.get("checkpoints", REAL_CHECKPOINTS) == REAL_CHECKPOINTS
                            else f" (on {answer['checkpoints']})"
                        ),
                        _verdict_cell(answer),
                        answer["ours"],
                        _primary_forest(answer),
                        str(answer["n_replicates"]),
                    )
                )
                + " |"
            )
    return (
        "\n".join(lines)
        + f"\n\n{wrap('The rule (conf/base/analysis_plan.yml, thinkalike.analysis.rule): ' + RULE + '.')}\n"
    )


def render_run_beside_committed(rows: Sequence[Mapping[str, Any]], committed: Mapping[str, Any] | None) -> str:
    """One run's scorecard: per question this run's estimates of the primary parts (one run has no verdict) beside
    the verdict of the committed replicates (``committed``: docs/findings.json), labelled as theirs; without a
    committed document, :func:`render_scorecard`."""
    theirs = {row["key"]: row for row in (committed or {}).get("scorecard") or []}
    if not theirs:
        return render_scorecard(rows)
    commit = str((committed or {}).get("git_commit") or "an uncommitted tree")[:12]
    lines = [
        "| question | this run: estimate of the primary parts | the committed replicates' verdict | their n |",
        "|---|---|---|---|",
    ]
    for row in rows:
        other = theirs.get(row["key"])
        lines.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f"{row['question']} ({row['paper']})",
                    row["ours"],
                    _verdict_cell(other) if other else "— (not in docs/findings.json)",
                    str(other["n_replicates"]) if other else "—",
                )
            )
            + " |"
        )
    return (
        "\n".join(lines)
        + "\n\n"
        + wrap(
            f"This run's estimates (one run: no verdict) beside the verdicts of the committed replicates, which are "
            f"theirs, not this run's: docs/findings.json of commit {commit}, by the rule: {RULE}."
        )
        + "\n"
    )


def _primary_forest(answer: Mapping[str, Any]) -> str:
    """The forest plot of an answer's measured primary parts (empty when none was measured)."""
    parts = answer.get("parts") or {}
    named = [(name, parts[name]) for name in answer.get("primary") or [] if name in parts]
    return forest_svg(named) if any(part.get("mean") is not None for _, part in named) else ""


def _paper_text(row: Mapping[str, Any]) -> str:
    paper = row.get("plan") or {}
    if not paper:
        return f"{row['paper']}: {row['paper_result']}."
    return f"The paper ({paper['location']}): “{paper['sentence']}” (its number: {paper['number']})."


#: What 2 cores allow: the replicates one such machine runs overnight (hours of its time).
OVERNIGHT_HOURS = 12.0


def beyond_two_cores(row: Mapping[str, Any], replicate_seconds: float | None) -> str:
    """Where a row's largest ``n_needed`` costs more than :data:`OVERNIGHT_HOURS` of this machine at the replicates'
    median run time: a sentence saying so and naming what would decide it; empty otherwise."""
    needed = max((int(part.get("n_needed") or 0) for part in row["parts"].values()), default=0)
    n = int(row["n_replicates"])
    if not replicate_seconds or needed <= n:
        return ""
    hours = (needed - n) * replicate_seconds / 3600
    if hours <= OVERNIGHT_HOURS:
        return ""
    return (
        f"Deciding every part would take about {needed - n} more replicates (n needed up to {needed}), about "
        f"{hours:.0f} h of these 2 cores at the median replicate's {replicate_seconds / 60:.0f} min: more than a "
        f"night ({OVERNIGHT_HOURS:g} h). A machine with more cores runs them side by side "
        "(`python -m thinkalike.replicates --count … --parallel …`); conf/gpu's larger sizes, for a GPU, may "
        "narrow the spread the n needed rests on (not measured yet)."
    )


def render_parts(rows: Sequence[Mapping[str, Any]], replicate_seconds: float | None = None) -> str:
    """Each question's parts: effect per replicate, mean, 95 % and 90 % intervals, δ, verdict (and the gates);
    ``replicate_seconds``: the replicates' median run time, for :func:`beyond_two_cores`."""
    blocks = []
    for row in rows:
        if not row["parts"]:
            continue
        lines = [
            f"### {row['question']}",
            "",
            wrap(_paper_text(row)),
            "",
            wrap(
                f"Ours ({row['n_replicates']} replicates): {row.get('estimand') or row['measure']}. Scale: "
                f"{row.get('scale', 'n/a')}. Verdict: {row['verdict']}."
            ),
            "",
            *([wrap(row["confound"]), ""] if row.get("confound") else []),
            forest_svg(_ordered(row)),
            "",
            wrap(
                "Each part's replicates (dots), 95 % interval (bar) and mean (tick) in units of its δ; grey: ±δ; the "
                "line: 0, the part's reference. Rows in the table's order."
            ),
            "",
            "| part | effects | mean [95 %] | 90 % | δ | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for name, part in _ordered(row):
            effects = ", ".join("–" if e is None else f"{e:+.3g}" for e in part["effects"]).replace("-", "−")
            ci90 = part.get("ci90")
            verdict = part.get("verdict") or "—"
            if part.get("smaller_than_delta"):
                verdict += ", smaller than δ"
            if verdict == rule.ABSENT and part["basis"].startswith("resolution"):
                verdict += " (below our resolution)"
            if part.get("n_needed"):
                verdict += f" (n needed ≈ {part['n_needed']})"
            label = f"**{name}**" if part["primary"] else name
            lines.append(
                "| "
                + " | ".join(
                    _cell(c)
                    for c in (
                        label,
                        effects,
                        _estimate_text(part),
                        f"[{ci90[0]:+.3g}, {ci90[1]:+.3g}]".replace("-", "−") if ci90 else "—",
                        f"{part['delta']:g}",
                        verdict,
                    )
                )
                + " |"
            )
        beyond = beyond_two_cores(row, replicate_seconds)
        if beyond:
            lines += ["", wrap(beyond)]
        for name, gate in (row.get("gates") or {}).items():
            lines += [
                "",
                wrap(f"Gate `{name}`: {_interval_text(gate)} against {gate['threshold']:g}: {gate['verdict']}."),
            ]
        robustness = row.get("robustness") or {}
        if robustness:
            lines += ["", "| robustness: the pilot's specification | mean [95 %] | verdict |", "|---|---|---|"]
            lines += [
                "| " + " | ".join(_cell(c) for c in (name, _estimate_text(alt), alt["verdict"])) + " |"
                for name, alt in sorted(robustness.items())
            ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def row_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """MLflow metrics of one run's scorecard: each measured part's estimate, ``scorecard/<key>.<part index>`` — no
    verdict (one run has none). One ``/`` only: MLflow's UI draws a chart section per prefix before the last ``/``,
    so the scorecard stays one section."""
    metrics: dict[str, float] = {}
    for row in rows:
        for index, part in enumerate(row["parts"].values()):
            if part.get("mean") is not None:
                metrics[f"scorecard/{row['key']}.{index}"] = float(part["mean"])
    return metrics


#: The codes of the row verdicts on the replicates' summary run.
VERDICT_CODES = {rule.REPRODUCED: 1.0, rule.PARTLY: 0.5, rule.INCONCLUSIVE: 0.0, rule.NOT_REPRODUCED: -1.0}


def verdict_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The replicates' summary run's MLflow metrics: ``verdict/<row>`` (1 reproduced, 0.5 partly, 0 inconclusive,
    −1 not reproduced; a row that is not testable is left out)."""
    return {
        f"verdict/{row['key']}": VERDICT_CODES[row["verdict_word"]]
        for row in rows
        if row["verdict_word"] in VERDICT_CODES
    }


def scorecard_metrics(findings: Mapping[str, Any]) -> dict[str, float]:
    """:func:`row_metrics` of one run's scorecard (its collected ``findings``)."""
    return row_metrics(scorecard([findings]))


def committed_effects(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, list[float]], dict[str, float]]:
    """The zoo column's per-replicate effects of every measured part (``<row key>/<part>`` → effects) and each one's
    stated resolution (its δ when the plan's basis is resolution, else 0): what ``--check`` holds a rerun to."""
    effects: dict[str, list[float]] = {}
    resolutions: dict[str, float] = {}
    for row in rows:
        for name, part in row["parts"].items():
            values = part["effects"]
            if values and all(v is not None for v in values):
                effects[f"{row['key']}/{name}"] = [float(v) for v in values]
                resolutions[f"{row['key']}/{name}"] = part["delta"] if part["basis"].startswith("resolution") else 0.0
    return effects, resolutions


def run_estimates(findings: Mapping[str, Any], plan: AnalysisPlan | None = None) -> dict[str, float]:
    """One run's estimate of every part it measures (``<row key>/<part>`` → value)."""
    rows = scorecard([findings], plan=plan)
    return {
        f"{row['key']}/{name}": float(part["mean"])
        for row in rows
        for name, part in row["parts"].items()
        if part.get("mean") is not None
    }


#: The findings every question may read besides its method's section: the zoo's roles and the papers' numbers.
CONTEXT = ("roles", "literature")


def section_estimates(
    section: str, findings: Mapping[str, Any], context: Mapping[str, Any], saved: Sequence[str], plan=None
) -> list[dict[str, Any]]:
    """One method pipeline's per-run estimates: for each question whose first section among ``saved`` (the sections
    the run saves) is ``section``, each part measured from that section's ``findings`` and the ``context`` (the
    :data:`CONTEXT` findings) — ``{"question", "part", "estimate", "within_run"}``, the last the part's within-run
    95 % interval ``[low, high]`` where the method has one, else None. Over a run's sections these are
    :func:`run_estimates`."""
    asked = [q for q in QUESTIONS if next((s for s in q.sections if s in saved), None) == section]
    if not asked:
        return []
    rows = {
        row["key"]: row
        for row in scorecard([{**{k: context[k] for k in CONTEXT if k in context}, section: findings}], plan=plan)
    }
    return [
        {"question": q.key, "part": name, "estimate": float(part["mean"]), "within_run": part.get("within_run")}
        for q in asked
        for name, part in rows[q.key]["parts"].items()
        if part.get("mean") is not None
    ]


def scorecard_description(findings: Mapping[str, Any]) -> str:
    """One run's scorecard in a few lines (the MLflow run's description): per question it measured, this run's
    primary estimates; no verdict (one run has none: the replicates' summary run holds them)."""
    measured = [row for row in scorecard([findings]) if row["parts"]]
    lines = [
        f"**Scorecard of this run** ({len(measured)} of {len(QUESTIONS)} questions measured; estimates, no verdict):"
    ]
    lines += [f"- {row['question']}: {row['ours']}" for row in measured]
    return "\n".join(lines)
