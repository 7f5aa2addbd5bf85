r"""Every registered measure on every layer pair of two models, each layer prepared once.

:func:`measure_table` compares layer i of model A (``layers_a[i]``, n × d_a) with layer j of
model B (``layers_b[j]``, n × d_b) by each measure of :mod:`thinkalike.measures.registry`.
Every layer of both models holds the same n tokens in the same order.

Cost. Each measure is split into a per-input preparation and a comparison
(``Measure.prepare`` / ``Measure.compare``; ``function(x, y) = compare(prepare(x), prepare(y))``).
A layer is prepared once per measure — or once per group of measures that share a preparation
with the same options (procrustes and angular_shape at alpha = 1; mean_cca and pwcca; the
three k-NN measures at one k) — and reused for all its layer pairs, so a table of L_a × L_b
pairs costs (L_a + L_b) preparations plus L_a·L_b comparisons per measure, instead of
2·L_a·L_b preparations. What each preparation and comparison costs is in the measure's module
docstring; in short (d ≤ n):

================================  =========================================  ===========================
measure                           preparation (per layer)                    comparison (per pair)
================================  =========================================  ===========================
cka                               centring, XcᵀXc: n·d²                      XcᵀYc: n·d_a·d_b
procrustes, angular_shape         centring (SVD for alpha < 1: n·d²)         XcᵀYc and its singular values
mean_cca, pwcca                   thin QR (SVD when rank-deficient): n·d²    Q_xᵀQ_y and its SVD
svcca                             thin SVD: n·d²                             Q_xᵀQ_y and its singular values
rsa                               RDM n²·d, its ranks n² log n               a dot product: n²/2
mutual_knn, knn_jaccard, cknna    cosine similarities n²·d, k-NN sets n²     n·k·log(n·k)
linear_predictivity               per fold and α, as predictor: n·d²         per fold: n·d_a·d_b
================================  =========================================  ===========================

Wide layers (d > n). The comparisons move to the token space where that is cheaper, each layer's
part still computed once (:mod:`thinkalike.measures.compact`): CKA takes ⟨XcXcᵀ, YcYcᵀ⟩_F (O(n²) per
pair) when d_a·d_b > n²; the shape metrics multiply n × n row factors (Xc = L·Qᵀ) instead of the
n × d bases; mean CCA and SVCCA take the sum of the correlations from the two bases' complements in
1⊥ when r_x + r_y > n − 1 (and PWCCA is 1 without a decomposition when a basis spans all of 1⊥);
linear predictivity leaves out the terms that vanish when a fold's U is square, and a predictor with
enough pairs in its row takes the Gram path (per-layer forms, one inner product per fold and α per
pair: :mod:`thinkalike.measures.ridge_gram`). Every value equals the direct computation to rounding
(``tests/measures/test_shared_work.py``: 1e-9 against the definitions). At 31 × 31 layers of d = 576
on n = 512 rows what is left per pair is mostly the shape metrics' singular values of an n × n
matrix (two per pair, O(n³) each; ``benchmarks/measures.py``'s grid mode times such a table).

Memory. A layer's preparations are dropped after the last row that needs them: model A's after
its row; model B's (and, comparing a model with itself, every layer's) after the last row with a
cell in its column — so every pair keeps them all, a grid of a few pairs per layer
(``pairs``) only a few. What only a first argument needs (linear predictivity's fold
decompositions, PWCCA's Q_xᵀXc) is dropped when the layer's row is done, comparing a model with
itself (the prepared input's ``release()``).

Work shared between measures. Each layer is handed to the preparations as an
:class:`~thinkalike.measures.inputs.Layer`, so that its centred matrix and their thin SVD are computed once for
the shape metrics (α < 1), the CCA family (reduced to ``max_dims``) and SVCCA, and dropped after the
layer's first pair (which prepares it for every measure).

Strategy. At the start of its row, a layer's preparation that has an ``expect_comparisons(count)`` method is
told how many pairs it is the first argument of (linear predictivity then chooses between its per-pair and
its per-layer evaluation: :mod:`thinkalike.measures.predictivity`, "The Gram path").

Grid. ``pairs`` limits the table to some layer pairs (the others NaN); ``estimate`` receives one line
after the first few pairs: the pairs × measures and the whole table's time extrapolated from them
(:func:`cost_estimate`).

Preparing each layer once, rather than in every pair's call of the measure functions, is what
makes a table of all the measures cheap: the per-layer work (centring, decompositions, RDMs) is
done once per layer instead of twice per pair (``benchmarks/measures.py`` times each measure per
layer pair as a ratio to CKA's, with ``--direct`` the per-pair calls too).

Self-comparison. ``layers_b=None`` compares model A with itself: each layer is prepared once
(as x and as y), and for a measure registered as symmetric the pair (i, j) with i > j is not
computed but copied from (j, i) — a mirror image, equal to the explicit (layers, layers) table
to rounding. The diagonal (i, i) is computed like any other pair (so it shows what the measure
gives for identical inputs, e.g. CKA's 1 up to rounding; a shape distance of a layer to itself
is sqrt(2 − 2·cos) or arccos(cos) at cos = 1 − O(ε), about 1e-8 rather than 0). Asymmetric
measures (pwcca, cknna, linear_predictivity) are computed on every pair.

Undefined values (e.g. a layer that is constant over tokens) are NaN. The measure's
``RuntimeWarning`` is collected and logged (a warning log line, not a Python warning) once per
measure and reason when the table is done, naming the layer pairs it was raised for (x is layer_a,
y is layer_b; a mirrored cell is not listed again) or the layers being prepared. Warnings are caught with
:class:`warnings.catch_warnings`, which is not thread-safe: run tables in processes, not
threads, when warnings matter.
"""

from __future__ import annotations

import inspect
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError
from tqdm.auto import tqdm

from thinkalike.measures import predictivity
from thinkalike.measures.inputs import Layer, checked_matrix
from thinkalike.measures.registry import MEASURE_NAMES, MEASURES, Measure

logger = logging.getLogger(__name__)

COLUMNS: tuple[str, ...] = ("measure", "layer_a", "layer_b", "value")
ESTIMATE_AFTER = 5  # layer pairs timed before measure_table's cost estimate
_LISTED_PAIRS = 8  # layer pairs named in a re-issued warning


# --------------------------------------------------------------------------- checks


def _options_problem(entry: Measure, given: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first option of ``given`` the measure's options model (:attr:`Measure.options`) refuses, and why."""
    try:
        entry.options.model_validate(dict(given))
    except ValidationError as error:
        first = error.errors()[0]
        return str(first["loc"][0]), str(first["msg"]).removeprefix("Value error, ")
    return None


def _effective_options(entry: Measure, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options the measure will run with: those given, then its options model's defaults."""
    return {**entry.options().model_dump(), **given}


def check_measures(
    measures: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None,
    n_tokens: int | None = None,
    where: str = "measures",
) -> None:
    """Raise ``ValueError`` naming the setting at fault, before any expensive work.

    ``measures``: registered names (:data:`~thinkalike.measures.registry.MEASURE_NAMES`), each
    once. ``options[name]``: keyword options of that measure's function, only for listed
    measures, each checked by the measure's options model (:attr:`~thinkalike.measures.measure.Measure.options`:
    e.g. ``k`` an integer ≥ 1, cknna's ≥ 2; ``alpha`` in [0, 1]; ``keep`` in (0, 1]).
    With ``n_tokens``, also that every measure has enough tokens and that k (given or the
    default) is < n_tokens and n_folds ≤ n_tokens / 2. Messages start with ``where``, e.g.
    ``cka.measures.options.mutual_knn.k: 600 must be < 512 tokens``.
    """
    if isinstance(measures, str) or not isinstance(measures, Sequence):
        raise ValueError(f"{where}: must be a list of measure names; got {measures!r}")
    seen: set[str] = set()
    for name in measures:
        if name not in MEASURES:
            raise ValueError(f"{where}: unknown measure {name!r}; known measures: {', '.join(MEASURE_NAMES)}")
        if name in seen:
            raise ValueError(f"{where}: {name!r} is listed more than once")
        seen.add(name)
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        raise ValueError(f"{where}.options: must be a mapping from measure name to its options; got {options!r}")
    for name, given in options.items():
        if name not in seen:
            listed = ", ".join(measures) if measures else "none"
            raise ValueError(
                f"{where}.options.{name}: options given for a measure that is not in {where} (listed: {listed})"
            )
        if not isinstance(given, Mapping):
            raise ValueError(f"{where}.options.{name}: must be a mapping from option to value; got {given!r}")
        allowed = list(MEASURES[name].options.model_fields)
        for key in given:
            if key not in allowed:
                takes = f"its options: {', '.join(allowed)}" if allowed else "it takes no options"
                raise ValueError(f"{where}.options.{name}.{key}: not an option of {name} ({takes})")
        problem = _options_problem(MEASURES[name], given)
        if problem is not None:
            raise ValueError(f"{where}.options.{name}.{problem[0]}: {problem[1]}")
    if n_tokens is None:
        return
    for name in measures:
        given = options.get(name, {})
        effective = _effective_options(MEASURES[name], given)
        for key in ("k", "n_folds"):
            if key not in effective:
                continue
            value = effective[key]
            shown = f"{value!r}" if key in given else f"{value!r} (the default)"
            if key == "k" and value >= n_tokens:
                raise ValueError(
                    f"{where}.options.{name}.k: {shown} must be < {n_tokens} tokens (a token is not its own neighbour)"
                )
            if key == "n_folds" and predictivity.min_tokens(value) > n_tokens:
                raise ValueError(
                    f"{where}.options.{name}.n_folds: {shown} must be ≤ {n_tokens // 2} for "
                    f"{n_tokens} tokens (two tokens per fold at least)"
                )
        minimum = MEASURES[name].min_tokens
        if n_tokens < minimum:
            raise ValueError(f"{where}: {name} needs at least {minimum} tokens; got {n_tokens}")


def fit_to_rows(
    measures: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None, n_tokens: int, width: int
) -> tuple[list[str], dict[str, dict[str, Any]], list[str]]:
    """The measures as ``n_tokens`` rows allow them on layers up to ``width`` wide: (kept names, options, notes).

    A measure with a rows requirement (:attr:`~thinkalike.measures.registry.Measure.rows_per_dimension`) gets
    ``max_dims = n_tokens // rows_per_dimension`` unless its options set ``max_dims``; when that is below 1 it
    is left out. ``notes`` has one line for the measures working in a reduced space (``max_dims`` < ``width``) and
    one for those left out, each naming the setting that changes it.
    """
    fitted = {name: dict(given) for name, given in (options or {}).items()}
    kept, reduced, dropped = [], [], []
    for name in measures:
        entry = MEASURES[name]
        limit = entry.max_dims(n_tokens)
        if limit is None or "max_dims" in fitted.get(name, {}):
            kept.append(name)
        elif limit < 1:
            dropped.append(name)
            fitted.pop(name, None)
        else:
            kept.append(name)
            fitted.setdefault(name, {})["max_dims"] = limit
            if limit < width:
                reduced.append(name)
    notes = []
    if reduced:
        limit = MEASURES[reduced[0]].max_dims(n_tokens)
        notes.append(
            f"{', '.join(reduced)} compare each layer's top {limit} principal components, not all {width} "
            f"dimensions: {n_tokens} rows support {limit} "
            f"({MEASURES[reduced[0]].rows_per_dimension} rows per dimension; more rows: max_tokens)"
        )
    if dropped:
        notes.append(
            f"{', '.join(dropped)} left out: {n_tokens} rows are fewer than "
            f"{MEASURES[dropped[0]].rows_per_dimension} per dimension (more rows: max_tokens)"
        )
    return kept, fitted, notes


# --------------------------------------------------------------------------- the table


def checked_layers(layers: Sequence[Any], side: str) -> list[np.ndarray]:
    """Every layer of one side as a checked float64 matrix (``side``: the parameter's name for messages)."""
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence) or len(layers) == 0:
        raise ValueError(f"{side}: must be a non-empty sequence of (tokens, features) matrices")
    return [
        checked_matrix(layer, f"{side}[{i}]", measure="measure_table", min_tokens=1) for i, layer in enumerate(layers)
    ]


def checked_pair(layers_a: Sequence[Any], layers_b: Sequence[Any] | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Both sides' checked layers (``layers_b`` None: model a's own), every layer with the same tokens (rows)."""
    matrices_a = checked_layers(layers_a, "layers_a")
    matrices_b = matrices_a if layers_b is None else checked_layers(layers_b, "layers_b")
    n_tokens = matrices_a[0].shape[0]
    for side, matrices in (("layers_a", matrices_a), ("layers_b", matrices_b)):
        for i, matrix in enumerate(matrices):
            if matrix.shape[0] != n_tokens:
                raise ValueError(
                    f"{side}[{i}]: has {matrix.shape[0]} tokens but layers_a[0] has {n_tokens}; "
                    "every layer of both models must hold the same tokens (rows)"
                )
    return matrices_a, matrices_b


def measure_plan(
    measures: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None, n_tokens: int
) -> tuple[list[str], list[Measure], list[dict[str, Any]], list[Any]]:
    """After :func:`check_measures`: the names, their registry entries, each one's options and its preparation
    key (:func:`preparation_key`: equal keys share one preparation per layer)."""
    check_measures(measures, options, n_tokens)
    names = list(measures)
    options = {} if options is None else options
    entries = [MEASURES[name] for name in names]
    given = [dict(options.get(name, {})) for name in names]
    return names, entries, given, [preparation_key(m, entry, given[m]) for m, entry in enumerate(entries)]


def _frozen(value: Any) -> Any:
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(_frozen(v) for v in np.asarray(value, dtype=object).ravel())
    return value


def preparation_key(index: int, entry: Measure, given: Mapping[str, Any]) -> Any:
    """Equal for measures whose preparations are interchangeable: same function, same options."""
    bound = inspect.signature(entry.preparer).bind_partial(None, **given)
    bound.apply_defaults()
    arguments = list(bound.arguments.items())[1:]
    key = (entry.prepare, tuple((k, _frozen(v)) for k, v in arguments if k != "name"))
    try:
        hash(key)
    except TypeError:
        return ("unshared", index)
    return key


def _listed(places: list[str]) -> str:
    shown = ", ".join(places[:_LISTED_PAIRS])
    return shown + (f" and {len(places) - _LISTED_PAIRS} more" if len(places) > _LISTED_PAIRS else "")


def _log_undefined(caught: list[tuple[str, bool, str, warnings.WarningMessage]], side_b: str) -> None:
    """One log line per measure and message, naming its layer pairs (or the layers being prepared)."""
    grouped: dict[tuple[str, type[Warning], str], tuple[list[str], list[str]]] = {}
    for measure, preparing, place, record in caught:
        pairs, layers = grouped.setdefault((measure, record.category, str(record.message)), ([], []))
        (layers if preparing else pairs).append(place)
    for (measure, _category, message), (pairs, layers) in grouped.items():
        parts = []
        if pairs:
            parts.append(f"at (layer_a, layer_b) = {_listed(pairs)}; x is layers_a[layer_a], y is {side_b}[layer_b]")
        if layers:
            parts.append(f"while preparing {_listed(layers)}")
        logger.warning("%s [measure_table, %s %s]", message, measure, "; ".join(parts))


def wanted_cells(pairs: Sequence[tuple[int, int]] | None, n_a: int, n_b: int) -> np.ndarray:
    """(n_a, n_b) bool: the cells of ``pairs`` (None: every cell), each checked to be a layer pair."""
    if pairs is None:
        return np.ones((n_a, n_b), dtype=bool)
    wanted = np.zeros((n_a, n_b), dtype=bool)
    for i, j in pairs:
        if not (0 <= i < n_a and 0 <= j < n_b):
            raise ValueError(f"pairs: ({i}, {j}) is not a layer pair of {n_a} × {n_b} layers")
        wanted[i, j] = True
    return wanted


class _Clock:
    """Seconds spent preparing layers and comparing pairs, and the pairs done, for :func:`cost_estimate`."""

    def __init__(self) -> None:
        self.preparing = self.comparing = 0.0
        self.pairs = 0
        self._mark = 0.0

    def start(self) -> None:
        self._mark = time.perf_counter()

    def prepared(self) -> None:
        now = time.perf_counter()
        self.preparing += now - self._mark
        self._mark = now

    def compared(self) -> None:
        self.comparing += time.perf_counter() - self._mark

    def pair_done(self) -> None:
        self.pairs += 1


def duration(seconds: float) -> str:
    """``42 s``, ``6 min``, ``1.5 h``: a rough duration for a log line."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cost_estimate(clock: _Clock, pairs: int, measures: int, layers: int, prepared: int) -> str:
    """One line: pairs × measures, what the first pairs took, and the whole table's time extrapolated as
    (preparation time per layer prepared so far) × every layer + (comparison time per pair so far) × every pair."""
    taken = clock.preparing + clock.comparing
    total = clock.preparing / max(prepared, 1) * layers + clock.comparing / max(clock.pairs, 1) * pairs
    return (
        f"{pairs} layer pairs × {measures} measures; the first {clock.pairs} took {taken:.1f} s, "
        f"about {duration(max(total, taken))} in all"
    )


def measure_table(
    layers_a: Sequence[Any],
    layers_b: Sequence[Any] | None,
    measures: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    progress: str | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    estimate: Callable[[str], None] | None = None,
    estimate_after: int = ESTIMATE_AFTER,
) -> pd.DataFrame:
    """Each measure on each layer pair: columns measure, layer_a, layer_b, value (module docstring).

    ``layers_a``/``layers_b``: sequences of (n × d) matrices (numpy, torch), the same n tokens
    throughout; ``layers_b=None`` compares ``layers_a`` with itself. ``measures``: registered
    names, in the order of the rows; ``options[name]``: that measure's keyword options (checked
    by :func:`check_measures` first). One row per measure × (layer_a, layer_b), the pairs in
    row-major order (layer_b varying fastest). ``progress``: the description of a tqdm bar over
    the layer pairs (``leave=False``), or None for no bar.

    ``pairs``: compute only these (layer_a, layer_b) cells (every cell still has its row; the others are NaN),
    each layer still prepared once; None: every pair. ``estimate``: called once, with one line, after the first
    ``estimate_after`` pairs (or all, if fewer): :func:`cost_estimate` of the whole table.
    """
    same = layers_b is None
    matrices_a, matrices_b = checked_pair(layers_a, layers_b)
    plan = measure_plan(measures, options, matrices_a[0].shape[0])
    work = _TableWork.of(plan, matrices_a, matrices_b, same)
    wanted = wanted_cells(pairs, work.n_a, work.n_b)
    total = int(wanted.sum())
    clock = work.clock
    bar = None if progress is None else tqdm(total=total, desc=progress, leave=False)

    def pair_done() -> None:
        clock.pair_done()
        if estimate is not None and clock.pairs == min(estimate_after, total):
            estimate(cost_estimate(clock, total, len(work.names), work.n_layers, len(work.layers_seen)))
        if bar is not None:
            bar.update()

    try:
        work.fill(wanted, pair_done)
    finally:
        if bar is not None:
            bar.close()
    _log_undefined(work.caught, work.side_b)
    return _long_table(work.names, work.values)


@dataclass
class _TableWork:
    """The state of one :func:`measure_table`: the measures (:func:`measure_plan`), the values so far
    (measures, L_a, L_b), each side's layers (``inputs.Layer``: the centred matrix and its SVD, shared by the
    preparations that need them, dropped after the layer's first pair) and preparations per key (each layer's
    dropped once no later row needs it), the warnings caught (measure, preparing?, where, warning), the layers
    prepared so far and the clock (both for the cost estimate). Comparing a model with itself (``same``), B's
    layers and preparations are A's."""

    names: list[str]
    entries: list[Measure]
    given: list[dict[str, Any]]
    keys: list[Any]
    same: bool
    values: np.ndarray
    shared_a: list[Layer]
    shared_b: list[Layer]
    cache_a: list[dict[Any, Any]]
    cache_b: list[dict[Any, Any]]
    caught: list[tuple[str, bool, str, warnings.WarningMessage]] = field(default_factory=list)
    layers_seen: set[tuple[str, int]] = field(default_factory=set)
    clock: _Clock = field(default_factory=_Clock)

    @classmethod
    def of(
        cls,
        plan: tuple[list[str], list[Measure], list[dict[str, Any]], list[Any]],
        matrices_a: list[np.ndarray],
        matrices_b: list[np.ndarray],
        same: bool,
    ) -> _TableWork:
        """Nothing computed yet: NaN values, empty caches, each layer's shared ``Layer``."""
        names, entries, given, keys = plan
        n_a, n_b = len(matrices_a), len(matrices_b)
        values = np.full((len(names), n_a, n_b), np.nan)
        cache_a: list[dict[Any, Any]] = [{} for _ in range(n_a)]
        cache_b = cache_a if same else [{} for _ in range(n_b)]
        shared_a = [Layer(matrix) for matrix in matrices_a]
        shared_b = shared_a if same else [Layer(matrix) for matrix in matrices_b]
        return cls(names, entries, given, keys, same, values, shared_a, shared_b, cache_a, cache_b)

    @property
    def n_a(self) -> int:
        return self.values.shape[1]

    @property
    def n_b(self) -> int:
        return self.values.shape[2]

    @property
    def side_b(self) -> str:
        """The name of B's layers in messages: ``layers_a`` when a model is compared with itself."""
        return "layers_a" if self.same else "layers_b"

    @property
    def n_layers(self) -> int:
        """The layers to prepare in all (for the cost estimate)."""
        return self.n_a if self.same else self.n_a + self.n_b

    def prepared(self, cache: list[dict[Any, Any]], layers: list[Layer], side: str, i: int, m: int) -> Any:
        """Layer ``i`` of ``side`` prepared for measure ``m`` (prepared at first use, then cached)."""
        key = self.keys[m]
        if key not in cache[i]:
            self.layers_seen.add((side, i))
            with warnings.catch_warnings(record=True) as log:
                warnings.simplefilter("always")
                cache[i][key] = self.entries[m].preparer(layers[i], name=f"{side}[{i}]", **self.given[m])
            self.caught.extend((self.names[m], True, f"{side}[{i}]", record) for record in log)
        return cache[i][key]

    def fill(self, wanted: np.ndarray, pair_done: Callable[[], None]) -> None:
        """Every ``wanted`` cell, row by row (``pair_done`` after each pair), each layer's shared work and
        preparations released as soon as no later pair needs them."""
        # the last row that needs layer j of b (self-comparison: also as row j's first argument); −1: none
        last_row = np.where(wanted.any(axis=0), self.n_a - 1 - np.argmax(wanted[::-1], axis=0), -1)
        if self.same:
            last_row = np.maximum(last_row, np.arange(self.n_b))
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always")
            for i in range(self.n_a):
                row = np.flatnonzero(wanted[i])
                told: set[Any] = set()  # the preparations of layer i told how many pairs its row has
                for j in row.tolist():
                    self.compare_pair(i, j, wanted, log, told, len(row))
                    self.shared_a[i].release()
                    self.shared_b[j].release()
                    pair_done()
                self.row_done(i, last_row)

    def compare_pair(
        self, i: int, j: int, wanted: np.ndarray, log: list[warnings.WarningMessage], told: set[Any], row_pairs: int
    ) -> None:
        """Every measure on layers (i, j); a symmetric measure's self-comparison below the diagonal is copied from
        above it. Layer i's preparations are told at their first use that they will serve ``row_pairs`` pairs."""
        for m, entry in enumerate(self.entries):
            if self.same and entry.symmetric and j < i and wanted[j, i]:
                self.values[m, i, j] = self.values[m, j, i]
                continue
            self.clock.start()
            px = self.prepared(self.cache_a, self.shared_a, "layers_a", i, m)
            if self.keys[m] not in told:
                told.add(self.keys[m])
                expect = getattr(px, "expect_comparisons", None)
                if expect is not None:
                    expect(row_pairs)
            py = self.prepared(self.cache_b, self.shared_b, self.side_b, j, m)
            self.clock.prepared()
            start = len(log)
            self.values[m, i, j] = entry.comparer(px, py)
            self.clock.compared()
            self.caught.extend((self.names[m], False, f"({i}, {j})", record) for record in log[start:])

    def row_done(self, i: int, last_row: np.ndarray) -> None:
        """Row i done: its layer's preparations dropped (self-comparison: released to serve as a second argument
        only), and those of every layer of b that no later row compares with."""
        if not self.same:
            self.cache_a[i] = {}  # row i done: its layer's preparations are not needed again
        else:  # row i done: layer i is only a second argument from now on
            for prepared_input in self.cache_a[i].values():
                release = getattr(prepared_input, "release", None)
                if release is not None:
                    release()
        for j in np.flatnonzero(last_row == i).tolist():  # no later row compares with layer j
            self.cache_b[j] = {}


def _long_table(names: list[str], values: np.ndarray) -> pd.DataFrame:
    """The long table (:data:`COLUMNS`) of ``values`` (measures, L_a, L_b): one row per measure × layer pair, the
    pairs in row-major order."""
    _, n_a, n_b = values.shape
    layer_a, layer_b = np.meshgrid(np.arange(n_a), np.arange(n_b), indexing="ij")
    return pd.DataFrame(
        {
            "measure": pd.Series(np.repeat(np.array(names, dtype=object), n_a * n_b), dtype=object),
            "layer_a": np.tile(layer_a.ravel(), len(names)).astype(np.int64),
            "layer_b": np.tile(layer_b.ravel(), len(names)).astype(np.int64),
            "value": values.ravel(),
        },
        columns=list(COLUMNS),
    )
