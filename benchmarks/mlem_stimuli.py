"""MLEM held-out Spearman against the stimulus design, on the zoo models of a finished default run.

The paper (Jalouzot et al. 2024) reports held-out Spearman typically > 0.7 on word representations
of controlled stimuli; the default run's evaluation sentences give 0.22–0.64. This script extracts
each chosen zoo model's residual streams on several stimulus sets (corpus tokenizer, the run's
``n_ctx``), fits MLEM at word level with the ``mlem`` section's fit settings on ``--max-stimuli``
words of each, and prints the mean held-out Spearman over layers and models per design and model
family (with the lowest and highest layer). A design is a stimulus set, a layout and a feature set:

stimulus sets (all sentences are the grammar's language, all models were trained on it)
  ``corpus``              the run's evaluation texts: held-out grammar sentences (full lexicon, the
                          grammar's natural co-occurrence of constructions, adjectives, determiner variety)
  ``natural-small``       fresh grammar sentences drawn as the corpus is, with 2 animate nouns, 2
                          transitive and 2 intransitive verbs and no inanimate noun
  ``natural-small-fixed`` the same with one template per condition: "the" only, no adjective, one
                          preposition (the conditions keep their natural, unbalanced frequencies)
  ``controlled``          :func:`thinkalike.language.grammar.controlled_sentences` (``corpus.controlled_stimuli``
                          defaults): 2 nouns x 2 verbs, 72 conditions fully crossed (subject number x object
                          number/none x tense x sentence type x relative clause none/subject/object)
  ``controlled-8``        the same crossing with 8 nouns and 8 verbs (4 lexical cells drawn per condition)
  ``controlled-short``    no relative clause: subject number x object number/none x tense x sentence type,
                          3 nouns x 3 verbs (short SVO sentences, as the paper's word-level set)
layouts  ``packed`` several texts per row of ``n_ctx`` (the default run's ``activations.packing``) or
         ``sentence`` one text per row (each word sees only its own sentence)
features ``default`` (``mlem.features: null``: pos, word_role, word_position, number, tense,
         in_relative_clause) or ``+sentence`` (also sentence_type, relative_clause, subject_number,
         object_number: every crossed factor)
coding   ``equality`` (the paper's: Δf = 1 when two values differ) or ``indicators`` (``mlem.categorical_coding:
         indicators``: a 0/1 column per value of pos and word_role, :func:`~thinkalike.mlem.features.indicator_coding`)

Each row also gives the **feature ceiling** (:func:`feature_ceiling`): the held-out Spearman of the best
representation the features could determine (each held-out word replaced by the mean of the training words
with exactly its feature values), an upper bound for any metric over these features.

Run after ``kedro run --pipelines corpus,zoo`` (or the default run): ``python benchmarks/mlem_stimuli.py``
(6 models, one or two per family, x 12 designs: about 8 minutes on 2 busy CPU cores), or e.g.
``--models all --designs corpus "controlled | indicators"``. Results: docs/benchmarks/mlem-stimuli.md.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr
from sklearn.model_selection import KFold

from thinkalike.language import grammar
from thinkalike.language.grammar import ControlledConfig, controlled_sentences, generate_sentences
from thinkalike.language.packing import pack_evaluation_sequences
from thinkalike.mlem.features import drop_single_valued, encode_features, indicator_coding
from thinkalike.mlem.fit import MLEMSettings, fit_layers
from thinkalike.mlem.stimuli import UNDEFINED, align, resolve_features, sample_stimuli, stimulus_table, stimulus_vectors
from thinkalike.models.extraction import iter_activation_batches
from thinkalike.models.sources import load_model

#: design -> (stimulus set, layout, feature set, categorical coding)
DESIGNS: dict[str, tuple[str, str, str, str]] = {
    "corpus": ("corpus", "packed", "default", "equality"),
    "corpus | sentence": ("corpus", "sentence", "default", "equality"),
    "natural-small": ("natural-small", "packed", "default", "equality"),
    "natural-small-fixed": ("natural-small-fixed", "packed", "default", "equality"),
    "controlled": ("controlled", "packed", "default", "equality"),
    "controlled-8": ("controlled-8", "packed", "default", "equality"),
    "controlled | sentence": ("controlled", "sentence", "default", "equality"),
    "controlled | sentence | +sentence": ("controlled", "sentence", "+sentence", "equality"),
    "controlled-short | sentence | +sentence": ("controlled-short", "sentence", "+sentence", "equality"),
    "corpus | indicators": ("corpus", "packed", "default", "indicators"),
    "controlled | indicators": ("controlled", "packed", "default", "indicators"),
    "controlled | sentence | +sentence | indicators": ("controlled", "sentence", "+sentence", "indicators"),
}
SENTENCE_FEATURES = ("sentence_type", "relative_clause", "subject_number", "object_number")
DEFAULT_MODELS = ("gelu_2l", "solu_2l", "neox_s", "neox_l", "encoder_2l", "mamba_2l")
FAMILIES = {
    "solu": "GeLU/SoLU bridges",
    "gelu": "GeLU/SoLU bridges",
    "neox": "GPT-NeoX",
    "encoder": "BERT-style",
    "mamba": "Mamba",
}


@dataclass
class MemoryStore:
    """An in-memory stand-in for an activation store (what :func:`stimulus_vectors` reads)."""

    model: str
    layers: list[int]
    d_model: int
    batches: list

    def __iter__(self):
        return iter(self.batches)


@contextlib.contextmanager
def small_lexicon(nouns: int = 2, verbs: int = 2, fixed_template: bool = False) -> Iterator[None]:
    """The grammar's module lexicon narrowed while the block runs (restored after): ``nouns`` animate nouns
    and no inanimate one, ``verbs`` transitive and intransitive verbs; ``fixed_template``: "the" only, one
    preposition, no adjective (with ``p_adjective = 0`` and ``p_the = 1`` in the config)."""
    saved = {
        name: getattr(grammar, name)
        for name in ("NOUNS", "ANIMATE_NOUNS", "TRANSITIVE_VERBS", "INTRANSITIVE_VERBS", "PREPOSITIONS")
    }
    try:
        grammar.ANIMATE_NOUNS = saved["ANIMATE_NOUNS"][:nouns]
        grammar.NOUNS = grammar.ANIMATE_NOUNS
        grammar.TRANSITIVE_VERBS = saved["TRANSITIVE_VERBS"][:verbs]
        grammar.INTRANSITIVE_VERBS = saved["INTRANSITIVE_VERBS"][:verbs]
        if fixed_template:
            grammar.PREPOSITIONS = saved["PREPOSITIONS"][:1]
        yield
    finally:
        for name, value in saved.items():
            setattr(grammar, name, value)


def stimulus_sentences(stimuli: str, evaluation_texts: pd.DataFrame, n_sentences: int, seed: int) -> pd.DataFrame:
    """The sentence table of a stimulus set (module docstring); ids from 0, ``source`` "grammar"."""
    if stimuli == "corpus":
        table = evaluation_texts[evaluation_texts["source"] == "grammar"]
    elif stimuli.startswith("natural-small"):
        fixed = stimuli.endswith("fixed")
        config = grammar.GrammarConfig(p_adjective=0.0, p_the=1.0) if fixed else grammar.GrammarConfig()
        with small_lexicon(fixed_template=fixed):
            table = generate_sentences(n_sentences, seed + 1, config)
    elif stimuli == "controlled-8":
        table = controlled_sentences(ControlledConfig(nouns=8, verbs=8))
        per_condition = 8 * 8
        rng = np.random.default_rng(seed)
        keep = np.concatenate(
            [
                start + np.sort(rng.choice(per_condition, 4, replace=False))
                for start in range(0, len(table), per_condition)
            ]
        )
        table = table.iloc[keep]
    elif stimuli == "controlled-short":
        factors = {
            name: values for name, values in grammar.CONTROLLED_DEFAULT_FACTORS.items() if name != "relative_clause"
        }
        table = controlled_sentences(ControlledConfig(factors=factors, nouns=3, verbs=3))
    else:
        table = controlled_sentences()
    return table.assign(source="grammar").reset_index(drop=True).assign(sentence_id=lambda t: np.arange(len(t)))


def word_vectors(handle, tokenizer, table: pd.DataFrame, n_ctx: int, packing: str, keys: pd.MultiIndex):
    sequences, index = pack_evaluation_sequences(table, tokenizer, n_ctx, packing)
    batches = list(
        iter_activation_batches(handle, sequences["input_ids"], sequences["attention_mask"], 32, progress=False)
    )
    store = MemoryStore(handle.name, list(range(handle.n_layers + 1)), handle.d_model, batches)
    return stimulus_vectors(store, index, "word", keys=keys)


def run(models: list[str], designs: list[str], max_stimuli: int, fit_settings: dict, seed: int):
    catalog = load_catalog()
    tokenizer = catalog.load("tokenizer")
    evaluation_texts = catalog.load("evaluation_texts")
    n_ctx = int(catalog.load("params:corpus")["n_ctx"])
    settings = MLEMSettings(**fit_settings)
    kinds = {
        "default": resolve_features("word", None),
        "+sentence": resolve_features("word", [*resolve_features("word", None), *SENTENCE_FEATURES]),
    }
    tables = {
        stimuli: stimulus_sentences(stimuli, evaluation_texts, 400, seed)
        for stimuli in dict.fromkeys(DESIGNS[design][0] for design in designs)
    }
    rows = []
    for model in models:
        config, weights = catalog.load(f"models.{model}.model_config"), catalog.load(f"models.{model}.model_weights")
        handle = load_model(
            f"zoo:{model}", name=model, zoo_artifacts={model: (config, weights)}, tokenizer=tokenizer, device="cpu"
        )
        vectors_of = {}
        for design in designs:
            stimuli, packing, feature_set, coding = DESIGNS[design]
            table = tables[stimuli]
            start = time.perf_counter()
            candidates = sample_stimuli(stimulus_table(table, "word"), max_stimuli, settings.seed)
            if (stimuli, packing) not in vectors_of:
                keys = pd.MultiIndex.from_arrays([candidates["sentence_id"], candidates["word_index"]])
                vectors_of[stimuli, packing] = word_vectors(handle, tokenizer, table, n_ctx, packing, keys)
            found = vectors_of[stimuli, packing]
            chosen, vectors = align(candidates, found, model)
            features = drop_single_valued(
                encode_features(chosen, kinds[feature_set], UNDEFINED, what=model), what=f"{model} {design}"
            )
            ceilings = [
                feature_ceiling(chosen, vectors[i], list(features.names), settings.n_folds, settings.seed)
                for i in range(len(found.layers))
            ]
            if coding == "indicators":
                features = indicator_coding(features)
            fits = fit_layers(
                features,
                {layer: vectors[i] for i, layer in enumerate(found.layers)},
                settings,
                what=f"{model} {design}",
                progress=False,
            )
            spearman = [float(fit.spearman.mean()) for fit in fits.values()]
            rows.append(
                {
                    "model": model,
                    "family": family(model),
                    "design": design,
                    "n_sentences": len(table),
                    "n_words": len(chosen),
                    "layers": len(spearman),
                    "mean": np.mean(spearman),
                    "min": np.min(spearman),
                    "max": np.max(spearman),
                    "per_layer": " ".join(f"{value:.2f}" for value in spearman),
                    "ceiling": float(np.mean(ceilings)),
                    "seconds": time.perf_counter() - start,
                }
            )
            row = rows[-1]
            print(
                f"{model:>12} {design:>47} {row['mean']:.3f} [{row['min']:.2f}, {row['max']:.2f}] "
                f"layers {row['per_layer']}; ceiling {row['ceiling']:.2f} ({row['seconds']:.0f} s)",
                flush=True,
            )
    return pd.DataFrame(rows)


def feature_ceiling(
    stimuli: pd.DataFrame, vectors: np.ndarray, features: list[str], n_folds: int, seed: int, n_pairs: int = 4000
) -> float:
    """The best held-out Spearman any function of the features could reach, estimated: each held-out stimulus is
    replaced by the mean vector of the training stimuli with exactly its feature values (its cell), and the
    distances of those means are ranked against the true distances (held-out pairs; stimuli whose cell has no
    training stimulus left out). Mean over ``n_folds`` folds."""
    cells = stimuli[features].astype(str).agg("|".join, axis=1).to_numpy()
    vectors = np.asarray(vectors, dtype=np.float64)
    scores = []
    for fold, (train, test) in enumerate(KFold(n_folds, shuffle=True, random_state=seed).split(cells)):
        means = {cell: vectors[train][cells[train] == cell].mean(axis=0) for cell in np.unique(cells[train])}
        test = test[np.array([cell in means for cell in cells[test]])]
        rng = np.random.default_rng([seed, fold])
        first = rng.integers(0, len(test), n_pairs)
        second = (first + rng.integers(1, len(test), n_pairs)) % len(test)
        a, b = test[first], test[second]
        predicted = np.linalg.norm(
            np.stack([means[c] for c in cells[a]]) - np.stack([means[c] for c in cells[b]]), axis=1
        )
        scores.append(spearmanr(predicted, np.linalg.norm(vectors[a] - vectors[b], axis=1)).statistic)
    return float(np.mean(scores))


def family(model: str) -> str:
    return next((name for prefix, name in FAMILIES.items() if model.startswith(prefix)), "other")


def load_catalog():
    from pathlib import Path

    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    project = Path(__file__).resolve().parents[1]
    bootstrap_project(project)
    session = KedroSession.create(project_path=project)
    return session.load_context().catalog


def main() -> None:
    torch.set_num_threads(1)  # the fits are single-threaded anyway; extraction of these small models hardly gains
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        nargs="*",
        default=list(DEFAULT_MODELS),
        help="zoo models, or 'all' (every zoo model of the configuration)",
    )
    parser.add_argument("--designs", nargs="*", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--max-stimuli", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="write the per-model table here")
    args = parser.parse_args()
    catalog = load_catalog()
    mlem = catalog.load("params:mlem")
    models = list(catalog.load("params:zoo")["models"]) if args.models == ["all"] else args.models
    fit = dict(mlem.get("fit") or {})
    print(
        f"{len(models)} models x {len(args.designs)} designs; word level, {args.max_stimuli} words per design; "
        f"fit settings of the mlem section: {fit}\n",
        flush=True,
    )
    table = run(models, args.designs, args.max_stimuli, fit, args.seed)
    if args.csv:
        table.to_csv(args.csv, index=False)
    summary = (
        table.groupby(["design", "family"], sort=False)
        .agg(mean=("mean", "mean"), low=("min", "min"), high=("max", "max"), models=("model", "nunique"))
        .reset_index()
    )
    print("\nmean held-out Spearman over layers and models [lowest, highest layer]")
    pivot = summary.assign(
        cell=lambda s: s.apply(lambda r: f"{r['mean']:.2f} [{r['low']:.2f}, {r['high']:.2f}]", axis=1)
    )
    print(pivot.pivot(index="design", columns="family", values="cell").reindex(args.designs).to_string())
    sizes = table.groupby("design", sort=False)[["n_sentences", "n_words"]].first()
    overall = (
        table.groupby("design", sort=False)[["mean", "ceiling"]]
        .mean()
        .rename(columns={"mean": "MLEM (all models)", "ceiling": "feature ceiling"})
    )
    sizes = sizes.join(overall.round(3))
    print("\n" + sizes.reindex(args.designs).to_string())


if __name__ == "__main__":
    main()
