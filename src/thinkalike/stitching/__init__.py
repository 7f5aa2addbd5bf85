"""Model stitching (Bansal et al. 2021; Brown et al. 2023 §3, appendix C.1): can g's later layers use f's
early features? No Kedro import; a pipeline node calls :func:`stitch` and saves :meth:`StitchResult.row`,
``StitchResult.curve`` and the trained φ (``phi_config``, ``phi_state``).

Modules: :mod:`~thinkalike.stitching.layers` (φ kinds, initialisation), :mod:`~thinkalike.stitching.data`
(splits, objectives, f's features), :mod:`~thinkalike.stitching.train` (settings, schedule, trainer),
:mod:`~thinkalike.stitching.evaluate` (losses, penalty, bootstrap CI), :mod:`~thinkalike.stitching.stitcher`
(the whole stitch), :mod:`~thinkalike.stitching.saved` (the trained φ's of a pair as tensors + JSON).
"""

from thinkalike.stitching.data import (
    OBJECTIVES,
    TokenSplit,
    features_from_store,
    split_indices,
    split_tokens,
    token_stream_mismatch,
)
from thinkalike.stitching.evaluate import (
    StitchAccuracy,
    StitchEvaluation,
    batch_correct,
    evaluate_stitch,
    evaluate_stitch_accuracy,
    own_batch_correct,
    paired_bootstrap_ci,
)
from thinkalike.stitching.layers import (
    INITS,
    KINDS,
    AffineStitch,
    IdentityStitch,
    StitchConfigError,
    StitchLayer,
    build_stitch_layer,
    least_squares_map,
    load_stitch_layer,
)
from thinkalike.stitching.saved import pack_stitches, stitch_key, unpack_stitch
from thinkalike.stitching.stitcher import (
    ROW_FIELDS,
    StitchResult,
    check_stitch,
    evaluate_saved,
    stitch,
)
from thinkalike.stitching.train import (
    StitchDivergedError,
    StitchSettings,
    StitchTrainer,
    learning_rate_factor,
)

__all__ = [
    "INITS",
    "KINDS",
    "OBJECTIVES",
    "ROW_FIELDS",
    "AffineStitch",
    "IdentityStitch",
    "StitchAccuracy",
    "StitchConfigError",
    "StitchDivergedError",
    "StitchEvaluation",
    "StitchLayer",
    "StitchResult",
    "StitchSettings",
    "StitchTrainer",
    "TokenSplit",
    "batch_correct",
    "build_stitch_layer",
    "check_stitch",
    "evaluate_saved",
    "evaluate_stitch",
    "evaluate_stitch_accuracy",
    "features_from_store",
    "learning_rate_factor",
    "least_squares_map",
    "load_stitch_layer",
    "own_batch_correct",
    "pack_stitches",
    "paired_bootstrap_ci",
    "split_indices",
    "split_tokens",
    "stitch",
    "stitch_key",
    "token_stream_mismatch",
    "unpack_stitch",
]
