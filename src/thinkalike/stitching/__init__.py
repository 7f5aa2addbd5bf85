"""Model stitching (Bansal et al. 2021; Brown et al. 2023 §3, appendix C.1): can g's later layers use f's
early features? No Kedro import; a pipeline node calls :func:`stitch_grid` (every layer pair and kind of an
ordered pair, each trained kind once per φ seed) or :func:`stitch` (one stitch) and saves
:meth:`StitchResult.row`, ``StitchResult.curve`` and the trained φ's (``phi_config``, ``phi_state``).

Penalty: over the scored targets T of the evaluation sequences (next tokens; special tokens left out by
default, ``StitchSettings.exclude_special_targets``), ``P = mean_{t∈T} −log p_{g∘φ∘f}(t) − mean_{t∈T}
−log p_g(t)``. φ seeds vary φ's data order (:func:`phi_seed_list`); :func:`seed_summary` gives the
spread of the penalty across them, beside the evaluation-bootstrap interval of each.

Modules: :mod:`~thinkalike.stitching.layers` (φ kinds, initialisation), :mod:`~thinkalike.stitching.data`
(splits, objectives, f's features), :mod:`~thinkalike.stitching.train` (settings, schedule, trainer),
:mod:`~thinkalike.stitching.evaluate` (losses, penalty, bootstrap CI), :mod:`~thinkalike.stitching.stitcher`
(the whole stitch), :mod:`~thinkalike.stitching.saved` (the trained φ's of a pair as tensors + JSON),
:mod:`~thinkalike.stitching.figures` (penalty figures, learning curves, heatmaps).
"""

from thinkalike.stitching.data import (
    OBJECTIVES,
    TokenSplit,
    excluded_target_ids,
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
    lockstep_batch_losses,
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
    group_seeds,
    seed_summary,
    stitch,
    stitch_grid,
    stitch_seeds,
)
from thinkalike.stitching.train import (
    LockstepTrainer,
    StitchDivergedError,
    StitchSettings,
    StitchTrainer,
    fuse_seeds,
    learning_rate_factor,
    phi_seed_list,
)

__all__ = [
    "INITS",
    "KINDS",
    "OBJECTIVES",
    "ROW_FIELDS",
    "AffineStitch",
    "IdentityStitch",
    "LockstepTrainer",
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
    "excluded_target_ids",
    "features_from_store",
    "fuse_seeds",
    "group_seeds",
    "learning_rate_factor",
    "least_squares_map",
    "load_stitch_layer",
    "lockstep_batch_losses",
    "own_batch_correct",
    "pack_stitches",
    "paired_bootstrap_ci",
    "phi_seed_list",
    "seed_summary",
    "split_indices",
    "split_tokens",
    "stitch",
    "stitch_grid",
    "stitch_key",
    "stitch_seeds",
    "token_stream_mismatch",
    "unpack_stitch",
]
