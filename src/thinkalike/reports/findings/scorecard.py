"""The papers' scorecard: one row per question the three papers ask, its verdict decided by a rule fixed here before
any number is read (no Kedro).

A row's **effect** is measured in each replicate, in the units its sentence quotes, signed so that > 0 is the paper's
direction. A row may have several **parts** (φ kinds × depths, the early depths, …), each an effect. Each part's
verdict over the replicates (:func:`part_verdict`), with ``σ`` the effect's standard deviation across replicates
(:func:`~thinkalike.reports.findings.claims.noise_scale`) and ``F`` = :data:`~thinkalike.reports.findings.claims.
NOISE_FACTOR`:

* **reproduced**: the effect is > ``F·σ`` in every replicate;
* **not reproduced**: it is < ``−F·σ`` in every replicate;
* **inconclusive**: otherwise (within its noise, of either sign across replicates, or the same in every replicate:
  no spread to weigh it against); with one run (no ``σ``): the sign of that run, said to be one run's.

The row's verdict (:func:`row_verdict`): **reproduced** when every part is; **partly** when some part is; **not
reproduced** when no part is and some part is not reproduced; **inconclusive** otherwise (and when the default run
measures nothing for it: the row says why and which configuration can).

Rows are :data:`QUESTIONS`; :func:`scorecard` evaluates them on the replicates' findings (each
:func:`~thinkalike.reports.findings.collect_findings`' dict), :func:`render_scorecard` writes the markdown table and
:func:`scorecard_metrics` the numbers MLflow logs (``scorecard/<row>.effect_min`` …).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinkalike.measures.blocks import DEFAULT_MIN_CONTRAST
from thinkalike.measures.scaling_summaries import OUTLIER_Z
from thinkalike.reports.findings.claims import NOISE_FACTOR, SAME_MARGIN, noise_scale
from thinkalike.reports.findings.stitching import cell_asymmetries
from thinkalike.reports.findings.text import as_float, wrap

REPRODUCED = "reproduced"
PARTLY = "partly"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE)

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


# ---- effects, one replicate's findings at a time --------------------------------------------------------------------


def _section(findings: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = findings.get(name)
    return value if isinstance(value, Mapping) and "error" not in value and "missing" not in value else {}


def _asymmetry(findings: Mapping[str, Any]) -> Parts:
    """Per φ kind (affine + LayerNorm, affine) and depth: over the SoLU/GeLU pairs with different seeds, the
    smallest layer cell's asymmetry (SoLU→GeLU's excess over its floor less GeLU→SoLU's), nats/token."""
    parts: dict[str, list[float]] = {}
    for pair in _section(findings, "stitching").get("solu_gelu") or []:
        if pair.get("same_seed"):
            continue
        for kind in ("affine_ln", "affine"):
            if kind in (pair.get("kinds") or {}):
                parts.setdefault(f"{kind}, {pair['depth']} layers", []).extend(cell_asymmetries(pair["kinds"][kind]))
    return {label: (min(cells) if cells else None) for label, cells in sorted(parts.items())}


def _nli(findings: Mapping[str, Any]) -> Parts:
    """Between the generalizing and heuristic copies at the layer where they differ most: identity stitching's
    penalty between the groups above the larger within-group one, and CKA within the smaller group below the
    between-group one (each the gap of their means, the claims' ``means`` gaps)."""
    nli = _section(findings, "nli")
    parts: Parts = {}
    for label, key in (("stitching (accuracy)", "stitching"), ("CKA", "cka")):
        gaps = [as_float(g.get("means")) for g in (nli.get(key) or {}).get("gaps") or []]
        known = [g for g in gaps if g is not None]
        parts[label] = max(known) if known else None
    return parts


def _early(findings: Mapping[str, Any]) -> Parts:
    """At each early relative depth: matched early layers' mean CKA over pairs of members less the mean CKA of
    their intermediate-layer band."""
    scaling = _section(findings, "scaling")
    band = as_float(scaling.get("band_mean_between_members"))
    return {
        f"relative depth {depth}": (None if band is None or as_float(e.get("mean")) is None else e["mean"] - band)
        for depth, e in sorted((scaling.get("early") or {}).items())
    }


def _blocks(findings: Mapping[str, Any]) -> Parts:
    """Block contrast (within − between of the best split, CKA) less the threshold: the smallest over the members
    (within a model) and over the pairs of members (matched blocks between two). Without a scaling family (the
    real checkpoints): each model's own CKA matrix, one part per model (``cka.intra_blocks``)."""
    scaling = _section(findings, "scaling")
    if not scaling:
        intra = _section(findings, "cka").get("intra_blocks") or {}
        return {
            f"within {model} ({entry['n_layers']} layers)": (
                None if as_float(entry.get("contrast")) is None else entry["contrast"] - DEFAULT_MIN_CONTRAST
            )
            for model, entry in sorted(intra.items())
        }
    threshold = as_float(scaling.get("min_contrast"))
    members = [as_float(v) for v in (scaling.get("block_contrast") or {}).values()]
    pairs = [as_float(v) for v in (scaling.get("pair_block_contrast") or {}).values()]

    def least(values: list[float | None]) -> float | None:
        if threshold is None or not values or any(v is None for v in values):
            return None
        return min(v for v in values if v is not None) - threshold

    return {"within every member": least(members), "between every pair of members": least(pairs)}


def _intra_vs_size(findings: Mapping[str, Any]) -> Parts:
    """The least-squares slope of each member's mean off-diagonal intra-model CKA against its rank by size (the
    family's order), CKA per member."""
    scaling = _section(findings, "scaling")
    family = [str(m) for m in scaling.get("family") or []]
    intra = scaling.get("intra_mean") or {}
    ys = [as_float(intra.get(m)) for m in family]
    if len(family) < 3 or any(y is None for y in ys):
        return {"slope": None}
    xs = list(range(len(family)))
    mx, my = sum(xs) / len(xs), sum(y for y in ys if y is not None) / len(ys)
    slope = sum((x - mx) * ((y or 0.0) - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"slope": slope}


def _outlier(findings: Mapping[str, Any]) -> Parts:
    """The largest |robust z| of a member's intermediate-layer CKA against the others less the outlier threshold;
    and the off-trend member's twin (same size, the trend's head dimension) against it: the twin's mean band CKA
    less the off-trend member's (> 0: the head dimension is the cause)."""
    scaling = _section(findings, "scaling")
    z = [as_float(v) for v in (scaling.get("robust_z") or {}).values()]
    known = [abs(v) for v in z if v is not None]
    parts: Parts = {"an outlier (largest |z| − threshold)": (max(known) - OUTLIER_Z) if known else None}
    twins = scaling.get("twins") or []
    if twins:
        twin = twins[0]
        closer, own = as_float(twin.get("band_mean_twin")), as_float(twin.get("band_mean_off_trend"))
        parts["why: the head dimension (twin − off-trend band CKA)"] = (
            None if closer is None or own is None else closer - own
        )
    return parts


def _keep_k(findings: Mapping[str, Any]) -> Parts:
    """At every grid k below the vocabulary: keep-k with E′ = Eᵀ less with E⁺, the smallest gap over models and
    distributions (cosine)."""
    keep = _section(findings, "embedding").get("keep_k") or {}
    size = keep.get("V")
    return {
        f"k = {int(entry['k'])}": as_float(entry.get("min_gap"))
        for entry in keep.get("by_k") or []
        if not size or int(entry["k"]) < int(size)
    }


def _kv_overlap(findings: Mapping[str, Any]) -> Parts:
    """Per pair kind (FF key–value, W_V–W_O, W_Q–W_K): the Jaccard overlap of corresponding vectors' top-k tokens
    less that of random pairings, averaged over models and layers."""
    overlap = _section(findings, "embedding").get("overlap") or {}
    return {str(kind): as_float(value) for kind, value in sorted((overlap.get("difference") or {}).items())}


def _finetune(findings: Mapping[str, Any]) -> Parts:
    """Fine-tune differences: the mean over vector groups and layers of the share of task tokens among the top
    tokens of the weight differences less that of random directions; and the accuracy of classifying with them
    less the majority class."""
    finetune = _section(findings, "embedding").get("finetune") or {}
    cells = [c for c in finetune.get("cells") or [] if as_float(c.get("finetune")) is not None]
    accuracy, chance = as_float(finetune.get("accuracy")), as_float(finetune.get("chance"))
    return {
        "task tokens above random": (sum(c["finetune"] - c["random"] for c in cells) / len(cells) if cells else None),
        "classifier above majority": None if accuracy is None or chance is None else accuracy - chance,
    }


def _alignment(findings: Mapping[str, Any]) -> Parts:
    """Layer alignment across models: the share of layers matched to their counterpart after projecting into
    embedding space less chance, and less the share without projecting."""
    alignment = _section(findings, "embedding").get("alignment") or {}
    spaces = alignment.get("by_space") or {}
    projected, raw, chance = (
        as_float(spaces.get("projected")),
        as_float(spaces.get("raw")),
        as_float(alignment.get("chance")),
    )
    return {
        "projected above chance": None if projected is None or chance is None else projected - chance,
        "projected above raw": None if projected is None or raw is None else projected - raw,
    }


def _zero_shot(findings: Mapping[str, Any]) -> Parts:
    """Zero-shot stitching: the best stitched model's accuracy less the majority class."""
    zero = _section(findings, "embedding").get("zero_shot") or {}
    accuracies = [as_float(c.get("accuracy")) for c in zero.get("cases") or []]
    known = [a for a in accuracies if a is not None]
    chance = as_float(zero.get("chance"))
    return {"best stitch above majority": (max(known) - chance) if known and chance is not None else None}


def _spearman(findings: Mapping[str, Any]) -> Parts:
    """MLEM's best held-out Spearman over every model's layers less the paper's 0.7."""
    mlem = _section(findings, "mlem")
    span = mlem.get("spearman")
    paper = as_float(_section(findings, "literature").get("mlem_spearman"))
    top = as_float(max(span)) if isinstance(span, list) and span else None
    return {"best layer": None if top is None or paper is None else top - paper}


def _dominant(findings: Mapping[str, Any]) -> Parts:
    """The dominant feature's weakest lead: its smallest permutation importance where it is on top, less the largest
    importance of a runner-up in any group of layers (Spearman drop)."""
    mlem = _section(findings, "mlem")
    span = mlem.get("dominant_span")
    runners = [as_float(r.get("max")) for r in (mlem.get("runner_up") or {}).values() if isinstance(r, Mapping)]
    known = [r for r in runners if r is not None]
    low = as_float(min(span)) if isinstance(span, list) and span else None
    return {"lead over the runner-up": None if low is None or not known else low - max(known)}


def _feature_vs_rsa(findings: Mapping[str, Any]) -> Parts:
    """Block structure of each model's layers × layers similarity: the feature-based matrix's best block contrast
    less RSA's (within − between, at most 4 blocks), the mean over the models both measure."""
    contrasts = _section(findings, "mlem").get("block_contrast") or {}
    feature, rsa = contrasts.get("feature") or {}, contrasts.get("rsa") or {}
    common = sorted(set(feature) & set(rsa))
    if not common:
        return {"mean over models": None}
    parts: Parts = {"mean over models": sum(feature[m] - rsa[m] for m in common) / len(common)}
    for model in (findings.get("roles") or {}).get("mamba") or []:  # the paper's case: Mamba's later-layer block
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
        parts[f"{entry.get('model')} layer {entry.get('layer')}"] = (
            None if position is None or not others else position - max(others)
        )
    return parts


def _token_structure(findings: Mapping[str, Any]) -> Parts:
    """Per vector group: the part-of-speech coherence of each vector's top-k tokens (the share of pairs of labelled
    tokens with one part of speech) less that of Gaussian vectors read through the same E — the structure the
    parameters add to what E's geometry alone gives — mean over models and layers."""
    structure = _section(findings, "embedding").get("token_structure") or {}
    return {str(group): as_float(value) for group, value in sorted((structure.get("over_gaussian") or {}).items())}


QUESTIONS: tuple[Question, ...] = (
    Question(
        "brown_solu_gelu",
        "Brown et al. 2023 §3, figs 1 and 6",
        "SoLU→GeLU stitching costs more than GeLU→SoLU",
        "SoLU-into-GeLU stitches incur systematic penalties at every layer, 3- and 4-layer models",
        "smallest layer cell's asymmetry over the floors (SoLU→GeLU less GeLU→SoLU), nats/token, per φ kind and "
        "depth, different seeds",
        "Stitching",
        _asymmetry,
        needs="two models alike but for their activation function, SoLU and GeLU, and their stitches",
    ),
    Question(
        "brown_nli_groups",
        "Brown et al. 2023 §4, figs 2, 7 and 8",
        "Generalizing and heuristic NLI copies are told apart by stitching and by CKA, at later layers",
        "between-group identity stitching costs more than within-group at later layers; CKA distances separate "
        "top-top from top-bottom",
        "largest gap over layers: between-group stitching penalty above the larger within-group one (accuracy); "
        "between-group CKA below the smaller within-group one",
        "NLI",
        _nli,
        "the default run's copies are a tiny encoder fine-tuned for 400 steps; conf/gpu's NLI sizes ask it of "
        "larger ones",
        needs="NLI fine-tunes of one encoder that generalize and that rely on heuristics",
    ),
    Question(
        "brown_early_layers",
        "Brown et al. 2023 §5, fig 3",
        "Early layers are alike across sizes",
        "early layers of pythia-{1b, 1.4b, 2.8b} highly similar to pythia-6.9b's",
        "matched early layers' mean CKA over pairs of members less the mean CKA of their intermediate layers",
        "Scaling family",
        _early,
        needs="a width/depth family of one architecture (the zoo's scaling family; conf/pythia)",
    ),
    Question(
        "brown_blocks",
        "Brown et al. 2023 §5, fig 9",
        "Block structure, within a model and between two",
        "blocks of consecutive similar layers (an early block of 3 layers in pythia-{1b, 1.4b, 6.9b})",
        "smallest block contrast (within − between, CKA) less the threshold, over members and over pairs",
        "Scaling family",
        _blocks,
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
        needs="a width/depth family of one architecture (the zoo's scaling family; conf/pythia)",
    ),
    Question(
        "brown_outlier",
        "Brown et al. 2023 §5, fig 9 and table 1",
        "One member is an outlier, and why",
        "pythia-2.8b unlike every other member; its head dimension is unexpectedly small (table 1)",
        "largest |robust z| less the threshold; the same-size twin with the trend's head dimension against the "
        "off-trend member (band CKA)",
        "Scaling family",
        _outlier,
        needs="a width/depth family of one architecture (the zoo's scaling family; conf/pythia)",
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
        needs="a model whose tokens carry the grammar's parts of speech: a zoo model (its vocabulary is the corpus "
        "tokenizer's); a real tokenizer's tokens are not labelled",
    ),
    Question(
        "dar_keep_k",
        "Dar et al. 2022 App. A",
        "keep-k: Eᵀ as a right inverse against E⁺",
        "at small k, Eᵀ ahead of E⁺ (0.83 vs 0.10 at k = 1000 of GPT-2's 50,257)",
        "smallest keep-k gap Eᵀ − E⁺ over models and distributions (cosine), per k below the vocabulary",
        "Embedding space",
        _keep_k,
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
        needs="a model with an unembedding",
    ),
    Question(
        "dar_finetune",
        "Dar et al. 2022 §4.1",
        "Fine-tune directions read as task tokens",
        "the top tokens of fine-tuning's weight differences are the task's (sentiment words); they classify",
        "share of task tokens among the differences' top tokens less random directions'; accuracy less majority",
        "Embedding space",
        _finetune,
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
        needs="two models that share one vocabulary (the projection goes through their common embedding space)",
    ),
    Question(
        "dar_zero_shot",
        "Dar et al. 2022 §4.3",
        "Zero-shot stitching",
        "a classifier's layers stitched onto another model through the embedding spaces work without training",
        "best zero-shot stitched accuracy less the majority class",
        "Embedding space",
        _zero_shot,
        needs="two models that share one vocabulary, one of them with a classifier",
    ),
    Question(
        "mlem_spearman",
        "Jalouzot et al. 2024",
        "MLEM's held-out Spearman above 0.7",
        "typically > 0.7 across BERT, GPT-2 and Mamba layers",
        "best held-out Spearman over every model's layers less 0.7",
        "MLEM",
        _spearman,
        "the zoo's models are d ≤ 96; the paper's are BERT-size (see the real checkpoints' column)",
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
        needs="a Mamba model",
    ),
)


# ---- verdicts -------------------------------------------------------------------------------------------------------


def part_verdict(effects: Sequence[float | None]) -> tuple[str, str]:
    """One part's verdict over replicates and why (module docstring)."""
    known = [float(e) for e in effects if e is not None and math.isfinite(float(e))]
    if not known:
        return INCONCLUSIVE, "not measured"
    if len(known) < len(effects):
        return INCONCLUSIVE, f"measured in {len(known)} of {len(effects)} replicates"
    noise = noise_scale(known)
    if noise is None:  # one run
        word = REPRODUCED if known[0] > 0 else NOT_REPRODUCED if known[0] < 0 else INCONCLUSIVE
        return word, "one run: no spread across replicates to weigh it against"
    if noise <= SAME_MARGIN * max(1.0, *(abs(v) for v in known)):
        return INCONCLUSIVE, "the same in every replicate: no spread to weigh it against (no independent draws)"
    bar = NOISE_FACTOR * noise
    if min(known) > bar:
        return REPRODUCED, f"> {NOISE_FACTOR:g} × spread in every replicate"
    if max(known) < -bar:
        return NOT_REPRODUCED, f"< −{NOISE_FACTOR:g} × spread in every replicate"
    if min(known) > 0 or max(known) < 0:
        return INCONCLUSIVE, f"one sign, but within {NOISE_FACTOR:g} × its spread"
    return INCONCLUSIVE, "changes sign across replicates"


def row_verdict(parts: Mapping[str, str]) -> str:
    """The row's verdict from its parts' (module docstring)."""
    words = list(parts.values())
    if words and all(w == REPRODUCED for w in words):
        return REPRODUCED
    if REPRODUCED in words:
        return PARTLY
    if NOT_REPRODUCED in words:
        return NOT_REPRODUCED
    return INCONCLUSIVE


RULE = (
    f"per part: reproduced when the effect (> 0: the paper's direction) exceeds {NOISE_FACTOR:g} × its standard "
    f"deviation across replicates in every replicate, not reproduced when it is below −{NOISE_FACTOR:g} × it in every "
    "replicate, else inconclusive; the row: reproduced when every part is, partly when some part is, not reproduced "
    "when none is and some part is not reproduced, else inconclusive"
)


def _range(values: Sequence[float]) -> list[float]:
    return [round(min(values), 6), round(max(values), 6)]


def evaluate(question: Question, replicates: Sequence[Mapping[str, Any]], *, zoo: bool = True) -> dict[str, Any]:
    """One row's answer on the replicates' findings: ``parts`` (label → ``effects`` one per replicate, ``range``,
    ``noise``, ``verdict``, ``why``), ``ours`` (the parts' ranges in words), ``verdict`` (starting with one of
    :data:`VERDICTS`, then why), ``verdict_word`` and ``n_replicates``. A row with no part measured is inconclusive
    and says what the question :attr:`~Question.needs`; ``zoo``: the findings are the zoo's (the row's
    :attr:`~Question.unanswered` note, which is about the zoo, is added)."""
    per_replicate = [question.effects(findings) for findings in replicates]
    labels = list(dict.fromkeys(label for parts in per_replicate for label in parts))
    parts: dict[str, dict[str, Any]] = {}
    for label in labels:
        effects = [parts_of.get(label) for parts_of in per_replicate]
        verdict, why = part_verdict(effects)
        known = [float(e) for e in effects if e is not None]
        parts[label] = {
            "effects": [None if e is None else round(float(e), 6) for e in effects],
            "range": _range(known) if known else None,
            "noise": None if (n := noise_scale(known)) is None else round(n, 6),
            "verdict": verdict,
            "why": why,
        }
    word = row_verdict({label: p["verdict"] for label, p in parts.items()})
    if not any(p["range"] is not None for p in parts.values()):
        word = INCONCLUSIVE
        reason = f"not asked: needs {question.needs}" if question.needs else "not measured by this run"
        verdict = f"{INCONCLUSIVE}: {reason}"
    else:
        counts = "; ".join(f"{label}: {p['verdict']} ({p['why']})" for label, p in parts.items())
        verdict = f"{word} — {counts}"
        if zoo and question.unanswered and word != REPRODUCED:
            verdict += f"; note: {question.unanswered}"
    return {
        "ours": "; ".join(f"{label} {_span_text(p['range'])}" for label, p in parts.items() if p["range"] is not None)
        or "not measured",
        "verdict": verdict,
        "verdict_word": word,
        "parts": parts,
        "n_replicates": len(replicates),
    }


#: What the real-model column of the scorecard answers on (``conf/real``: :mod:`thinkalike.models.packaged`).
REAL_CHECKPOINTS = (
    "SmolLM2-135M-Instruct (GGUF Q4_1, dequantised; 30 blocks, d = 576, V = 49,152) and all-MiniLM-L6-v2 "
    "(distilled, sentence-tuned BERT; 6 blocks, d = 384), python -m thinkalike.replicates --env real"
)


def scorecard(
    replicates: Sequence[Mapping[str, Any]], real: Sequence[Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Every row of :data:`QUESTIONS` evaluated on the replicates' findings: ``key``, ``paper``, ``question``,
    ``paper_result``, ``measure``, ``figure``, ``rule`` and :func:`evaluate`'s fields. With ``real`` (the findings of
    the real checkpoints' replicates, ``conf/real``) each row also has ``real``: the same row evaluated on them, by
    the same rule, with ``checkpoints`` (:data:`REAL_CHECKPOINTS`)."""
    rows = []
    for question in QUESTIONS:
        row = {
            "key": question.key,
            "paper": question.paper,
            "question": question.question,
            "paper_result": question.paper_result,
            "measure": question.measure,
            "rule": RULE,
            "figure": question.figure,
            **evaluate(question, replicates),
        }
        if real:
            row["real"] = {**evaluate(question, real, zoo=False), "checkpoints": REAL_CHECKPOINTS}
        rows.append(row)
    return rows


def _span_text(span: Sequence[float]) -> str:
    low, high = span
    text = f"{low:+.3g}" if f"{low:+.3g}" == f"{high:+.3g}" else f"{low:+.3g} to {high:+.3g}"
    return text.replace("-", "−")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_cell(answer: Mapping[str, Any]) -> str:
    return f"**{answer['verdict_word']}**{answer['verdict'][len(answer['verdict_word']) :]}"


def render_scorecard(rows: Sequence[Mapping[str, Any]]) -> str:
    """The scorecard as one markdown table (question, paper, ours, verdict, figure; with a real-model column, the
    real checkpoints' answer and verdict beside the zoo's) and the rule beneath it."""
    n = rows[0]["n_replicates"] if rows else 0
    real = [row["real"] for row in rows if row.get("real")]
    header = ["question", "the paper", "ours (range over replicates)", "verdict"]
    if real:
        header += ["real checkpoints: ours and verdict"]
    lines = ["| " + " | ".join([*header, "shown in"]) + " |", "|" + "---|" * (len(header) + 1)]
    for row in rows:
        cells = [
            f"{row['question']} ({row['paper']})",
            row["paper_result"],
            f"{row['measure']}: {row['ours']}",
            _verdict_cell(row),
        ]
        if real:
            answer = row.get("real") or {}
            cells.append(
                f"{answer['ours']}: {_verdict_cell(answer)}"
                if answer and answer["ours"] != "not measured"
                else _verdict_cell(answer)
                if answer
                else "not run"
            )
        cells.append(row["figure"])
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    counted = "one run" if n == 1 else f"{n} independent replicates"
    sentence = f"The rule, fixed in code before the numbers are read ({counted}): {RULE}."
    if real:
        m = real[0]["n_replicates"]
        sentence += (
            f" The real checkpoints' column applies the same rule to {m} replicate{'s' if m != 1 else ''} of "
            f"{REAL_CHECKPOINTS} (each replicate draws other held-out sentences and other samples; the checkpoints "
            "are fixed)."
        )
    return "\n".join(lines) + f"\n\n{wrap(sentence)}\n"


def row_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """MLflow metrics of scorecard rows: per row ``scorecard/<key>.verdict`` (1 reproduced, 0.5 partly, 0
    inconclusive, −1 not reproduced) and per part ``scorecard/<key>.<part index>.effect_min`` (the smallest effect
    over the replicates)."""
    codes = {REPRODUCED: 1.0, PARTLY: 0.5, INCONCLUSIVE: 0.0, NOT_REPRODUCED: -1.0}
    metrics: dict[str, float] = {}
    for row in rows:
        metrics[f"scorecard/{row['key']}.verdict"] = codes[row["verdict_word"]]
        for index, part in enumerate(row["parts"].values()):
            if part["range"] is not None:
                metrics[f"scorecard/{row['key']}.{index}.effect_min"] = float(part["range"][0])
    return metrics


def scorecard_metrics(findings: Mapping[str, Any]) -> dict[str, float]:
    """:func:`row_metrics` of one run's scorecard (its collected ``findings``)."""
    return row_metrics(scorecard([findings]))
