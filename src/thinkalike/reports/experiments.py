"""The experiments of the report, one section each (no Kedro): the question it answers, the pipelines that make its
outputs, the datasets it reads, its figures — each with the claims (by id prefix) of the sentences that read it —
and its key numbers (paths into the collected findings, :func:`thinkalike.reports.findings.collect_findings`).

A claim is shown beside the figure whose ``reads`` prefix matches its id the longest (:func:`claims_by_figure`); the
claims no figure reads follow the figures. A figure is a saved PNG (its catalog name) or, ``interactive``, a plotly
figure drawn from saved tables (:mod:`thinkalike.reports.interactive`; its name is its key in
:data:`INTERACTIVE_INPUTS`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinkalike.reports.findings.claims import value_text

#: The ``cka`` pipeline's interactive layer × layer heatmaps of every pair (drawn from the pairs' ``cka_table`` s).
CKA_HEATMAPS = "cka_heatmaps_plotly"
#: Every pair's measures table (``dims_a``, ``dims_b``, ``options``, ``n_tokens``: :mod:`.measure_space`).
MEASURE_PAIR_TABLES = "models.cka.*.measures_table"


@dataclass(frozen=True)
class Shown:
    """A figure of a section: ``name`` (a PNG's catalog name, or an interactive figure's key), its caption, the
    pipeline that makes what it shows, the claim id prefixes of the sentences shown beside it, and whether it is
    interactive (drawn from saved tables in the page)."""

    name: str
    caption: str
    pipeline: str
    reads: tuple[str, ...] = ()
    interactive: bool = False


@dataclass(frozen=True)
class KeyNumber:
    """A row of a section's key numbers: its label, the findings paths whose values it pools (a number, a span, a
    list of numbers or of names) and how they are written (:func:`thinkalike.reports.findings.claims.value_text`:
    ``d``, ``%``, ``2`` …)."""

    label: str
    paths: tuple[str, ...]
    spec: str = ""


@dataclass(frozen=True)
class Experiment:
    """One section of the report: ``key`` is its anchor and its claims' id prefix, ``section`` its part of the
    collected findings; ``inputs`` the datasets (names or ``fnmatch`` patterns) whose absence it reports."""

    key: str
    title: str
    question: str
    pipelines: tuple[str, ...]
    section: str
    inputs: tuple[str, ...]
    figures: tuple[Shown, ...] = ()
    numbers: tuple[KeyNumber, ...] = ()

    def reads(self, name: str) -> bool:
        """Whether dataset ``name`` is one of this section's inputs (its figures included)."""
        patterns = (*self.inputs, *(figure.name for figure in self.figures if not figure.interactive))
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


#: The interactive figures: key → the datasets (names or patterns) they are drawn from.
INTERACTIVE_INPUTS: dict[str, tuple[str, ...]] = {
    "cka_distance_interactive": ("cka_distances",),
    "cka_heatmaps_interactive": (CKA_HEATMAPS,),
    "measure_matrices_interactive": ("similarity_measures",),
    "mlem_similarity_interactive": ("mlem_feature_similarity", "mlem_rsa_similarity"),
    "timeline_interactive": ("run_timings",),
}

TIMING = "timing"  # the run-timings section: written when the run ends (:mod:`thinkalike.reports.run_timings`)

EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment(
        "zoo",
        "The corpus and the zoo",
        "What was trained on what: does every model of the zoo learn the corpus, its held-out loss well below the "
        "corpus's unigram entropy?",
        ("corpus", "zoo"),
        "zoo",
        ("corpus_statistics", "zoo_summary", "models.*.model_config"),
        (Shown("zoo_training_curves_figure", "Training and held-out loss of every zoo model.", "zoo", ("zoo",)),),
        (
            KeyNumber("sentences in the corpus", ("corpus.n_sentences",), "d"),
            KeyNumber("vocabulary", ("corpus.vocab_size",), "d"),
            KeyNumber("unigram entropy (nats)", ("corpus.unigram_entropy_nats",), "3"),
            KeyNumber("models in the zoo", ("zoo.n_models",), "d"),
            KeyNumber("held-out loss below the unigram entropy", ("zoo.min_improvement", "zoo.max_improvement"), "%"),
            KeyNumber("required margin", ("zoo.margin",), "%"),
        ),
    ),
    Experiment(
        "cka",
        "CKA",
        "How alike are the models' layers by CKA: which pairs of models are closest, and what do seed, depth and "
        "activation change (Brown et al. 2023 §2, fig. 2)?",
        ("cka",),
        "cka",
        ("cka_distances", CKA_HEATMAPS),
        (
            Shown(
                "cka_distance_interactive",
                "CKA distance (arccos of the mean matched-layer CKA) between every pair of "
                "models (Brown et al. 2023 fig. 2).",
                "cka",
                ("cka",),
                interactive=True,
            ),
            Shown(
                "cka_heatmaps_interactive",
                "CKA of every layer of one model against every layer of the other, one "
                "pair at a time (the dropdown), with each cell's confidence interval.",
                "cka",
                interactive=True,
            ),
            Shown(
                "cka_group_curves_figure",
                "CKA by relative depth within and between groups of models (SoLU, GeLU).",
                "cka",
            ),
        ),
        (
            KeyNumber("model pairs compared (each model with itself too)", ("cka.n_pairs",), "d"),
            KeyNumber("pairs of different models", ("cka.n_between_pairs",), "d"),
            KeyNumber("tokens per pair", ("cka.n_tokens",), "d"),
            KeyNumber("blocks of layers within each model (its own CKA, best split)", ("cka.intra_block_runs",)),
            KeyNumber("their block contrast (within − between, CKA)", ("cka.intra_block_contrasts",), "2"),
        ),
    ),
    Experiment(
        "measures",
        "Measures beyond CKA",
        "Do other similarity measures (Procrustes, the CCA family, RSA, nearest neighbours …) tell the same "
        "story as CKA, and which of them can be trusted for what (Klabunde et al. 2025; Ding et al. 2021)?",
        ("cka",),
        "measures",
        (
            "similarity_measures",
            "dimension_shares",
            "rogue_remedies",
            "similarity_calibration",
            "measure_grounding",
            MEASURE_PAIR_TABLES,
        ),
        (
            Shown(
                "measure_matrices_interactive",
                "Each measure's mean over matched layers for every pair of models, one "
                "measure at a time (the dropdown).",
                "cka",
                ("measures.replicas_vs_solu_gelu",),
                interactive=True,
            ),
            Shown(
                "measure_grounding_figure",
                "Which similarity measure registers what (Klabunde et al. 2025; Ding et "
                "al. 2021): layer monotonicity, sensitivity to removed principal components, the null on permuted and "
                "independent rows, specificity and trained vs untrained.",
                "cka",
                ("measures.grounding", "measures.guide"),
            ),
            Shown(
                "dimension_shares_figure",
                "Rogue dimensions: the variance share of each layer's largest one and three dimensions.",
                "cka",
                ("measures.rogue",),
            ),
        ),
        (
            KeyNumber("measures", ("measures.n_measures",), "d"),
            KeyNumber("rows drawn per pair", ("measures.n_tokens",), "d"),
            KeyNumber("largest share of one dimension", ("measures.rogue.max_top1",), "%"),
            KeyNumber("permutations of the calibration", ("measures.calibration.n_permutations",), "d"),
        ),
    ),
    Experiment(
        "stitching",
        "Stitching",
        "Can one model's early layers feed another model's late layers through a trained map φ, and at what cost "
        "in loss (Bansal et al. 2021; Brown et al. 2023 §3)?",
        ("stitching",),
        "stitching",
        ("stitching_penalties", "stitching_phis"),
        (
            Shown(
                "stitching_figure",
                "Stitching penalty of f's early layers into g's late layers, per layer and kind of "
                "φ (Brown et al. 2023 §3, fig. 1).",
                "stitching",
                ("stitching",),
            ),
        ),
        (
            KeyNumber("stitches", ("stitching.n_stitches",), "d"),
            KeyNumber("of them trained", ("stitching.n_trained",), "d"),
            KeyNumber("kinds of φ", ("stitching.kinds",)),
            KeyNumber("training tokens per φ", ("stitching.train_tokens",), "d"),
            KeyNumber("evaluation tokens", ("stitching.eval_tokens",), "d"),
            KeyNumber("self-stitching floors (nats/token)", ("stitching.self.span",), "+3"),
        ),
    ),
    Experiment(
        "scaling",
        "Scaling family",
        "Across a family of widths and depths: does a model's CKA with itself grow with size, are early layers alike "
        "across scale, and is the member off the head-dimension trend an outlier (Brown et al. 2023 §5)?",
        ("scaling", "cka"),
        "scaling",
        ("scaling_summary",),
        (
            Shown(
                "scaling_figure",
                "The width/depth family: intra-model CKA against size (fig. 10), each member's "
                "intermediate-layer CKA against the others with its robust z (fig. 9), early-layer CKA across scale "
                "(fig. 3) and the largest member's blocks.",
                "scaling",
                ("scaling",),
            ),
        ),
        (
            KeyNumber("members", ("scaling.family",)),
            KeyNumber("Spearman of intra-model CKA against size", ("scaling.intra_vs_size_spearman",)),
            KeyNumber("mean intermediate-layer CKA between members", ("scaling.band_mean_between_members",)),
            KeyNumber("outliers", ("scaling.outliers",)),
        ),
    ),
    Experiment(
        "mlem",
        "MLEM",
        "Which linguistic features explain each layer's representation, and which layers are alike by those "
        "features (Jalouzot et al. 2024)?",
        ("mlem",),
        "mlem",
        ("mlem_profiles", "mlem_feature_similarity", "mlem_rsa_similarity"),
        (
            Shown(
                "mlem_similarity_interactive",
                "Feature-based (MLEM, weighted Kendall τ) and RSA similarity of every "
                "pair of layers (Jalouzot et al. 2024).",
                "mlem",
                ("mlem.odd_one_out",),
                interactive=True,
            ),
            Shown("mlem_mds_figure", "MDS of the layers by their MLEM feature importances.", "mlem"),
        ),
        (
            KeyNumber("models", ("mlem.n_models",), "d"),
            KeyNumber("layers", ("mlem.n_layers",), "d"),
            KeyNumber("held-out Spearman per layer", ("mlem.spearman",)),
            KeyNumber("feature on top at most layers", ("mlem.dominant",)),
            KeyNumber("cross-validation folds", ("mlem.n_folds",), "d"),
        ),
    ),
    Experiment(
        "embedding",
        "Embedding space",
        "Read in the embedding space, do parameters and layers line up across models, and can one model's layers "
        "be stitched into another's without training (Dar et al. 2022)?",
        ("embedding",),
        "embedding",
        (
            "embedding_keep_k",
            "embedding_alignment",
            "embedding_feature_fractions",
            "embedding_zero_shot",
            "embedding_finetune_curves",
        ),
        (
            Shown(
                "embedding_alignment_figure",
                "Layers of two seed replicas aligned through the embedding space (Dar et al. 2022 §5.1).",
                "embedding",
                ("embedding.alignment",),
            ),
            Shown(
                "embedding_zero_shot_figure",
                "Zero-shot stitching through the embedding space (Dar et al. 2022 §5.2).",
                "embedding",
                ("embedding.zero_shot",),
            ),
        ),
        (
            KeyNumber("vocabulary", ("embedding.keep_k.V",), "d"),
            KeyNumber("layers on the diagonal, raw", ("embedding.alignment.by_space.raw",), "%"),
            KeyNumber("layers on the diagonal, projected", ("embedding.alignment.by_space.projected",), "%"),
            KeyNumber("fine-tuned accuracy", ("embedding.finetune.accuracy",), "3"),
            KeyNumber("majority rate", ("embedding.finetune.chance",), "3"),
        ),
    ),
    Experiment(
        "nli",
        "NLI",
        "Do fine-tuned copies of one encoder generalize differently out of distribution, and do stitching and CKA "
        "tell the generalizing copies from the heuristic ones (McCoy et al. 2020; Brown et al. 2023 §4)?",
        ("nli",),
        "nli",
        ("models.nli.encoder.model_config", "models.nli.*"),
        (
            Shown(
                "models.nli.accuracy_figure",
                "NLI copies: in-distribution and out-of-distribution (HANS-style) "
                "accuracy, generalizing and heuristic groups (McCoy et al. 2020; Brown et al. 2023 §4).",
                "nli",
                ("nli",),
            ),
            Shown(
                "models.nli.stitching_figure",
                "Identity stitching within and between the NLI groups, per layer.",
                "nli",
                ("nli.stitching",),
            ),
            Shown(
                "models.nli.cka_group_curves_figure",
                "CKA within and between the NLI groups, per layer.",
                "nli",
                ("nli.cka",),
            ),
        ),
        (
            KeyNumber("copies", ("nli.n_copies",), "d"),
            KeyNumber("lexical-overlap rule, test accuracy", ("nli.baseline.test",), "3"),
            KeyNumber("copies' test accuracy", ("nli.test",), "3"),
            KeyNumber("copies' OOD non-entailed accuracy", ("nli.ood_non_entailed",), "3"),
            KeyNumber("mostly heuristic copies", ("nli.n_heuristic",), "d"),
        ),
    ),
    Experiment(
        TIMING,
        "Run timings",
        "Where did the run's time go, pipeline by pipeline, and did the run keep its budget?",
        (),
        TIMING,
        (),
        (
            Shown(
                "timeline_interactive",
                "Every node of the run from its start to its end, one row per pipeline.",
                "(run)",
                ("timing",),
                interactive=True,
            ),
        ),
    ),
)


def experiment_of(name: str) -> Experiment | None:
    """The experiment that reads dataset ``name``: the one that names it, else the first (in the report's order)
    with a pattern that matches it, else ``None``."""
    named = [experiment for experiment in EXPERIMENTS if name in experiment.inputs]
    matched = named or [experiment for experiment in EXPERIMENTS if experiment.reads(name)]
    return matched[0] if matched else None


def png_figures() -> list[Shown]:
    """Every saved PNG the report shows, in the report's order."""
    return [figure for experiment in EXPERIMENTS for figure in experiment.figures if not figure.interactive]


def claims_by_figure(claims: Sequence[Mapping[str, Any]], figures: Sequence[Shown]) -> dict[str | None, list]:
    """The claims grouped by the figure whose ``reads`` prefix matches their id the longest (``None``: no figure
    reads them), each group in the claims' order."""
    grouped: dict[str | None, list] = {}
    for claim in claims:
        matches = [
            (len(prefix), figure.name)
            for figure in figures
            for prefix in figure.reads
            if claim["id"] == prefix or claim["id"].startswith(prefix + ".") or claim["id"].startswith(prefix + "_")
        ]
        grouped.setdefault(max(matches)[1] if matches else None, []).append(claim)
    return grouped


def _values_at(findings: Mapping[str, Any], path: str) -> list[Any]:
    """The values at a dotted path of the findings (a list's items one by one; nothing when the path is absent)."""
    value: Any = findings
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return []
        value = value[key]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return list(value)
    return [value] if isinstance(value, (int, float, str, list)) and not isinstance(value, bool) else []


def key_numbers(experiment: Experiment, findings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The experiment's key numbers as (label, value written) rows, the rows the findings have no value for left out."""
    rows = []
    for number in experiment.numbers:
        values = [value for path in number.paths for value in _values_at(findings, path)]
        if values and all(isinstance(value, str) for value in values):
            text = ", ".join(f"`{value}`" for value in dict.fromkeys(values))
        else:
            text = value_text(values, number.spec) if values else "n/a"
        if text != "n/a":
            rows.append((number.label, text))
    return rows
