"""The verdict rule: one part's answer over ``n`` independent replicates, and a row's over its primary parts.

A part's **effect** is signed and centred (0: its reference; > 0: the paper's direction), one number per
replicate (what a replicate varies is averaged within it first). Over ``n ≥ 2`` effects ``x₁ … xₙ`` with mean
``m`` and standard deviation ``s`` (``n − 1`` in the denominator):

* ``ci95 = m ± t₀.₉₇₅,ₙ₋₁ · s/√n`` and ``ci90 = m ± t₀.₉₅,ₙ₋₁ · s/√n``;
* **reproduced** when ``ci95`` lies above 0 (a one-sided t-test of H₀: μ ≤ 0 at α = 0.025), **opposite** when it
  lies below 0, **absent** when ``ci90`` lies strictly inside ``(−δ, +δ)`` (two one-sided tests, TOST, at
  α = 0.05 each, against the smallest effect of interest ``δ``), else **inconclusive** — tried in that order;
* a reproduced or opposite part whose ``ci90`` is also inside ``±δ`` is ``smaller_than_delta``;
* a part whose effects are all equal (``max − min ≤ 1e-12 · max(1, |m|)``) is a **fact** — deterministic given
  what a replicate varies: both intervals are ``[m, m]`` and the same order applies (reproduced if ``m > 0``,
  opposite if ``m < 0``, absent if ``m = 0``; ``smaller_than_delta`` when ``0 < |m| < δ``);
* an inconclusive part gets ``n_needed``: the smallest ``n`` at which, with ``σ`` at its one-sided 80 % upper
  confidence bound ``σᵤ = s · √((n₀ − 1) / χ²₀.₂₀,ₙ₀₋₁)``, both ``P(ci95 > 0 | μ = δ) ≥ 0.8`` (the non-central t
  with non-centrality ``δ√n/σᵤ``) and ``P(TOST passes | μ = 0) ≥ 0.8``;
* a part behind a gate that failed is **not testable** (naming the gate); behind an undecided gate,
  **inconclusive — gate undecided**.

A **gate** (a precondition of the question) is decided on its own estimate before the effects are read: with
``g`` the gate's values less its threshold (> 0: the precondition holds), it **passes** when ``g``'s ``ci95`` lies
above 0, **fails** when it lies below, else it is **undecided**.

A **row** over its ``k`` primary parts: **not testable** if any is; **reproduced** if all are reproduced;
**partly** if Holm's step-down at α = 0.025 over their one-sided p-values ``p = P(T_{n−1} ≥ m√n/s)`` rejects any
(its first step: the smallest ``p < 0.025/k``; the row names the parts Holm rejects); **not reproduced** if every
primary part is opposite or absent; else **inconclusive**.

The rule is one vectorised function (:func:`classify`) so that the simulation tests run exactly the code that
decides the scorecard.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import integrate, stats

REPRODUCED = "reproduced"
OPPOSITE = "opposite"
ABSENT = "absent"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable"
PART_VERDICTS = (REPRODUCED, OPPOSITE, ABSENT, INCONCLUSIVE, NOT_TESTABLE)

PARTLY = "partly"
NOT_REPRODUCED = "not reproduced"
ROW_VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE)

GATE_PASSES = "passes"
GATE_FAILS = "fails"
GATE_UNDECIDED = "undecided"

#: The one-sided level of "reproduced" and "opposite" (each tail of the 95 % interval).
ALPHA = 0.025
#: The level of each of the two one-sided tests of equivalence (the 90 % interval).
ALPHA_TOST = 0.05
#: The power ``n_needed`` plans for, and the confidence of the upper bound on σ it plans with.
TARGET_POWER = 0.8
SIGMA_CONFIDENCE = 0.8
#: Effects whose spread is at most this × max(1, |mean|) are one value: a fact.
FACT_TOLERANCE = 1e-12
#: ``n_needed`` is searched up to this many replicates (beyond it: reported as more than this).
MAX_N = 100_000

_CODES = {REPRODUCED: 0, OPPOSITE: 1, ABSENT: 2, INCONCLUSIVE: 3}
#: The verdict of each code :func:`classify` returns.
CODE_WORDS = tuple(_CODES)


def _moments(effects: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``effects`` (draws × n): the mean, the standard deviation (ddof 1) and whether it is a fact."""
    n = effects.shape[1]
    mean = effects.mean(axis=1)
    sd = effects.std(axis=1, ddof=1)
    spread = effects.max(axis=1) - effects.min(axis=1)
    fact = spread <= FACT_TOLERANCE * np.maximum(1.0, np.abs(mean))
    sd = np.where(fact, 0.0, sd)
    assert n >= 2
    return mean, sd, fact


def intervals(effects: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``effects`` (draws × n, n ≥ 2): the mean, ``ci95`` and ``ci90`` (each draws × 2: low, high) and
    whether the row is a fact (its intervals then ``[m, m]``)."""
    if effects.ndim != 2 or effects.shape[1] < 2:
        raise ValueError(f"effects: expected draws × n with n ≥ 2 replicates, got shape {effects.shape}")
    n = effects.shape[1]
    mean, sd, fact = _moments(effects)
    se = sd / math.sqrt(n)
    half95 = stats.t.ppf(1 - ALPHA, n - 1) * se
    half90 = stats.t.ppf(1 - ALPHA_TOST, n - 1) * se
    ci95 = np.stack([mean - half95, mean + half95], axis=1)
    ci90 = np.stack([mean - half90, mean + half90], axis=1)
    return mean, ci95, ci90, fact


def classify(effects: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """The rule on each row of ``effects`` (draws × n): the verdict codes (indices into :data:`CODE_WORDS`) and
    ``smaller_than_delta`` (module docstring)."""
    if not delta > 0:
        raise ValueError(f"delta: expected a positive smallest effect of interest, got {delta!r}")
    mean, ci95, ci90, fact = intervals(np.asarray(effects, dtype=np.float64))
    codes = np.full(mean.shape, _CODES[INCONCLUSIVE])
    absent = (ci90[:, 0] > -delta) & (ci90[:, 1] < delta)
    absent = np.where(fact, mean == 0, absent)
    codes = np.where(absent, _CODES[ABSENT], codes)
    codes = np.where(ci95[:, 1] < 0, _CODES[OPPOSITE], codes)
    codes = np.where(ci95[:, 0] > 0, _CODES[REPRODUCED], codes)
    inside = np.where(fact, np.abs(mean) < delta, (ci90[:, 0] > -delta) & (ci90[:, 1] < delta))
    signed = (codes == _CODES[REPRODUCED]) | (codes == _CODES[OPPOSITE])
    return codes, signed & inside


def one_sided_p_values(effects: np.ndarray) -> np.ndarray:
    """Per row of ``effects`` (draws × n): ``P(T_{n−1} ≥ m√n/s)``, the p-value of H₀: μ ≤ 0 that ``ci95``'s lower
    end inverts (a fact: 0 when its value is above 0, else 1)."""
    values = np.asarray(effects, dtype=np.float64)
    n = values.shape[1]
    mean, sd, fact = _moments(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = mean * math.sqrt(n) / np.where(fact, 1.0, sd)
    return np.where(fact, np.where(mean > 0, 0.0, 1.0), stats.t.sf(statistic, n - 1))


def one_sided_p(effects: Sequence[float]) -> float:
    """:func:`one_sided_p_values` of one part's effects."""
    return float(one_sided_p_values(np.asarray(effects, dtype=np.float64)[None, :])[0])


def power_reproduced(n: int, delta: float, sigma: float) -> float:
    """``P(ci95 > 0 | μ = δ)`` for ``n`` normal replicates of spread ``σ``: the non-central t's tail beyond
    ``t₀.₉₇₅,ₙ₋₁`` with non-centrality ``δ√n/σ``."""
    return float(stats.nct.sf(stats.t.ppf(1 - ALPHA, n - 1), n - 1, delta * math.sqrt(n) / sigma))


def power_absent(n: int, delta: float, sigma: float) -> float:
    """``P(TOST passes | μ = 0)`` for ``n`` normal replicates of spread ``σ``: ``P(|m| + t₀.₉₅,ₙ₋₁·s/√n < δ)``,
    ``m ~ N(0, σ²/n)`` independent of ``s² ~ σ²χ²ₙ₋₁/(n − 1)``, integrated over ``s``."""
    df = n - 1
    crit = stats.t.ppf(1 - ALPHA_TOST, df)
    root_n = math.sqrt(n)
    q_max = (delta * root_n / (crit * sigma)) ** 2 * df  # beyond it the interval's half-width alone exceeds δ

    def integrand(q: float) -> float:
        margin = delta - crit * sigma * math.sqrt(q / df) / root_n
        return float(stats.chi2.pdf(q, df) * (2 * stats.norm.cdf(margin * root_n / sigma) - 1))

    value, _ = integrate.quad(integrand, 0.0, q_max, limit=200)
    return max(0.0, min(1.0, value))


def sigma_upper(sd: float, n: int) -> float:
    """σ's one-sided :data:`SIGMA_CONFIDENCE` upper confidence bound from ``n`` replicates' ``sd``:
    ``s · √((n − 1) / χ²_{1−conf, n−1})``."""
    return sd * math.sqrt((n - 1) / stats.chi2.ppf(1 - SIGMA_CONFIDENCE, n - 1))


def _smallest_n(power: object, delta: float, sigma: float) -> int | None:
    """The smallest n ≥ 2 with ``power(n, δ, σ) ≥`` :data:`TARGET_POWER` (both powers rise with n), or ``None``
    beyond :data:`MAX_N`."""
    assert callable(power)
    if power(2, delta, sigma) >= TARGET_POWER:
        return 2
    low, high = 2, 4
    while power(high, delta, sigma) < TARGET_POWER:
        low, high = high, high * 2
        if high > MAX_N:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if power(middle, delta, sigma) >= TARGET_POWER else (middle, high)
    return high


def n_needed(effects: Sequence[float], delta: float) -> int | None:
    """The replicates an inconclusive part needs (module docstring); ``None``: more than :data:`MAX_N`."""
    values = np.asarray(effects, dtype=np.float64)
    sigma = sigma_upper(float(values.std(ddof=1)), len(values))
    if sigma <= 0:
        return len(values)
    first, second = _smallest_n(power_reproduced, delta, sigma), _smallest_n(power_absent, delta, sigma)
    return None if first is None or second is None else max(first, second)


@dataclass(frozen=True)
class GateResult:
    """A gate decided on its values (one per replicate) against its threshold: ``verdict`` one of
    :data:`GATE_PASSES`, :data:`GATE_FAILS`, :data:`GATE_UNDECIDED`."""

    name: str
    values: tuple[float, ...]
    threshold: float
    mean: float
    ci95: tuple[float, float]
    verdict: str


def decide_gate(name: str, values: Sequence[float], threshold: float) -> GateResult:
    """Passes when the values' ``ci95`` lies above ``threshold``, fails when below, else undecided (one value, no
    interval: undecided unless it is a fact of every replicate, which needs two)."""
    known = tuple(float(v) for v in values)
    if len(known) < 2:
        return GateResult(name, known, threshold, known[0] if known else math.nan, (math.nan, math.nan), GATE_UNDECIDED)
    means, ci95, _, _ = intervals(np.asarray(known)[None, :] - threshold)
    low, high = float(ci95[0, 0]), float(ci95[0, 1])
    verdict = GATE_PASSES if low > 0 else GATE_FAILS if high < 0 else GATE_UNDECIDED
    return GateResult(name, known, threshold, float(means[0]) + threshold, (low + threshold, high + threshold), verdict)


@dataclass(frozen=True)
class PartResult:
    """One part's answer: its ``effects`` as given, the summary (``mean``, ``ci95``, ``ci90``), its ``delta``, the
    ``verdict`` (one of :data:`PART_VERDICTS`), ``smaller_than_delta``, ``fact``, the one-sided ``p``, ``n_needed``
    (inconclusive parts) and ``gate`` (the gate that made it not testable or undecided)."""

    effects: tuple[float, ...]
    delta: float
    mean: float
    ci95: tuple[float, float]
    ci90: tuple[float, float]
    verdict: str
    smaller_than_delta: bool = False
    fact: bool = False
    p: float = 1.0
    n_needed: int | None = None
    gate: str | None = None
    why: str = ""


def decide_part(effects: Sequence[float], delta: float, gates: Sequence[GateResult] = ()) -> PartResult:
    """The rule on one part (module docstring): ``effects`` one per replicate (n ≥ 2), ``delta`` the plan's ``δ``,
    ``gates`` the part's gates, decided before (:func:`decide_gate`)."""
    values = tuple(float(e) for e in effects)
    if any(not math.isfinite(v) for v in values):
        raise ValueError(f"effects: every replicate's effect must be a finite number, got {values}")
    array = np.asarray(values)[None, :]
    codes, smaller = classify(array, delta)
    mean, ci95, ci90, fact = intervals(array)
    base = PartResult(
        effects=values,
        delta=float(delta),
        mean=float(mean[0]),
        ci95=(float(ci95[0, 0]), float(ci95[0, 1])),
        ci90=(float(ci90[0, 0]), float(ci90[0, 1])),
        verdict=INCONCLUSIVE,
        fact=bool(fact[0]),
        p=one_sided_p(values),
    )
    failed = [g for g in gates if g.verdict == GATE_FAILS]
    undecided = [g for g in gates if g.verdict == GATE_UNDECIDED]
    if failed:
        gate = failed[0]
        return replace(base, verdict=NOT_TESTABLE, gate=gate.name, why=f"gate {gate.name} fails")
    if undecided:
        gate = undecided[0]
        return replace(base, verdict=INCONCLUSIVE, gate=gate.name, why=f"gate undecided: {gate.name}")
    word = CODE_WORDS[int(codes[0])]
    needed = n_needed(values, delta) if word == INCONCLUSIVE and not fact[0] else None
    return replace(base, verdict=word, smaller_than_delta=bool(smaller[0]), n_needed=needed)


def holm_rejections(p_values: Mapping[str, float], alpha: float = ALPHA) -> list[str]:
    """Holm's step-down over ``p_values`` at family-wise ``alpha``: the names it rejects, smallest p first."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    rejected: list[str] = []
    for index, (name, p) in enumerate(ordered):
        if p >= alpha / (len(ordered) - index):
            break
        rejected.append(name)
    return rejected


@dataclass(frozen=True)
class RowResult:
    """A row's answer over its primary parts: ``verdict`` one of :data:`ROW_VERDICTS`, ``holm`` the primary parts
    Holm rejects, ``text`` the verdict and each primary part's."""

    verdict: str
    holm: tuple[str, ...] = ()
    text: str = ""
    parts: Mapping[str, str] = field(default_factory=dict)


def part_text(result: PartResult) -> str:
    """A part's verdict in words: "reproduced, smaller than δ", "absent (below our resolution)" …"""
    word = result.verdict
    if result.smaller_than_delta:
        word += ", smaller than δ"
    if result.gate:
        word = f"{word} ({result.why})"
    return word


def row_word(words: Sequence[str], holm_rejects_any: bool) -> str:
    """The row's verdict from its primary parts' verdicts and whether Holm rejects any (module docstring)."""
    if not words:
        return INCONCLUSIVE
    if any(w == NOT_TESTABLE for w in words):
        return NOT_TESTABLE
    if all(w == REPRODUCED for w in words):
        return REPRODUCED
    if holm_rejects_any:
        return PARTLY
    if all(w in (OPPOSITE, ABSENT) for w in words):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def decide_row(primary: Mapping[str, PartResult]) -> RowResult:
    """The row's verdict over its primary parts (module docstring)."""
    if not primary:
        return RowResult(INCONCLUSIVE, text=f"{INCONCLUSIVE}: no primary part measured")
    words = {name: r.verdict for name, r in primary.items()}
    testable = {name: r.p for name, r in primary.items() if r.verdict != NOT_TESTABLE and not r.gate}
    holm = tuple(holm_rejections(testable)) if len(testable) == len(primary) else ()
    verdict = row_word(list(words.values()), bool(holm))
    listed = "; ".join(f"{name}: {part_text(r)}" for name, r in primary.items())
    if verdict == PARTLY:
        listed += f" (Holm rejects: {', '.join(holm)})"
    return RowResult(verdict, holm, f"{verdict} — {listed}", words)
