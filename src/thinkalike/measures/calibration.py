r"""Calibrated scores: each reported statistic against its own permutation null.

Raw similarity scores are not comparable across model pairs: under independence they grow
with width (e.g. Procrustes and biased CKA), with depth, and with any search over layer pairs
(the maximum over L_a·L_b cells of pure noise grows with the number of cells). What makes a
score comparable is the null distribution of *the statistic actually reported*
(calibrated-similarity, 2026; ``DESIGN.md``, "Measures beyond CKA — references").

:func:`calibrate` takes the two models' layers (model A: ``layers_a[i]``, n × d_a; model B:
``layers_b[j]``, n × d_b; the same n tokens in the same order) and, per measure, three
statistics of the layer-pair table v_ij = measure(A_i, B_j) (:func:`~thinkalike.measures.
layerwise.measure_table`):

- ``"cell"``: each v_ij;
- ``"matched_mean"``: (1/m) Σ_{(i,j)∈M} v_ij over the m layer pairs M matched by relative
  depth (:func:`~thinkalike.measures.distances.match_layers_by_relative_depth`);
- ``"best"``: the best layer pair, max_ij v_ij for a similarity and **min_ij v_ij for a
  distance** (the most similar pair either way). Its row names the observed best pair (the
  first in row-major order on ties); each null table's best may sit at another pair — the
  null is that of the maximum itself, search over pairs included.

Null. For p = 1..P, one permutation π_p of the n tokens, drawn by
``rng = numpy.random.default_rng(seed)`` as ``rng.permutation(n)`` P times in turn
(:func:`null_permutations`), reorders the rows of *every* layer of model B:
B_j ↦ B_j[π_p] (token t of A is paired with token π_p(t) of B). The whole table
v^(p)_ij = measure(A_i, B_j[π_p]) is recomputed and the three statistics taken from it, giving
null samples T^(1..P) of each statistic T. This breaks the token correspondence but keeps
each model's own geometry, its layers' mutual dependence, and the width, depth and layer
search of the reported statistic. The exchangeability it relies on is of whole tokens: with
real text, neighbouring tokens are correlated within each model, and a uniform shuffle treats
them as unrelated, so small p-values say "more alike than under a random token pairing", not
more (a block or within-sentence permutation would be a stricter null; not implemented).

Calibrated score and p-value. With s = +1 for a similarity and s = −1 for a distance (so that
larger = more similar than chance for both kinds), over the F finite null samples (F = P
unless a permuted table has undefined cells):

    null_mean = (1/F) Σ_p T^(p),    null_std = sqrt( Σ_p (T^(p) − null_mean)² / (F − 1) )
    z         = s · (T_obs − null_mean) / null_std
    p_value   = (1 + #{p : s·T^(p) ≥ s·T_obs}) / (1 + F)

z ≈ 0 and p uniform on {1/(F+1), …, 1} when the models are unrelated (the observed table is
then exchangeable with the permuted ones); a model pair more alike than chance has z > 0 and
a small p (at best 1/(P+1): P bounds the resolution). ``null_mean``, ``null_std`` and
``observed`` are in the measure's own units (not sign-flipped). z is ±inf when the null has no
spread (null_std = 0) and NaN when T_obs = null_mean then, or when F < 2. A NaN cell makes
matched_mean and best NaN for that table (observed or permuted), as
:func:`~thinkalike.measures.distances.matched_summary` does by default; an undefined observed
statistic gives NaN z and p-value.

Exactness. The observed table is :func:`measure_table`'s own result; each null table equals
``measure_table(layers_a, [b[π_p] for b in layers_b], ...)`` to rounding (about 1e-13), but no
layer is decomposed again for a permutation: model A's layers are prepared once for all
permutations through the measures' public ``prepare``/``compare`` split
(:mod:`~thinkalike.measures.registry`), with preparations shared between measures as
``measure_table`` shares them, and model B's layers are prepared once too, each permutation
moving their preparations with the rows (a prepared input's ``permuted(π)``: the centred rows,
bases and row factors, Grams, RDM entries and k-NN masks of X[π] are those of X relabelled, with
no new decomposition, Gram product, distance or sort). A preparation without ``permuted``, or
whose ``permuted`` returns None (a k-NN graph with ties at a k-th neighbour, where the tie rule
follows the token order), is prepared again from the permuted rows.

Cost: one observed table plus P null tables, each L_a·L_b comparisons per measure and L_b
relabellings of B's preparations (A's L_a and B's L_b preparations are done once) — about P + 1
``measure_table`` calls, somewhat less for measures whose preparation dominates (RSA, k-NN).
Memory: A's preparations for all layers at once (``measure_table`` keeps one row's), e.g. an
n × n mask (k-NN) and an n(n−1)/2 vector (RSA) per layer, plus the P × measures × L_a × L_b null
values. ``benchmarks/measures.py``'s grid mode times one calibration with the configured
measures and permutations.
"""

from __future__ import annotations

import logging
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from thinkalike.measures.distances import match_layers_by_relative_depth
from thinkalike.measures.inputs import Layer
from thinkalike.measures.layerwise import checked_pair, measure_plan, measure_table, wanted_cells
from thinkalike.measures.registry import Measure

logger = logging.getLogger(__name__)

STATISTICS: tuple[str, ...] = ("cell", "matched_mean", "best")
COLUMNS: tuple[str, ...] = (
    "measure",
    "statistic",
    "layer_a",
    "layer_b",
    "observed",
    "null_mean",
    "null_std",
    "z",
    "p_value",
    "n_permutations",
    "n_null",
)
NO_LAYER = -1  # layer_a / layer_b of a matched_mean row (it has no single cell)


@dataclass(frozen=True, eq=False)
class CalibrationResult:
    """What :func:`calibrate` returns (module docstring for the formulas).

    ``scores``: the long table, columns :data:`COLUMNS`: per measure (in the order given),
    the ``"cell"`` rows in row-major order (layer_b fastest), then ``"matched_mean"``
    (layer_a = layer_b = −1), then ``"best"`` (the observed best pair; −1 if undefined).
    ``n_permutations`` is P, ``n_null`` the F finite null samples used.
    ``observed``: :func:`~thinkalike.measures.layerwise.measure_table`'s table.
    ``null_cells``: (P, measures, L_a, L_b) the permuted tables' raw values.
    ``null_matched_mean``, ``null_best``: (P, measures) the statistics of each permuted table.
    ``permutations``: (P, n) the token permutations, row p applied to every layer of model B.
    """

    scores: pd.DataFrame
    observed: pd.DataFrame
    null_cells: np.ndarray
    null_matched_mean: np.ndarray
    null_best: np.ndarray
    permutations: np.ndarray
    measures: tuple[str, ...]


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def null_permutations(n_tokens: int, n_permutations: int, seed: int) -> np.ndarray:
    """(n_permutations, n_tokens) int array: row p is the p-th ``rng.permutation(n_tokens)`` of
    ``rng = numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(n_tokens) for _ in range(n_permutations)])


def _statistics(
    values: np.ndarray, orientation: np.ndarray, pairs: list[tuple[int, int]], wanted: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """matched_mean, best and the flat index of the best cell, for values (..., measures, L_a, L_b); ``best`` over
    the ``wanted`` cells (L_a, L_b; None: all).

    NaN (and index −1) where a table has a NaN cell among them (for matched_mean: a NaN matched cell).
    """
    rows, cols = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    matched = values[..., rows, cols].mean(axis=-1)
    flat = values.reshape(values.shape[:-2] + (-1,)) * orientation[:, None]
    searched = np.ones(flat.shape[-1], dtype=bool) if wanted is None else wanted.ravel()
    undefined = (np.isnan(flat) & searched).any(axis=-1)
    index = np.argmax(np.where(np.isnan(flat) | ~searched, -np.inf, flat), axis=-1)
    best = np.take_along_axis(flat, index[..., None], axis=-1)[..., 0] * orientation
    return matched, np.where(undefined, np.nan, best), np.where(undefined, NO_LAYER, index)


def _scores(observed: np.ndarray, null: np.ndarray, orientation: np.ndarray) -> dict[str, np.ndarray]:
    """null_mean, null_std, z, p_value, n_null for observed (measures, ...) against null (P, measures, ...)."""
    shape = (-1,) + (1,) * (observed.ndim - 1)
    sign = orientation.reshape(shape)
    finite = np.isfinite(null)
    n_null = finite.sum(axis=0)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN or one-sample nulls give NaN moments
        null_mean = np.nanmean(np.where(finite, null, np.nan), axis=0)
        null_std = np.nanstd(np.where(finite, null, np.nan), axis=0, ddof=1)
        null_std = np.where(n_null >= 2, null_std, np.nan)
        z = sign * (observed - null_mean) / null_std
    extreme = (finite & (sign[None] * null >= sign[None] * observed[None])).sum(axis=0)
    p_value = np.where(np.isnan(observed) | (n_null == 0), np.nan, (1.0 + extreme) / (1.0 + n_null))
    return {"null_mean": null_mean, "null_std": null_std, "z": z, "p_value": p_value, "n_null": n_null}


def _log_undefined(caught: dict[tuple[str, type[Warning], str], set[int]], n_permutations: int) -> None:
    """One warning log line per measure and message, with how many permutations raised it."""
    for (name, _category, message), permutations in caught.items():
        logger.warning(
            "%s [calibrate null, %s: in %d of %d permutations]", message, name, len(permutations), n_permutations
        )


def calibrate(
    layers_a: Sequence[Any],
    layers_b: Sequence[Any],
    measures: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    n_permutations: int,
    seed: int,
    progress: str | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> CalibrationResult:
    """Observed cell, matched_mean and best statistics, their permutation nulls, z and p (module docstring).

    ``layers_a``/``layers_b``: sequences of (n × d) matrices (numpy, torch), the same n tokens
    throughout (model B is required: a model against itself has no independent null).
    ``measures``/``options``: as :func:`~thinkalike.measures.layerwise.measure_table`.
    ``n_permutations``: P ≥ 2 permuted tables (the smallest p-value is 1/(P+1)). ``seed``:
    of :func:`null_permutations`. ``progress``: the description of a tqdm bar over the
    permutations (``leave=False``), or None. Every argument is checked, raising ``ValueError``
    naming it, before any table is computed. Cost: about P + 1 tables. ``pairs``: only these (layer_a, layer_b)
    cells, as :func:`~thinkalike.measures.layerwise.measure_table` takes them (the others NaN, with NaN scores);
    the relative-depth-matched pairs are added (matched_mean needs them), and ``best`` is the best of these cells
    in the observed and in every permuted table alike.
    """
    _check_null_arguments(n_permutations, seed, layers_b)
    matrices_a, matrices_b = checked_pair(layers_a, layers_b)
    n_tokens = matrices_a[0].shape[0]
    preparer = _NullPreparer.of(measures, options, n_tokens)
    names = preparer.names
    orientation = np.array([1.0 if entry.kind == "similarity" else -1.0 for entry in preparer.entries])
    n_a, n_b = len(matrices_a), len(matrices_b)
    matched_pairs = match_layers_by_relative_depth(n_a, n_b)
    grid = None if pairs is None else sorted({(i, j) for i, j in pairs} | set(matched_pairs))
    wanted = wanted_cells(grid, n_a, n_b)

    observed_table = measure_table(matrices_a, matrices_b, names, options, pairs=grid)
    observed = observed_table["value"].to_numpy().reshape(len(names), n_a, n_b)
    permutations = null_permutations(n_tokens, n_permutations, seed)
    null = preparer.null_tables(matrices_a, matrices_b, permutations, wanted, progress)

    searched = None if grid is None else wanted
    observed_stats = _statistics(observed, orientation, matched_pairs, searched)
    null_matched, null_best, _ = _statistics(null, orientation, matched_pairs, searched)
    table = _score_table(
        names, orientation, n_permutations, (observed, null), observed_stats, (null_matched, null_best)
    )
    return CalibrationResult(table, observed_table, null, null_matched, null_best, permutations, tuple(names))


def _check_null_arguments(n_permutations: int, seed: int, layers_b: Sequence[Any] | None) -> None:
    """``ValueError`` naming ``n_permutations`` (an integer ≥ 2), ``seed`` (a non-negative integer) or
    ``layers_b`` (required), in that order."""
    if not _is_int(n_permutations) or n_permutations < 2:
        raise ValueError(f"n_permutations: {n_permutations!r} must be an integer ≥ 2 (a null needs a spread)")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed: {seed!r} must be a non-negative integer (numpy.random.default_rng)")
    if layers_b is None:
        raise ValueError("layers_b: required; calibrating a model against itself has no independent null")


#: (measure, warning category, message) → the permutations (−1: the unpermuted preparations) that raised it
_Caught = dict[tuple[str, type[Warning], str], set[int]]


@dataclass
class _NullPreparer:
    """The measures of one calibration (:func:`~thinkalike.measures.layerwise.measure_plan`: names, registry
    entries, options, preparation keys) and the permuted tables they give (:meth:`null_tables`), each layer
    prepared once per preparation key as ``measure_table`` shares them; ``caught`` collects the warnings of the
    preparations and comparisons, per permutation."""

    names: list[str]
    entries: list[Measure]
    given: list[dict[str, Any]]
    keys: list[Any]
    first_of_key: dict[Any, int]
    caught: _Caught = field(default_factory=dict)

    @classmethod
    def of(
        cls, measures: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None, n_tokens: int
    ) -> _NullPreparer:
        """The checked plan of ``measures`` (``ValueError`` naming a bad measure or option)."""
        names, entries, given, keys = measure_plan(measures, options, n_tokens)
        first_of_key = {key: m for m, key in reversed(list(enumerate(keys)))}
        return cls(names, entries, given, keys, first_of_key)

    def _note(self, m: int, records: Sequence[warnings.WarningMessage], p: int) -> None:
        """Notes the warnings ``records`` of measure ``m`` under permutation ``p``."""
        for record in records:
            self.caught.setdefault((self.names[m], record.category, str(record.message)), set()).add(p)

    def prepare_all(self, matrix: np.ndarray, side: str, index: int, p: int) -> dict[Any, Any]:
        """Layer ``index`` of ``side`` prepared for every preparation key."""
        prepared, layer = {}, Layer(matrix)  # the centred matrix and its SVD shared by the preparations
        for key, m in self.first_of_key.items():
            with warnings.catch_warnings(record=True) as log:
                warnings.simplefilter("always")
                prepared[key] = self.entries[m].preparer(layer, name=f"{side}[{index}]", **self.given[m])
            self._note(m, log, p)
        return prepared

    def permuted_all(
        self, base: dict[Any, Any], matrix: np.ndarray, index: int, p: int, permutation: np.ndarray
    ) -> dict[Any, Any]:
        """B's layer ``index`` with its rows permuted: each preparation moved with its rows where it can be
        (``permuted``; module docstring), else prepared again from the permuted rows."""
        prepared = {}
        for key, m in self.first_of_key.items():
            move = getattr(base[key], "permuted", None)
            moved = None if move is None else move(permutation)
            if moved is None:
                with warnings.catch_warnings(record=True) as log:
                    warnings.simplefilter("always")
                    moved = self.entries[m].preparer(matrix[permutation], name=f"layers_b[{index}]", **self.given[m])
                self._note(m, log, p)
            prepared[key] = moved
        return prepared

    def null_tables(
        self,
        matrices_a: Sequence[np.ndarray],
        matrices_b: Sequence[np.ndarray],
        permutations: np.ndarray,
        wanted: np.ndarray,
        progress: str | None,
    ) -> np.ndarray:
        """(P, measures, L_a, L_b): the ``wanted`` cells of each permuted table (the others NaN), A's and B's
        layers prepared once; logs the warnings of the permuted tables (:func:`_log_undefined`)."""
        n_permutations = len(permutations)
        null = np.full((n_permutations, len(self.names), len(matrices_a), len(matrices_b)), np.nan)
        prepared_a = [self.prepare_all(matrix, "layers_a", i, -1) for i, matrix in enumerate(matrices_a)]
        for i, prepared in enumerate(prepared_a):  # layer i of A is the first argument of P · (its row's cells) pairs
            for prepared_input in prepared.values():
                expect = getattr(prepared_input, "expect_comparisons", None)
                if expect is not None:
                    expect(n_permutations * int(wanted[i].sum()))
        base_b = [self.prepare_all(matrix, "layers_b", j, -1) for j, matrix in enumerate(matrices_b)]
        self.caught.clear()  # A's and B's preparation warnings were already issued by the observed table
        bar = None if progress is None else tqdm(total=n_permutations, desc=progress, leave=False)
        try:
            for p, permutation in enumerate(permutations):
                self.fill_permuted(null[p], p, permutation, prepared_a, base_b, matrices_b, wanted)
                if bar is not None:
                    bar.update()
        finally:
            if bar is not None:
                bar.close()
        _log_undefined(self.caught, n_permutations)
        return null

    def fill_permuted(
        self,
        table: np.ndarray,
        p: int,
        permutation: np.ndarray,
        prepared_a: Sequence[dict[Any, Any]],
        base_b: Sequence[dict[Any, Any]],
        matrices_b: Sequence[np.ndarray],
        wanted: np.ndarray,
    ) -> None:
        """Fills ``table`` (measures, L_a, L_b) with the ``wanted`` cells of permutation ``p``'s table: B's layers
        with their rows permuted, against A's prepared layers."""
        for j, matrix in enumerate(matrices_b):
            if not wanted[:, j].any():
                continue
            prepared_b = self.permuted_all(base_b[j], matrix, j, p, permutation)
            with warnings.catch_warnings(record=True) as log:
                warnings.simplefilter("always")
                for i in np.flatnonzero(wanted[:, j]).tolist():
                    for m, entry in enumerate(self.entries):
                        start = len(log)
                        table[m, i, j] = entry.comparer(prepared_a[i][self.keys[m]], prepared_b[self.keys[m]])
                        self._note(m, log[start:], p)


def _score_table(
    names: Sequence[str],
    orientation: np.ndarray,
    n_permutations: int,
    tables: tuple[np.ndarray, np.ndarray],
    observed_stats: tuple[np.ndarray, np.ndarray, np.ndarray],
    null_stats: tuple[np.ndarray, np.ndarray],
) -> pd.DataFrame:
    """The long table of :class:`CalibrationResult` (columns :data:`COLUMNS`): per measure its cells, its
    matched_mean and its best pair, each scored against its null. ``tables``: the observed (measures, L_a, L_b)
    and null (P, measures, L_a, L_b) values; ``observed_stats``: the observed matched_mean, best and best cell's
    flat index; ``null_stats``: the null's matched_mean and best (:func:`_statistics`)."""
    observed, null = tables
    observed_matched, observed_best, best_index = observed_stats
    null_matched, null_best = null_stats
    cell_scores = _scores(observed, null, orientation)
    matched_scores = _scores(observed_matched, null_matched, orientation)
    best_scores = _scores(observed_best, null_best, orientation)
    n_a, n_b = observed.shape[-2:]
    layer_a, layer_b = np.meshgrid(np.arange(n_a), np.arange(n_b), indexing="ij")
    blocks = []
    for m, name in enumerate(names):
        best_a, best_b = (NO_LAYER, NO_LAYER) if best_index[m] < 0 else divmod(int(best_index[m]), n_b)
        for statistic, cells_a, cells_b, values, scores in (
            (
                "cell",
                layer_a.ravel(),
                layer_b.ravel(),
                observed[m].ravel(),
                {k: v[m].ravel() for k, v in cell_scores.items()},
            ),
            (
                "matched_mean",
                [NO_LAYER],
                [NO_LAYER],
                [observed_matched[m]],
                {k: [v[m]] for k, v in matched_scores.items()},
            ),
            ("best", [best_a], [best_b], [observed_best[m]], {k: [v[m]] for k, v in best_scores.items()}),
        ):
            blocks.append(_score_block(name, statistic, (cells_a, cells_b), values, scores, n_permutations))
    table = pd.concat(blocks, ignore_index=True)[list(COLUMNS)]
    table["measure"] = table["measure"].astype(object)
    table["statistic"] = table["statistic"].astype(object)
    return table


def _score_block(
    name: str,
    statistic: str,
    cells: tuple[Any, Any],
    values: Any,
    scores: Mapping[str, Any],
    n_permutations: int,
) -> pd.DataFrame:
    """The rows of one measure's ``statistic``: its cells ``(layer_a, layer_b)``, observed values and scores."""
    cells_a, cells_b = cells
    return pd.DataFrame(
        {
            "measure": name,
            "statistic": statistic,
            "layer_a": np.asarray(cells_a, dtype=np.int64),
            "layer_b": np.asarray(cells_b, dtype=np.int64),
            "observed": np.asarray(values, dtype=np.float64),
            **{k: np.asarray(scores[k], dtype=np.float64) for k in ("null_mean", "null_std", "z", "p_value")},
            "n_permutations": np.int64(n_permutations),
            "n_null": np.asarray(scores["n_null"], dtype=np.int64),
        }
    )
