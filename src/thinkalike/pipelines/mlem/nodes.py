"""Thin nodes of the ``mlem`` pipeline: one model's feature profiles, then similarities across models.

Their settings are the ``mlem`` section parsed once by the pipeline's builder
(:class:`~thinkalike.pipelines.mlem.schema.MLEMParameters`, bound as ``settings``; ``settings.fit_settings()`` is
:class:`~thinkalike.mlem.fit.MLEMSettings`)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from thinkalike.figures import dropdown_figure, figure_files
from thinkalike.mlem.features import drop_single_valued, encode_features, indicator_coding
from thinkalike.mlem.figures import (
    mds_figure,
    mds_plotly,
    profile_figure,
    profile_plotly,
    similarity_figure,
    similarity_plotly,
)
from thinkalike.mlem.fit import fit_layers, profile_table
from thinkalike.mlem.similarity import (
    feature_similarity,
    finite_rows,
    importance_profiles,
    long_similarity,
    mds_coordinates,
    pair_distances,
    rsa_similarity,
    sample_pairs,
    shared_pair_distances,
)
from thinkalike.mlem.stimuli import (
    UNDEFINED,
    align,
    resolve_features,
    sample_stimuli,
    stimulus_table,
    stimulus_vectors,
)
from thinkalike.models.activation_store import ActivationStore, provenance
from thinkalike.models.handle import default_device
from thinkalike.pipelines.mlem.schema import MLEMParameters

logger = logging.getLogger(__name__)

DISTANCE_COLUMNS = [
    "model",
    "layer",
    "pair",
    "sentence_id_a",
    "word_index_a",
    "sentence_id_b",
    "word_index_b",
    "distance",
]
MDS_COLUMNS = ["method", "model", "layer", "x", "y"]


def chosen_layers(stored: list[int], wanted: list[int] | None, model: str) -> list[int]:
    """``mlem.layers`` (all stored layers when null); a layer the store lacks is an error naming the key."""
    if wanted is None:
        return list(stored)
    missing = [layer for layer in wanted if layer not in stored]
    if missing:
        raise ValueError(f"mlem.layers: {model} has no stored layer(s) {missing}; stored: {stored}")
    return list(wanted)


def fit_model(
    store: ActivationStore, index: pd.DataFrame, evaluation_texts: pd.DataFrame, *, settings: MLEMParameters, model: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every layer's MLEM profile (long table; the summary draws it) and the RSA distances of the shared sampled
    pairs.

    Stimuli (``mlem.stimuli``: the corpus's held-out grammar sentences or the controlled set; ``mlem.level``,
    at most ``mlem.max_stimuli``, drawn with ``mlem.fit.seed``) and features (``mlem.features``, coded as
    ``mlem.categorical_coding`` says: :mod:`thinkalike.mlem.features`) are checked,
    and every layer's vectors too, before the first fit; the fits' cost is estimated and logged first
    (:func:`~thinkalike.mlem.fit.estimate_cost`; at INFO when it may take a minute or more).
    """
    fit = settings.fit_settings()
    level = settings.level
    kinds = resolve_features(level, settings.features)
    stimuli_set = settings.stimuli
    candidates = sample_stimuli(stimulus_table(evaluation_texts, level, stimuli_set), settings.max_stimuli, fit.seed)
    keys = pd.MultiIndex.from_arrays([candidates["sentence_id"], candidates["word_index"]])
    found = stimulus_vectors(store, index, level, settings.sentence_pooling, keys=keys)
    stimuli, vectors = align(candidates, found, model)
    layers = chosen_layers(found.layers, settings.layers, model)
    features = drop_single_valued(encode_features(stimuli, kinds, UNDEFINED, what=model), what=model)
    coding = settings.categorical_coding
    if coding == "indicators":
        features = indicator_coding(features)
    by_layer = {layer: vectors[found.layers.index(layer)] for layer in layers}
    fits = fit_layers(
        features, by_layer, fit, what=model, device=default_device(settings.device), progress=settings.progress
    )
    profile = pd.concat(
        [profile_table(fitted, model, layer, fit.confidence) for layer, fitted in fits.items()], ignore_index=True
    ).assign(level=level, stimuli=stimuli_set, categorical_coding=coding, **provenance(store))
    distances = rsa_distances(candidates, stimuli, by_layer, settings.rsa_pairs, fit.seed, model)
    return profile, distances


def rsa_distances(
    candidates: pd.DataFrame,
    stimuli: pd.DataFrame,
    by_layer: dict[int, np.ndarray],
    n_pairs: int,
    seed: int,
    model: str,
) -> pd.DataFrame:
    """Neural distances of ``n_pairs`` pairs drawn among the candidate stimuli (the same for every model),
    for the pairs whose stimuli this model has; long table (:data:`DISTANCE_COLUMNS`)."""
    first, second = sample_pairs(len(candidates), n_pairs, seed)
    row = pd.Series(
        np.arange(len(stimuli)), index=pd.MultiIndex.from_arrays([stimuli["sentence_id"], stimuli["word_index"]])
    )
    keys = pd.MultiIndex.from_arrays([candidates["sentence_id"], candidates["word_index"]])
    position = row.reindex(keys).to_numpy()
    have = ~np.isnan(position[first]) & ~np.isnan(position[second])
    a, b = position[first][have].astype(np.int64), position[second][have].astype(np.int64)
    layers = list(by_layer)
    distances = pair_distances(np.stack([by_layer[layer] for layer in layers]), a, b)
    pairs = np.flatnonzero(have)
    frames = [
        pd.DataFrame(
            {
                "model": model,
                "layer": layer,
                "pair": pairs,
                "sentence_id_a": candidates["sentence_id"].to_numpy()[first[have]],
                "word_index_a": candidates["word_index"].to_numpy()[first[have]],
                "sentence_id_b": candidates["sentence_id"].to_numpy()[second[have]],
                "word_index_b": candidates["word_index"].to_numpy()[second[have]],
                "distance": distances[i],
            }
        )
        for i, layer in enumerate(layers)
    ]
    return pd.concat(frames, ignore_index=True)[DISTANCE_COLUMNS]


def summarise_mlem(*tables: pd.DataFrame, settings: MLEMParameters):
    """All profiles; feature-based and RSA similarity of every layer pair (long tables); MDS maps; figures; every
    model's profile figure (``<model>.png`` files, and one plotly figure with a dropdown of the models).

    ``tables`` are the models' profile tables, then their RSA distance tables, in the same order.
    """
    seed = settings.fit_settings().seed
    by_model = {str(table["model"].iloc[0]): table for table in tables[: len(tables) // 2]}
    profiles = pd.concat(by_model.values(), ignore_index=True)
    distances = pd.concat(tables[len(tables) // 2 :], ignore_index=True)
    labels, importances, _ = importance_profiles(profiles)
    matrices = {
        "feature": feature_similarity(importances),
        "rsa": rsa_similarity(shared_pair_distances(distances, labels)),
    }
    coordinates = []
    for method, matrix in matrices.items():
        keep = finite_rows(matrix)
        if not keep.all():
            logger.warning(
                "MLEM %s MDS: %d layer(s) with undefined similarity left out (constant importance profile): %s",
                method,
                int((~keep).sum()),
                [labels[i] for i in np.flatnonzero(~keep)][:5],
            )
        kept = [labels[i] for i in np.flatnonzero(keep)]
        xy = mds_coordinates(matrix[np.ix_(keep, keep)], seed) if kept else np.zeros((0, 2))
        coordinates.append(
            pd.DataFrame(
                {
                    "method": method,
                    "model": [m for m, _ in kept],
                    "layer": [layer for _, layer in kept],
                    "x": xy[:, 0],
                    "y": xy[:, 1],
                }
            )
        )
    mds = pd.concat(coordinates, ignore_index=True)[MDS_COLUMNS]
    return (
        profiles,
        long_similarity(matrices["feature"], labels),
        long_similarity(matrices["rsa"], labels),
        mds,
        similarity_figure(matrices, labels),
        similarity_plotly(matrices, labels),
        mds_figure(mds),
        mds_plotly(mds),
        figure_files(by_model, profile_figure),
        dropdown_figure({model: profile_plotly(table) for model, table in by_model.items()}, "MLEM profiles"),
    )
