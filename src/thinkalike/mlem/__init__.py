"""Metric-Learning Encoding Models (Jalouzot et al. 2024, "What Makes Two Language Models Think Alike?").

Per layer, a metric over linguistic feature differences whose distances rank stimulus pairs the
way the layer's representations do; the fitted weights and permutation importances are the
layer's *feature profile*; two layers are alike when their profiles are (weighted Kendall τ).
No Kedro here: :mod:`~thinkalike.mlem.features` (Δf), :mod:`~thinkalike.mlem.model` (the metric),
:mod:`~thinkalike.mlem.softrank` (differentiable ranks), :mod:`~thinkalike.mlem.fit` (fit, held-out
Spearman, importance), :mod:`~thinkalike.mlem.stimuli` (grammar words / sentences and their
vectors), :mod:`~thinkalike.mlem.similarity` (weighted τ, RSA, MDS), :mod:`~thinkalike.mlem.figures`.
"""

from thinkalike.mlem.features import (
    FeatureError,
    FeatureTable,
    encode_features,
    pair_differences,
)
from thinkalike.mlem.fit import (
    ALL_FOLDS,
    LayerFit,
    MLEMSettings,
    fit_layer,
    fit_layers,
    profile_table,
)
from thinkalike.mlem.model import MetricModel
from thinkalike.mlem.similarity import (
    feature_similarity,
    mds_coordinates,
    rsa_similarity,
)
from thinkalike.mlem.softrank import soft_rank

__all__ = [
    "ALL_FOLDS",
    "FeatureError",
    "FeatureTable",
    "LayerFit",
    "MLEMSettings",
    "MetricModel",
    "encode_features",
    "feature_similarity",
    "fit_layer",
    "fit_layers",
    "mds_coordinates",
    "pair_differences",
    "profile_table",
    "rsa_similarity",
    "soft_rank",
]
