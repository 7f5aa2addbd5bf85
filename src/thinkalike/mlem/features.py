"""Stimulus features and the feature differences Δf of stimulus pairs (MLEM's input side).

A :class:`FeatureTable` holds, for ``n`` stimuli, ``K`` features of two kinds:

* **categorical** — integer codes, ``-1`` where the feature is *undefined* for the stimulus
  (a word's tense when it is not a verb, an object's number in an intransitive sentence);
* **numeric** — values min-max scaled to ``[0, 1]`` over the stimuli (so ``|x_i − x_j|`` is in
  ``[0, 1]``), ``NaN`` where undefined.

For a pair ``(i, j)`` the difference vector is (Jalouzot et al. 2024; the MLEM code)::

    Δf_k(i, j) = 1[c_ik ≠ c_jk]          categorical k, 0 when undefined for i or j
    Δf_k(i, j) = |x_ik − x_jk| ∈ [0, 1]  numeric k,     0 when undefined for i or j

Undefined values are given explicitly (``undefined`` markers, e.g. the grammar's ``"none"``);
a missing value (``NaN`` / ``None``) in the input is an error, never silently "undefined".

**Coding of categorical features** (:data:`CATEGORICAL_CODINGS`): ``equality`` (above; the paper's
and the MLEM code's: one column per feature, so every two different values of a feature are
equally far apart) or ``indicators`` (:func:`indicator_coding`): a feature with three or more
values becomes one 0/1 column per value, ``pos=NOUN`` (1 when the stimulus's value is NOUN), all
grouped under the feature. A pair with values a ≠ b then differs in the columns of a and of b, so
with the diagonal metric ``d = w_a + w_b``: each value has its own weight and the values of a
feature need not be equidistant. Weights and permutation importance are reported per feature (the
group): the weight is the sum of its columns' weights, the importance permutes its columns together.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

CATEGORICAL = "categorical"
NUMERIC = "numeric"
FEATURE_KINDS = (CATEGORICAL, NUMERIC)
UNDEFINED_CODE = -1
CATEGORICAL_CODINGS = ("equality", "indicators")

logger = logging.getLogger(__name__)


class FeatureError(ValueError):
    """Features that MLEM cannot use (missing values, unknown names, nothing left to fit)."""


@dataclass(frozen=True)
class FeatureTable:
    """``K`` encoded features of ``n`` stimuli (module docstring).

    ``values`` is float64 ``(n, K)``: categorical codes (``-1`` undefined) or scaled numeric values
    (``NaN`` undefined); ``kinds[k]`` says which; ``categories[k]`` lists a categorical feature's
    values in code order (empty for numeric ones). ``groups[k]`` names the feature that column k
    codes (:func:`indicator_coding`); None: every column is a feature of its own.
    """

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    values: np.ndarray
    categories: tuple[tuple[str, ...], ...]
    groups: tuple[str, ...] | None = None

    @property
    def n_stimuli(self) -> int:
        return int(self.values.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns (the metric's size)."""
        return len(self.names)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The features (the groups of columns), in column order."""
        return self.names if self.groups is None else tuple(dict.fromkeys(self.groups))

    @property
    def feature_kinds(self) -> tuple[str, ...]:
        """The kind of each of :attr:`feature_names`."""
        return tuple(self.kinds[columns[0]] for columns in self.group_columns())

    def group_columns(self) -> list[list[int]]:
        """The columns of each of :attr:`feature_names`."""
        if self.groups is None:
            return [[k] for k in range(self.n_features)]
        return [[k for k, group in enumerate(self.groups) if group == name] for name in self.feature_names]

    def subset(self, rows: np.ndarray) -> FeatureTable:
        """The table of the stimuli ``rows`` (codes, scales and groups unchanged)."""
        return FeatureTable(self.names, self.kinds, self.values[rows], self.categories, self.groups)

    def defined_values(self, k: int) -> np.ndarray:
        """The distinct defined values of feature ``k``."""
        column = self.values[:, k]
        defined = column != UNDEFINED_CODE if self.kinds[k] == CATEGORICAL else np.isfinite(column)
        return np.unique(column[defined])


def encode_features(
    frame: pd.DataFrame,
    kinds: Mapping[str, str],
    undefined: Mapping[str, Collection[object]] | None = None,
    *,
    what: str = "stimuli",
) -> FeatureTable:
    """Encode the columns ``kinds`` of ``frame`` (one row per stimulus) into a :class:`FeatureTable`.

    ``kinds[name]`` is ``"categorical"`` or ``"numeric"``; ``undefined[name]`` lists the values
    that mean "undefined for this stimulus". Raises :class:`FeatureError` (naming ``what``, e.g.
    the model) for a name not in ``frame`` (listing the columns it has), an unknown kind, a
    missing value (NaN/None), or a non-numeric value in a numeric feature.
    """
    undefined = undefined or {}
    unknown = [name for name in kinds if name not in frame.columns]
    if unknown:
        raise FeatureError(f"{what}: unknown feature(s) {unknown}; known: {sorted(map(str, frame.columns))}")
    names, kinds_, columns, categories = [], [], [], []
    for name, kind in kinds.items():
        if kind not in FEATURE_KINDS:
            raise FeatureError(f"{what}: feature {name!r} has kind {kind!r}, not one of {FEATURE_KINDS}")
        raw = frame[name]
        missing = raw.isna().to_numpy()
        if missing.any():
            raise FeatureError(
                f"{what}: feature {name!r} has {int(missing.sum())} missing value(s) (NaN/None), e.g. "
                f"at stimulus rows {np.flatnonzero(missing)[:5].tolist()}; mark undefined values "
                f"explicitly (one of {sorted(map(str, undefined.get(name, ()))) or 'none given'})"
            )
        is_undefined = raw.isin(list(undefined.get(name, ()))).to_numpy()
        if kind == CATEGORICAL:
            labels = raw.astype(str).to_numpy()
            category_values = tuple(sorted(set(labels[~is_undefined])))
            lookup = {value: code for code, value in enumerate(category_values)}
            codes = np.array([lookup.get(label, UNDEFINED_CODE) for label in labels], dtype=np.float64)
            codes[is_undefined] = UNDEFINED_CODE
            columns.append(codes)
            categories.append(category_values)
        else:
            numbers = pd.to_numeric(raw.where(~is_undefined), errors="coerce").to_numpy(np.float64)
            bad = ~is_undefined & ~np.isfinite(numbers)
            if bad.any():
                raise FeatureError(
                    f"{what}: numeric feature {name!r} has non-numeric or infinite value(s) {raw[bad].head(3).tolist()}"
                )
            columns.append(min_max_scaled(numbers))
            categories.append(())
        names.append(str(name))
        kinds_.append(kind)
    values = np.stack(columns, axis=1) if columns else np.zeros((len(frame), 0))
    return FeatureTable(tuple(names), tuple(kinds_), values, tuple(categories))


def min_max_scaled(values: np.ndarray) -> np.ndarray:
    """``(x − min) / (max − min)`` over the finite values (NaN kept; a constant column becomes 0)."""
    finite = np.isfinite(values)
    if not finite.any():
        return values.copy()
    low, high = values[finite].min(), values[finite].max()
    span = high - low
    return np.where(finite, (values - low) / span if span > 0 else 0.0, np.nan)


def drop_single_valued(table: FeatureTable, *, what: str = "stimuli") -> FeatureTable:
    """``table`` without the features that take fewer than two defined values (each dropped with a warning).

    Such a feature has Δf = 0 for every pair: it cannot enter the fit. Raises
    :class:`FeatureError` when no feature is left.
    """
    keep = []
    for k, name in enumerate(table.names):
        values = table.defined_values(k)
        if len(values) < 2:
            shown = table.categories[k][int(values[0])] if len(values) and table.kinds[k] == CATEGORICAL else values
            logger.warning(
                "MLEM %s: feature %r dropped: it takes a single value (%s) on these stimuli",
                what,
                name,
                shown if len(values) else "none defined",
            )
        else:
            keep.append(k)
    if not keep:
        raise FeatureError(f"{what}: no feature takes two values on these stimuli; nothing to fit")
    return FeatureTable(
        tuple(table.names[k] for k in keep),
        tuple(table.kinds[k] for k in keep),
        table.values[:, keep],
        tuple(table.categories[k] for k in keep),
    )


def indicator_coding(table: FeatureTable, min_values: int = 3) -> FeatureTable:
    """``table`` with each categorical feature of ``min_values`` or more defined values coded by indicators (module
    docstring): one 0/1 column ``<feature>=<value>`` per value, undefined (``-1``) wherever the feature is; the
    other features keep their one column. Every column is grouped under its feature."""
    if table.groups is not None:
        raise ValueError("indicator_coding: the table is already coded by indicators")
    names, kinds, columns, categories, groups = [], [], [], [], []
    for k, name in enumerate(table.names):
        column = table.values[:, k]
        values = table.defined_values(k)
        if table.kinds[k] != CATEGORICAL or len(values) < min_values:
            names.append(name)
            kinds.append(table.kinds[k])
            columns.append(column)
            categories.append(table.categories[k])
            groups.append(name)
            continue
        undefined = column == UNDEFINED_CODE
        for code in values:
            label = table.categories[k][int(code)]
            names.append(f"{name}={label}")
            kinds.append(CATEGORICAL)
            groups.append(name)
            columns.append(np.where(undefined, UNDEFINED_CODE, (column == code).astype(np.float64)))
            categories.append(("other", label))
    return FeatureTable(tuple(names), tuple(kinds), np.stack(columns, axis=1), tuple(categories), tuple(groups))


def group_differences(differences: np.ndarray, table: FeatureTable) -> np.ndarray:
    """Δf per feature ``(m, G)`` from per-column Δf ``(m, K)``: the largest over a feature's columns (for an
    indicator-coded feature, 1 exactly when the two values differ: its equality coding)."""
    return np.stack([differences[:, columns].max(axis=1) for columns in table.group_columns()], axis=1)


def pair_differences(
    values: torch.Tensor, categorical: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> torch.Tensor:
    """Δf ``(m, K)`` of the pairs ``(first[p], second[p])`` (module docstring).

    ``values`` is the :class:`FeatureTable` ``values`` as a tensor, ``categorical`` a boolean
    ``(K,)`` mask of the categorical columns.
    """
    a, b = values.index_select(0, first), values.index_select(0, second)  # as values[first], faster (fit.py)
    categorical_difference = ((a != b) & (a != UNDEFINED_CODE) & (b != UNDEFINED_CODE)).to(values.dtype)
    numeric_difference = torch.nan_to_num((a - b).abs(), nan=0.0)
    return torch.where(categorical, categorical_difference, numeric_difference)


def feature_tensors(
    table: FeatureTable, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, categorical mask)`` of ``table`` as tensors for :func:`pair_differences`."""
    return (
        torch.as_tensor(table.values, dtype=dtype, device=device),
        torch.tensor([kind == CATEGORICAL for kind in table.kinds], device=device),
    )


def correlated_features(
    differences: np.ndarray, names: Sequence[str], threshold: float = 0.5
) -> list[tuple[str, str, float]]:
    """Feature pairs whose Δf columns correlate with ``|r| > threshold`` (Pearson over sampled pairs).

    Correlated features share credit in the fit and in permutation importance (permuting one
    leaves the other's information in place), so their importances must be read together.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = np.corrcoef(differences, rowvar=False)
    correlation = np.atleast_2d(correlation)
    found = []
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            r = float(correlation[a, b])
            if np.isfinite(r) and abs(r) > threshold:
                found.append((names[a], names[b], r))
    return found
