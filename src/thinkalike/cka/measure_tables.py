"""Measures beyond CKA between two models' activation stores, as tables (no Kedro; their figures:
:mod:`thinkalike.cka.measure_figures`).

The rows compared are exactly the CKA pipeline's: the same pooling and special-token rule
(:func:`thinkalike.models.aligned_batches.aligned_minibatches`), all of the pair's aligned rows, of which
``max_tokens`` are drawn once per pair (:func:`thinkalike.measures.registry.subsample_tokens`, seeded;
the same rows for both models, for every measure and layer pair). Every measure of
:mod:`thinkalike.measures.registry` is then computed for every layer pair
(:func:`thinkalike.measures.layerwise.measure_table`: each layer prepared once).

The long table has one row per (measure, layer of a, layer of b): ``model_a, layer_a, model_b, layer_b, measure,
kind, value, n_tokens, n_rows, pooling, exclude_special_tokens, seed, options, dims_a, dims_b`` — ``n_tokens`` the
rows the measures saw, ``n_rows`` the aligned rows they were drawn from, ``options`` the measure's options as JSON,
``dims_a/_b`` the dimensions of each layer the measure compared (the width, or fewer principal components)
(the ``cka`` pipeline adds the provenance columns ``activations_version_a/_b`` and ``spec_a/_b``).

Rogue dimensions (:mod:`thinkalike.measures.rogue`): ``top1_share_a/_b`` and ``top3_share_a/_b`` are the variance
shares of each layer's largest one and three dimensions on the drawn rows (before any preprocessing), and one
log line (``logger.warning``, not a Python warning) names the model, every layer where one dimension carries more
than half, and the settings that change it. ``cka.measures.standardise`` (every
dimension z-scored) and ``cka.measures.remove_top_dimensions`` (the k largest dropped, then standardised if
asked) preprocess both models' rows for every measure; the table records both (``standardised``,
``removed_top_dimensions``). Those rows have ``variant`` ``configured``. What the remedies change is measured
on every pair too (``cka.measures.remedies``: a few cheap measures, default CKA and Procrustes): the same
measures on the drawn rows as they are (``raw``), standardised (``standardised``) and without each layer's
``remove_top_dimensions`` largest dimensions (``top<k>_removed``), as more rows of the table;
:func:`remedy_summary` gives each variant's matched-layer mean.

Grounding (:mod:`thinkalike.measures.grounding`; :func:`grounding_table`, the ``measure_grounding`` table, and
:func:`~thinkalike.cka.measure_figures.grounding_figure`). A model compared with itself also gets, with
``cka.measures.grounding.max_components`` K > 0 (default 5), rows for three controls at its middle layer
(``len(layers) // 2`` of the stored layers; one layer, as they cost about eleven tables of one layer), on the rows
every measure sees: ``variant`` ``permuted_rows`` — the layer against itself with its rows shuffled (one seeded
permutation); ``independent_rows``
— the layer on its drawn rows against itself on as many other aligned rows (disjoint tokens; when the pair has
fewer than twice the drawn rows, the drawn rows' two halves, and ``n_tokens`` says so); ``components_removed`` —
the layer, centred, against itself without its top k principal components, k = 0 … K (``removed_components``). From the tables alone,
per measure: layer monotonicity within the trained models compared with themselves; sensitivity to the removed
components; the null levels (mean alikeness over the permuted and the independent rows); specificity (seed
replicas above other architectures, by ``cka.groups``); and trained vs untrained — seed-replica pairs above pairs of
a trained model and an untrained one (a model whose ``spec`` is a zoo initialisation, ``zoo:<m>?weights=initial``;
untrained models take part in no other test).

Calibration (``cka.measures.calibration``: ``measures``, ``n_permutations``; pairs of different models only):
:func:`calibration_long_table` scores every cell, the matched-layer mean and the best layer pair of those
measures against the permutation null of the token correspondence, on the same drawn, preprocessed rows
(:mod:`thinkalike.measures.calibration`: z and p-value of each statistic), on the cells of the layer grid below
(``best``: the best of those cells, in the observed and every permuted table alike).

Rows enough for each measure (:meth:`MeasureSettings.fitted_to`): a measure that needs rows per dimension (the CCA
family: 10, :attr:`thinkalike.measures.registry.Measure.rows_per_dimension`) compares each layer's top
``max_tokens // 10`` principal components when the layers are wider (its ``max_dims`` option, recorded in
``options`` and ``dims_a/_b``), or is left out below one; one log line per pair says which and why. Without it
512 rows of 576- and 384-wide layers give mean CCA ≈ 1 whatever the data.

Memory: all of a pair's aligned rows are held before the draw (rows × layers × width floats per model: 3 MB for
the zoo's largest pair); the streaming mode of the CKA pipeline, for stores that do not fit, computes CKA only.

Layer grid (``cka.measures.layers``; :meth:`MeasureSettings.layer_pairs`): ``all`` every layer pair; ``relative``
the pairs matched by relative depth (:func:`thinkalike.measures.distances.match_layers_by_relative_depth`: one per
layer of the shallower model — the cells the matched-layer summaries below use, so those are the same as with
``all``); ``diagonal`` those and the pairs of equal position; ``auto`` (default) ``all`` when both models store at
most 13 layers (12 and the embeddings), else ``relative`` — a 30-layer model with itself is 31 pairs, not 961,
unless asked. The remedy rows follow the same grid; cells outside it keep their rows with a NaN ``value`` (the
heatmaps leave them blank; the layer-monotonicity grounding test, which needs every pair of a model with itself,
is NaN for that model and left out of the mean). After the table's first few pairs, before the rest, one log
line (``INFO``) gives the grid, the pairs × measures and the time of the whole table estimated from those pairs
(:func:`thinkalike.measures.layerwise.cost_estimate`), e.g. ``measures m vs m (cka.measures.layers: relative): 31
layer pairs × 11 measures; the first <k> took <t> s, about <total> in all``.

The summary per pair and measure (:func:`pair_measure_summary`) is the mean over the layers matched by relative
depth (:func:`thinkalike.measures.distances.match_layers_by_relative_depth`), and for a measure that is a
metric the product distance ``sqrt(Σᵢ dᵢ²)`` over the same cells (as the arccos-CKA model distance).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from thinkalike.measures.calibration import calibrate
from thinkalike.measures.distances import match_layers_by_relative_depth
from thinkalike.measures.grounding import (
    grounding_row,
    layer_monotonicity,
    null_level,
    sensitivity_score,
    separation_auprc,
    without_top_components,
)
from thinkalike.measures.layerwise import check_measures, fit_to_rows, measure_table
from thinkalike.measures.registry import MEASURES, subsample_tokens
from thinkalike.measures.rogue import ROGUE_SHARE, remove_top_dimensions, standardise_dimensions, top_share
from thinkalike.models.activation_store import ActivationStore
from thinkalike.models.aligned_batches import aligned_minibatches
from thinkalike.models.handle import ModelSourceError
from thinkalike.models.sources import is_initialisation


class RowSettings(Protocol):
    """What forming a pair's rows reads of the CKA settings (``CKASettings`` of the cka package, which imports this
    module's measures: a structural type here, so that the import runs one way)."""

    @property
    def pooling(self) -> str: ...

    @property
    def batch_tokens(self) -> int: ...

    @property
    def exclude_special_tokens(self) -> bool: ...


TABLE_COLUMNS = [
    "model_a",
    "layer_a",
    "model_b",
    "layer_b",
    "measure",
    "variant",
    "kind",
    "value",
    "n_tokens",
    "n_rows",
    "pooling",
    "exclude_special_tokens",
    "seed",
    "options",
    "standardised",
    "removed_top_dimensions",
    "removed_components",
    "top1_share_a",
    "top3_share_a",
    "top1_share_b",
    "top3_share_b",
    "dims_a",
    "dims_b",
]
SHARE_COLUMNS = ["model", "layer", "top1_share", "top3_share", "n_tokens"]
REMEDY_COLUMNS = ["model_a", "model_b", "measure", "variant", "matched_mean", "n_matched_layers"]
CONFIGURED = "configured"  # the variant of the rows every measure is computed on (cka.measures' preprocessing)
PERMUTED, INDEPENDENT, COMPONENTS = "permuted_rows", "independent_rows", "components_removed"  # grounding controls
GROUNDING_VARIANTS = (PERMUTED, INDEPENDENT, COMPONENTS)
SUMMARY_COLUMNS = [
    "model_a",
    "model_b",
    "measure",
    "kind",
    "matched_mean",
    "model_distance",
    "n_matched_layers",
    "n_tokens",
]
WHERE = "cka.measures"
LAYER_GRIDS = ("diagonal", "relative", "all", "auto")
AUTO_ALL_LAYERS = 13  # ``auto``: every layer pair when both models store at most 12 layers and the embeddings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MeasureSettings:
    """``cka.measures``: which measures (``names``, registry order kept as given), how many aligned rows they see
    (``max_tokens``, drawn with ``seed``) and each measure's options (``options.<name>.<option>``)."""

    names: tuple[str, ...] = ()
    max_tokens: int = 512
    seed: int = 0
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    standardise: bool = False
    remove_top_dimensions: int = 0
    remedy_measures: tuple[str, ...] = ("cka", "procrustes")
    remedy_top_dimensions: int = 3
    calibration_measures: tuple[str, ...] = ()
    calibration_permutations: int = 20
    grounding_components: int = 5
    layers: str = "auto"

    def __post_init__(self) -> None:
        if self.layers not in LAYER_GRIDS:
            raise ValueError(f"{WHERE}.layers: {self.layers!r} must be one of {', '.join(LAYER_GRIDS)}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 4:
            raise ValueError(f"{WHERE}.max_tokens: {self.max_tokens!r} must be an integer ≥ 4")
        if not isinstance(self.standardise, bool):
            raise ValueError(f"{WHERE}.standardise: must be true or false, got {self.standardise!r}")
        if (
            isinstance(self.remove_top_dimensions, bool)
            or not isinstance(self.remove_top_dimensions, int)
            or self.remove_top_dimensions < 0
        ):
            raise ValueError(f"{WHERE}.remove_top_dimensions: {self.remove_top_dimensions!r} must be an integer ≥ 0")
        check_measures(list(self.remedy_measures), {}, n_tokens=self.max_tokens, where=f"{WHERE}.remedies.measures")
        if (
            isinstance(self.remedy_top_dimensions, bool)
            or not isinstance(self.remedy_top_dimensions, int)
            or self.remedy_top_dimensions < 1
        ):
            raise ValueError(
                f"{WHERE}.remedies.remove_top_dimensions: {self.remedy_top_dimensions!r} must be an integer ≥ 1"
            )
        unknown = sorted(set(self.calibration_measures) - set(self.names))
        if unknown:
            raise ValueError(f"{WHERE}.calibration.measures: {unknown} are not in {WHERE}.names")
        permutations = self.calibration_permutations
        if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations == 1 or permutations < 0:
            raise ValueError(
                f"{WHERE}.calibration.n_permutations: {permutations!r} must be 0 (no calibration) or an integer ≥ 2"
            )
        components = self.grounding_components
        if isinstance(components, bool) or not isinstance(components, int) or components == 1 or components < 0:
            raise ValueError(
                f"{WHERE}.grounding.max_components: {components!r} must be 0 (no grounding controls) or an integer ≥ 2"
            )
        check_measures(list(self.names), self.options, n_tokens=self.max_tokens, where=WHERE)

    def layer_grid(self, layers_a: int, layers_b: int) -> str:
        """The grid ``layers`` gives for models of ``layers_a`` and ``layers_b`` stored layers (``auto`` resolved:
        ``all`` when both have at most :data:`AUTO_ALL_LAYERS`, else ``relative``)."""
        if self.layers != "auto":
            return self.layers
        return "all" if max(layers_a, layers_b) <= AUTO_ALL_LAYERS else "relative"

    def layer_pairs(self, layers_a: int, layers_b: int) -> list[tuple[int, int]] | None:
        """The (position in a, position in b) cells the measures are computed on (None: every pair): ``relative``
        the pairs matched by relative depth (:func:`~thinkalike.measures.distances.match_layers_by_relative_depth`,
        the cells of the matched-layer summaries), ``diagonal`` those and the pairs of equal position."""
        grid = self.layer_grid(layers_a, layers_b)
        if grid == "all":
            return None
        matched = match_layers_by_relative_depth(layers_a, layers_b)
        if grid == "relative":
            return matched
        return sorted(set(matched) | {(i, i) for i in range(min(layers_a, layers_b))})

    def fitted_to(self, n_tokens: int, width: int) -> tuple[MeasureSettings, list[str]]:
        """These settings as ``n_tokens`` rows allow on layers up to ``width`` wide, and the log lines that say
        what changed (:func:`thinkalike.measures.layerwise.fit_to_rows`: the CCA family in at most
        ``n_tokens // 10`` principal components, or left out)."""
        names, options, notes = fit_to_rows(self.names, self.options, n_tokens, width)
        fitted = replace(
            self,
            names=tuple(names),
            options=options,
            calibration_measures=tuple(m for m in self.calibration_measures if m in names),
            remedy_measures=tuple(m for m in self.remedy_measures if m in names) or self.remedy_measures,
        )
        return fitted, notes

    def dimensions(self, name: str, width: int) -> int:
        """The dimensions measure ``name`` compares of a layer ``width`` wide (its ``max_dims`` option, if less)."""
        limit = self.options.get(name, {}).get("max_dims")
        return width if limit is None else min(width, int(limit))

    @property
    def calibrated(self) -> bool:
        """Whether cross-model pairs get a permutation null (:mod:`thinkalike.measures.calibration`)."""
        return bool(self.calibration_measures) and self.calibration_permutations > 0

    def preprocess(self, rows: np.ndarray) -> np.ndarray:
        """One layer's drawn rows as the measures see them (module docstring)."""
        if self.remove_top_dimensions:
            rows = remove_top_dimensions(rows, self.remove_top_dimensions)
        return standardise_dimensions(rows) if self.standardise else rows


def aligned_rows(
    store_a: ActivationStore,
    index_a: pd.DataFrame,
    store_b: ActivationStore,
    index_b: pd.DataFrame,
    settings: RowSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """Every aligned row of the pair, ``(La, n, da)`` and ``(Lb, n, db)``, as the CKA pipeline forms them."""
    batches = list(
        aligned_minibatches(
            store_a,
            index_a,
            store_b,
            index_b,
            pooling=settings.pooling,
            batch_tokens=settings.batch_tokens,
            exclude_special_tokens=settings.exclude_special_tokens,
        )
    )
    if not batches:
        raise ValueError(f"no aligned rows to compare for {store_a.model!r} vs {store_b.model!r}")
    return (np.concatenate([a for a, _ in batches], axis=1), np.concatenate([b for _, b in batches], axis=1))


def measures_long_table(
    acts_a: np.ndarray,
    acts_b: np.ndarray | None,
    measures: MeasureSettings,
    cka: RowSettings,
    *,
    model_a: str,
    model_b: str,
    layer_ids_a: Sequence[int],
    layer_ids_b: Sequence[int],
) -> pd.DataFrame:
    """The pair's long table (module docstring); ``acts_b`` None: the model against itself."""
    n_rows = acts_a.shape[1]
    raw_a = drawn_rows(acts_a, measures)
    raw_b = None if acts_b is None else drawn_rows(acts_b, measures)
    check_measures(list(measures.names), measures.options, n_tokens=len(raw_a[0]), where=WHERE)
    where = f"measures {model_a} vs {model_b}"
    width_a, width_b = raw_a[0].shape[1], (raw_a if raw_b is None else raw_b)[0].shape[1]
    configured = measures
    measures, notes = configured.fitted_to(len(raw_a[0]), max(width_a, width_b))
    for note in notes:
        logger.info("%s: %s (%s.max_tokens: %d)", where, note, WHERE, measures.max_tokens)
    shares_a = layer_shares(raw_a, model_a, layer_ids_a)
    shares_b = shares_a if raw_b is None else layer_shares(raw_b, model_b, layer_ids_b)
    pairs = measures.layer_pairs(len(raw_a), len(raw_a if raw_b is None else raw_b))
    table = measure_table(
        [measures.preprocess(layer) for layer in raw_a],
        None if raw_b is None else [measures.preprocess(layer) for layer in raw_b],
        list(measures.names),
        measures.options,
        progress=where,
        pairs=pairs,
        estimate=lambda line: logger.info(
            "%s (%s.layers: %s): %s",
            where,
            WHERE,
            measures.layer_grid(len(raw_a), len(raw_a if raw_b is None else raw_b)),
            line,
        ),
    )
    table["variant"] = CONFIGURED
    if measures.remedy_measures:
        table = pd.concat([table, _remedy_rows(raw_a, raw_b, measures, pairs)], ignore_index=True)
    if raw_b is None and measures.grounding_components:
        table = pd.concat([table, _grounding_rows(acts_a, configured)], ignore_index=True)
    if "removed_components" not in table:
        table["removed_components"] = 0
    if "n_tokens" not in table:
        table["n_tokens"] = len(raw_a[0])
    ids_a, ids_b = np.asarray(layer_ids_a, dtype=np.int64), np.asarray(layer_ids_b, dtype=np.int64)
    position_a, position_b = table["layer_a"].to_numpy(), table["layer_b"].to_numpy()
    table = table.assign(
        top1_share_a=shares_a["top1_share"].to_numpy()[position_a],
        top3_share_a=shares_a["top3_share"].to_numpy()[position_a],
        top1_share_b=shares_b["top1_share"].to_numpy()[position_b],
        top3_share_b=shares_b["top3_share"].to_numpy()[position_b],
        dims_a=[measures.dimensions(name, width_a) for name in table["measure"]],
        dims_b=[measures.dimensions(name, width_b) for name in table["measure"]],
        standardised=np.where(table["variant"] == CONFIGURED, measures.standardise, table["variant"] == "standardised"),
        removed_top_dimensions=np.where(
            table["variant"] == CONFIGURED,
            measures.remove_top_dimensions,
            np.where(table["variant"] == _removed(measures), measures.remedy_top_dimensions, 0),
        ),
    )
    table = table.assign(
        model_a=model_a,
        model_b=model_b,
        layer_a=ids_a[table["layer_a"].to_numpy()],
        layer_b=ids_b[table["layer_b"].to_numpy()],
        kind=[MEASURES[name].kind for name in table["measure"]],
        n_tokens=table["n_tokens"].fillna(len(raw_a[0])).astype(np.int64),
        removed_components=table["removed_components"].fillna(0).astype(np.int64),
        n_rows=n_rows,
        pooling=cka.pooling,
        exclude_special_tokens=bool(cka.exclude_special_tokens),
        seed=measures.seed,
        options=_options_column(configured, table, len(raw_a[0]), max(width_a, width_b)),
    )
    return table[TABLE_COLUMNS].reset_index(drop=True)


def _grounding_rows(acts: np.ndarray, measures: MeasureSettings) -> pd.DataFrame:
    """A model against itself: the permuted, independent and components-removed controls (module docstring), each
    with the measures fitted to its rows (``measures`` as configured, not yet fitted)."""
    layers = drawn_layers(acts, measures)
    n_tokens = len(layers[0])
    shuffled = np.random.default_rng(measures.seed + 1).permutation(n_tokens)
    drawn = subsample_tokens(acts.shape[1], measures.max_tokens, measures.seed)
    rest = np.setdiff1d(np.arange(acts.shape[1]), drawn)
    if len(rest) >= n_tokens:
        other = np.sort(np.random.default_rng(measures.seed + 2).choice(rest, size=n_tokens, replace=False))
        first, second = layers, [measures.preprocess(acts[i, other]) for i in range(len(acts))]
    else:  # fewer than twice the drawn rows: the drawn rows' two halves
        half = n_tokens // 2
        first, second = [rows[:half] for rows in layers], [rows[half : 2 * half] for rows in layers]
    index = len(layers) // 2
    rows = layers[index]
    names, options = _fitted(measures, rows)
    steps = [
        without_top_components(rows, k) for k in range(min(measures.grounding_components, min(rows.shape) - 1) + 1)
    ]
    removed = measure_table(steps[:1], steps, names, options)
    parts = [
        measure_table([rows], [rows[shuffled]], names, options).assign(variant=PERMUTED),
        measure_table([first[index]], [second[index]], *_fitted(measures, first[index])).assign(
            variant=INDEPENDENT, n_tokens=len(first[index])
        ),
        removed.assign(variant=COMPONENTS, removed_components=removed["layer_b"]),
    ]
    return pd.concat(parts, ignore_index=True).assign(layer_a=index, layer_b=index)


def _options_column(configured: MeasureSettings, table: pd.DataFrame, n_drawn: int, width: int) -> list[str]:
    """Each row's options as JSON, as its measure ran: the configured ones fitted to the row's tokens (fitted once per
    token count), none for the remedies."""
    tokens = table["n_tokens"].fillna(n_drawn).astype(int)
    fitted = {n: configured.fitted_to(n, width)[0].options for n in set(tokens)}
    return [
        json.dumps(
            dict(fitted[n].get(name, {})) if variant == CONFIGURED or variant in GROUNDING_VARIANTS else {},
            sort_keys=True,
        )
        for name, variant, n in zip(table["measure"], table["variant"], tokens)
    ]


def _fitted(measures: MeasureSettings, rows: np.ndarray) -> tuple[list[str], dict[str, Mapping[str, Any]]]:
    """The measures' names and options refitted to ``rows`` (a control on fewer rows than were drawn)."""
    fitted, _ = measures.fitted_to(rows.shape[0], rows.shape[1])
    return list(fitted.names), dict(fitted.options)


def drawn_rows(acts: np.ndarray, measures: MeasureSettings) -> list[np.ndarray]:
    """Each layer's drawn rows: ``max_tokens`` of the pair's aligned rows (``seed``; the same for both models)."""
    rows = subsample_tokens(acts.shape[1], measures.max_tokens, measures.seed)
    return [acts[layer, rows] for layer in range(acts.shape[0])]


def drawn_layers(acts: np.ndarray, measures: MeasureSettings) -> list[np.ndarray]:
    """:func:`drawn_rows`, preprocessed as configured (what every measure sees)."""
    return [measures.preprocess(rows) for rows in drawn_rows(acts, measures)]


def calibration_long_table(
    acts_a: np.ndarray,
    acts_b: np.ndarray,
    measures: MeasureSettings,
    *,
    model_a: str,
    model_b: str,
    layer_ids_a: Sequence[int],
    layer_ids_b: Sequence[int],
) -> pd.DataFrame:
    """The calibrated scores of a pair of different models (:func:`thinkalike.measures.calibration.calibrate`, on
    the rows the measures saw): ``model_a, model_b, measure, statistic, layer_a, layer_b`` (store layer ids; −1
    for ``matched_mean``), ``observed, null_mean, null_std, z, p_value, n_permutations, n_null, n_tokens``."""
    layers_a, layers_b = drawn_layers(acts_a, measures), drawn_layers(acts_b, measures)
    measures, _ = measures.fitted_to(len(layers_a[0]), max(layers_a[0].shape[1], layers_b[0].shape[1]))
    result = calibrate(
        layers_a,
        layers_b,
        list(measures.calibration_measures),
        {name: measures.options[name] for name in measures.calibration_measures if name in measures.options},
        n_permutations=measures.calibration_permutations,
        seed=measures.seed,
        progress=f"calibration {model_a} vs {model_b}",
        pairs=measures.layer_pairs(len(layers_a), len(layers_b)),
    )
    scores = result.scores.copy()
    ids_a, ids_b = np.asarray(layer_ids_a, dtype=np.int64), np.asarray(layer_ids_b, dtype=np.int64)
    for column, ids in (("layer_a", ids_a), ("layer_b", ids_b)):
        positions = scores[column].to_numpy()
        scores[column] = np.where(positions >= 0, ids[np.clip(positions, 0, None)], -1)
    scores.insert(0, "model_b", model_b)
    scores.insert(0, "model_a", model_a)
    return scores.assign(n_tokens=len(layers_a[0]))


def calibration_summary(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The pair statistics (``matched_mean``, ``best``) of every calibrated pair, one table."""
    parts = [table[table["statistic"] != "cell"] for table in tables if len(table)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def calibration_metrics(table: pd.DataFrame) -> dict[str, float]:
    """MLflow metrics of a calibrated pair: ``<measure>.<statistic>_z`` and ``…_p`` for the pair statistics."""
    rows = table[table["statistic"] != "cell"]
    metrics = {}
    for row in rows.itertuples():
        metrics[f"{row.measure}.{row.statistic}_z"] = float(row.z)
        metrics[f"{row.measure}.{row.statistic}_p"] = float(row.p_value)
    return metrics


def _removed(measures: MeasureSettings) -> str:
    return f"top{measures.remedy_top_dimensions}_removed"


def _remedy_rows(
    raw_a: list[np.ndarray],
    raw_b: list[np.ndarray] | None,
    measures: MeasureSettings,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> pd.DataFrame:
    """The remedy measures on the raw rows, standardised, and without the largest dimensions (module docstring)."""
    variants = {
        "raw": lambda rows: rows,
        "standardised": standardise_dimensions,
        _removed(measures): lambda rows: remove_top_dimensions(rows, measures.remedy_top_dimensions),
    }
    parts = []
    for variant, transform in variants.items():
        part = measure_table(
            [transform(layer) for layer in raw_a],
            None if raw_b is None else [transform(layer) for layer in raw_b],
            list(measures.remedy_measures),
            pairs=pairs,
        )
        parts.append(part.assign(variant=variant))
    return pd.concat(parts, ignore_index=True)


def remedy_summary(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per pair, remedy measure and variant: the mean over relative-depth-matched layers."""
    records = []
    for table in tables:
        checks = table[(table["variant"] != CONFIGURED) & ~table["variant"].isin(GROUNDING_VARIANTS)]
        for (name, variant), rows in checks.groupby(["measure", "variant"], sort=False):
            matrix = rows.pivot(index="layer_a", columns="layer_b", values="value").sort_index().sort_index(axis=1)
            values = [matrix.to_numpy()[i, j] for i, j in match_layers_by_relative_depth(*matrix.shape)]
            records.append(
                {
                    "model_a": table["model_a"].iloc[0],
                    "model_b": table["model_b"].iloc[0],
                    "measure": name,
                    "variant": variant,
                    "matched_mean": float(np.mean(values)),
                    "n_matched_layers": len(values),
                }
            )
    return pd.DataFrame(records, columns=REMEDY_COLUMNS)


def layer_shares(layers: Sequence[np.ndarray], model: str, layer_ids: Sequence[int]) -> pd.DataFrame:
    """Each layer's top-1 and top-3 variance shares (:mod:`thinkalike.measures.rogue`); one log line (a warning
    record of this module's logger, not a Python warning) names the model, every layer where one dimension
    carries more than :data:`~thinkalike.measures.rogue.ROGUE_SHARE` of the variance, and the settings that
    change it."""
    table = pd.DataFrame(
        {
            "model": model,
            "layer": np.asarray(layer_ids, dtype=np.int64),
            "top1_share": [top_share(rows, 1) for rows in layers],
            "top3_share": [top_share(rows, min(3, rows.shape[1])) for rows in layers],
            "n_tokens": [len(rows) for rows in layers],
        }
    )
    rogue = table[table["top1_share"] > ROGUE_SHARE]
    if len(rogue):
        logger.warning(
            "%s: one dimension carries more than %.0f%% of the variance at layer(s) %s: it decides CKA, "
            "cosine and Procrustes (set %s.standardise: true or %s.remove_top_dimensions: k to change it)",
            model,
            100 * ROGUE_SHARE,
            ", ".join(f"{row.layer} ({row.top1_share:.0%})" for row in rogue.itertuples()),
            WHERE,
            WHERE,
        )
    return table[SHARE_COLUMNS]


def dimension_shares(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Every model's layers' variance shares, once per model and layer, from the pairs' tables."""
    parts = []
    for table in tables:
        for side in ("a", "b"):
            parts.append(
                table[
                    [f"model_{side}", f"layer_{side}", f"top1_share_{side}", f"top3_share_{side}", "n_tokens"]
                ].set_axis(SHARE_COLUMNS, axis=1)
            )
    if not parts:
        return pd.DataFrame(columns=SHARE_COLUMNS)
    return (
        pd.concat(parts, ignore_index=True)
        .drop_duplicates(["model", "layer"])
        .sort_values(["model", "layer"])
        .reset_index(drop=True)
    )


def measure_matrix(table: pd.DataFrame, name: str) -> np.ndarray:
    """The (La, Lb) matrix of one measure of a pair's long table (the ``configured`` rows)."""
    rows = table[(table["measure"] == name) & (table["variant"] == CONFIGURED)]
    return rows.pivot(index="layer_a", columns="layer_b", values="value").sort_index().sort_index(axis=1).to_numpy()


def pair_measure_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per measure of a pair's table: the mean over relative-depth-matched layers and, for metrics, the product
    distance over them (module docstring)."""
    records = []
    for name in dict.fromkeys(table.loc[table["variant"] == CONFIGURED, "measure"]):
        matrix = measure_matrix(table, name)
        values = np.array([matrix[i, j] for i, j in match_layers_by_relative_depth(*matrix.shape)])
        records.append(
            {
                "model_a": table["model_a"].iloc[0],
                "model_b": table["model_b"].iloc[0],
                "measure": name,
                "kind": MEASURES[name].kind,
                "matched_mean": float(values.mean()),
                "model_distance": float(np.sqrt(np.sum(values**2))) if MEASURES[name].is_metric else float("nan"),
                "n_matched_layers": len(values),
                "n_tokens": int(table["n_tokens"].iloc[0]),
            }
        )
    return pd.DataFrame(records, columns=SUMMARY_COLUMNS)


def measures_summary(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """:func:`pair_measure_summary` of every pair, one table."""
    parts = [pair_measure_summary(table) for table in tables if len(table)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=SUMMARY_COLUMNS)


GROUNDING_TESTS = (
    "monotonicity",
    "sensitivity",
    "null_permuted",
    "null_independent",
    "specificity",
    "trained_vs_untrained",
)
GROUNDING_COLUMNS = [
    "measure",
    "kind",
    *(column for test in GROUNDING_TESTS for column in (test, f"{test}_chance")),
    "n_models",
    "n_pairs",
    "n_untrained_pairs",
]


def untrained_models(tables: Sequence[pd.DataFrame]) -> set[str]:
    """The models whose ``spec`` column names a zoo initialisation (``zoo:<m>?weights=initial``)."""
    found = set()
    for table in tables:
        for side in ("a", "b"):
            if len(table) and f"spec_{side}" in table:
                try:
                    if is_initialisation(str(table[f"spec_{side}"].iloc[0])):
                        found.add(str(table[f"model_{side}"].iloc[0]))
                except ModelSourceError:  # not a model spec (a hand-made table): a trained model
                    continue
    return found


def _sensitivities(table: pd.DataFrame, name: str, kind: str) -> list[float]:
    rows = table[(table["measure"] == name) & (table["variant"] == COMPONENTS)]
    return [
        sensitivity_score(layer.sort_values("removed_components")["value"].to_numpy(), kind)
        for _, layer in rows.groupby("layer_a")
    ]


def _null(tables: Sequence[pd.DataFrame], name: str, variant: str) -> float:
    values = [table.loc[(table["measure"] == name) & (table["variant"] == variant), "value"] for table in tables]
    values = pd.concat(values) if values else pd.Series(dtype=float)
    return null_level(MEASURES[name].alikeness(values.to_numpy())) if len(values) else float("nan")


def _ranked(rows: pd.DataFrame, positives: list[bool], kind: str, what: str) -> tuple[float, float]:
    if not any(positives) or all(positives):
        return float("nan"), float("nan")
    return separation_auprc(rows["matched_mean"].to_numpy(), positives, kind, what=what)


def grounding_table(tables: Sequence[pd.DataFrame], groups: Mapping[str, str]) -> pd.DataFrame:
    """Per measure, each grounding test's score beside its chance level (module docstring;
    :mod:`thinkalike.measures.grounding`): ``monotonicity`` (mean over the trained models compared with themselves
    that have at least 3 layers), ``sensitivity`` (mean over their middle layers), ``null_permuted`` and
    ``null_independent`` (mean alikeness of their control rows: one per model), ``specificity`` (pairs of trained models, ranked by
    matched-layer mean: one ``cka.groups`` label above two labels) and ``trained_vs_untrained`` (pairs of trained
    models of one label above pairs of a trained and an untrained model). NaN where a test has nothing to score."""
    summary = measures_summary(tables)
    untrained = untrained_models(tables)
    intra = [
        table
        for table in tables
        if len(table)
        and table["model_a"].iloc[0] == table["model_b"].iloc[0]
        and table["model_a"].iloc[0] not in untrained
    ]
    different = summary[summary["model_a"] != summary["model_b"]]
    trained_pair = ~different["model_a"].isin(untrained) & ~different["model_b"].isin(untrained)
    labelled = different[trained_pair & different["model_a"].isin(groups) & different["model_b"].isin(groups)]
    replica = labelled[
        np.array([groups[a] == groups[b] for a, b in zip(labelled["model_a"], labelled["model_b"])], dtype=bool)
    ]
    mixed = different[different["model_a"].isin(untrained) != different["model_b"].isin(untrained)]
    records = []
    for name in dict.fromkeys(summary["measure"]):
        kind = MEASURES[name].kind
        monotone = [
            value
            for value in (layer_monotonicity(measure_matrix(table, name), kind) for table in intra)
            if np.isfinite(value)
        ]
        sensitive = [value for table in intra for value in _sensitivities(table, name, kind)]
        rows = labelled[labelled["measure"] == name]
        same = [groups[a] == groups[b] for a, b in zip(rows["model_a"], rows["model_b"])]
        controls = pd.concat([replica[replica["measure"] == name], mixed[mixed["measure"] == name]])
        trained = [not (a in untrained or b in untrained) for a, b in zip(controls["model_a"], controls["model_b"])]
        row = grounding_row(
            name,
            kind,
            monotonicity=float(np.mean(monotone)) if monotone else float("nan"),
            sensitivity=float(np.nanmean(sensitive)) if np.isfinite(sensitive).any() else float("nan"),
            null_permuted=_null(intra, name, PERMUTED),
            null_independent=_null(intra, name, INDEPENDENT),
            specificity=_ranked(rows, same, kind, "same_architecture"),
            trained_vs_untrained=_ranked(controls, trained, kind, "trained"),
        )
        records.append(
            {
                **row,
                "n_models": len(monotone),
                "n_pairs": len(rows),
                "n_untrained_pairs": int(len(controls) - sum(trained)),
            }
        )
    return pd.DataFrame(records, columns=GROUNDING_COLUMNS)


def measure_metrics(table: pd.DataFrame) -> dict[str, float]:
    """MLflow metrics of a pair (not of a model with itself): ``<measure>.matched_mean`` and, for metrics,
    ``<measure>.model_distance``."""
    metrics = {}
    for row in pair_measure_summary(table).itertuples():
        metrics[f"{row.measure}.matched_mean"] = row.matched_mean
        if np.isfinite(row.model_distance):
            metrics[f"{row.measure}.model_distance"] = row.model_distance
    return metrics
