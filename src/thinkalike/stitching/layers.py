"""Stitching layers φ: the map from f's residual stream after layer l to g's after layer m.

Kinds (:data:`KINDS`), for ``h`` a row of f's residual stream (``d_in = d_model(f)``) and
``φ(h)`` one of g's (``d_out = d_model(g)``):

* ``identity``  — ``φ(h) = h``; needs ``d_in == d_out``. Nothing is trained.
* ``affine``    — ``φ(h) = W h + b``.
* ``affine_ln`` — ``φ(h) = W LN(h) + b`` with ``LN(h) = γ ⊙ (h − μ(h)) / sqrt(σ²(h) + ε) + β``,
  a LayerNorm with learnable gain γ and bias β (Brown et al. 2023, appendix C.1: "an affine
  transformation along with an additional LayerNorm").

Parametrisation: ``W = W₀ + A`` and ``b = b₀ + c`` with the initial map ``(W₀, b₀)`` held as
buffers and the trained deltas ``(A, c)`` starting at zero. This is tuned-lens's residual
parametrisation of its translators (``h + Linear(h)`` with the linear part initialised to zero)
generalised to any initial map: the optimiser's weight decay pulls ``(A, c)`` to zero, i.e. pulls
φ toward its initial map — the identity where tuned-lens has it — not toward the zero map.
LayerNorm gain and bias are not decayed.

Initialisation (:data:`INITS`; ``auto`` is the default):

* ``identity`` — ``W₀ = I``, ``b₀ = 0`` (needs ``d_in == d_out``). For ``affine`` this is φ = id,
  so a self-stitch starts at penalty 0. For ``affine_ln`` it gives φ(h) = LN(h), not h (no
  affine map undoes a per-token normalisation).
* ``lstsq`` — the least-squares map from the layer-norm'ed (``affine_ln``, γ = 1, β = 0) or raw
  (``affine``) f-residuals X to g's residuals Y on the same training tokens, in closed form
  (:func:`least_squares_map`): ``W₀ = C_yx C_xx⁺``, ``b₀ = ȳ − W₀ x̄`` with the centred
  covariances ``C_xx = Σ (x − x̄)(x − x̄)ᵀ``, ``C_yx = Σ (y − ȳ)(x − x̄)ᵀ``, accumulated in float64;
  ``C_xx⁺`` is the pseudo-inverse with eigenvalues below 1e-6 × the largest treated as zero (the
  minimum-norm solution: a LayerNorm'ed input has an exactly-zero direction, the ones vector, whose
  round-off must not be inverted).
* ``auto`` — ``affine``: ``identity`` when the widths match (tuned-lens starts its translators at
  the identity), else ``lstsq``; ``affine_ln``: always ``lstsq`` (``identity`` would start at
  φ(h) = LN(h), far from the residual's scale).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

KINDS: tuple[str, ...] = ("identity", "affine", "affine_ln")
INITS: tuple[str, ...] = ("auto", "identity", "lstsq")
LN_EPS: float = 1e-5
#: Relative cut-off of the least-squares solve: eigenvalues of C_xx below RCOND × the largest count as zero.
RCOND: float = 1e-6


class StitchConfigError(ValueError):
    """A stitch that cannot be set up (bad kind, widths, layers, tokens, settings); raised before training."""


def check_kind(kind: str) -> str:
    """``kind`` if it is one of :data:`KINDS`, else :class:`StitchConfigError` listing them."""
    if kind not in KINDS:
        raise StitchConfigError(f"unknown stitching layer kind {kind!r}; known kinds: {', '.join(KINDS)}")
    return kind


def resolve_init(kind: str, init: str, d_in: int, d_out: int) -> str:
    """The initialisation actually used: ``none`` (identity kind), ``identity`` or ``lstsq`` (module docstring)."""
    check_kind(kind)
    if init not in INITS:
        raise StitchConfigError(f"unknown stitching init {init!r}; known: {', '.join(INITS)}")
    if kind == "identity":
        return "none"
    if init == "auto":
        return "identity" if kind == "affine" and d_in == d_out else "lstsq"
    if init == "identity" and d_in != d_out:
        raise StitchConfigError(
            f"init 'identity' needs equal widths, got d_model {d_in} (f) and {d_out} (g); use init 'lstsq' or 'auto'"
        )
    return init


class StitchLayer(torch.nn.Module):
    """Base class of φ: ``kind``, widths and a JSON-serialisable :meth:`config`."""

    kind: str = ""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.d_in = int(d_in)
        self.d_out = int(d_out)

    def config(self) -> dict[str, Any]:
        """What :func:`build_stitch_layer` needs to rebuild this layer (its tensors are in ``state_dict()``)."""
        return {"kind": self.kind, "d_in": self.d_in, "d_out": self.d_out}

    def decayed_parameters(self) -> list[torch.nn.Parameter]:
        """Parameters the optimiser applies weight decay to."""
        return []

    def undecayed_parameters(self) -> list[torch.nn.Parameter]:
        """Trained parameters without weight decay."""
        return []


class IdentityStitch(StitchLayer):
    """φ(h) = h (``d_in == d_out``); no parameters."""

    kind = "identity"

    def __init__(self, d_in: int, d_out: int | None = None) -> None:
        d_out = d_in if d_out is None else d_out
        if d_in != d_out:
            raise StitchConfigError(
                f"identity stitching needs equal widths, got d_model {d_in} (f) and "
                f"{d_out} (g); use kind 'affine' or 'affine_ln'"
            )
        super().__init__(d_in, d_out)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h


class AffineStitch(StitchLayer):
    """φ(h) = (W₀ + A) h + (b₀ + c), optionally after a LayerNorm (``layer_norm=True``: kind ``affine_ln``).

    ``W₀`` ``(d_out, d_in)`` and ``b₀`` ``(d_out,)`` are buffers (the initial map: the identity for equal
    widths, zero otherwise, until :meth:`set_initial_map`);
    ``A`` (``delta_weight``) and ``c`` (``delta_bias``) are the trained parameters, zero at start.
    """

    initial_weight: torch.Tensor  # buffers (register_buffer), declared for the type checker
    initial_bias: torch.Tensor

    def __init__(self, d_in: int, d_out: int, *, layer_norm: bool = False, eps: float = LN_EPS) -> None:
        super().__init__(d_in, d_out)
        self.kind = "affine_ln" if layer_norm else "affine"
        self.eps = float(eps)
        self.norm = torch.nn.LayerNorm(d_in, eps=eps) if layer_norm else None
        initial = torch.eye(d_out, d_in) if d_in == d_out else torch.zeros(d_out, d_in)
        self.register_buffer("initial_weight", initial)
        self.register_buffer("initial_bias", torch.zeros(d_out))
        self.delta_weight = torch.nn.Parameter(torch.zeros(d_out, d_in))
        self.delta_bias = torch.nn.Parameter(torch.zeros(d_out))

    def config(self) -> dict[str, Any]:
        return {**super().config(), "eps": self.eps}

    @property
    def weight(self) -> torch.Tensor:
        """The current ``W = W₀ + A`` ``(d_out, d_in)``."""
        return self.initial_weight + self.delta_weight

    @property
    def bias(self) -> torch.Tensor:
        """The current ``b = b₀ + c`` ``(d_out,)``."""
        return self.initial_bias + self.delta_bias

    def set_initial_map(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        """Sets ``(W₀, b₀)`` and resets the deltas to zero."""
        if tuple(weight.shape) != (self.d_out, self.d_in) or tuple(bias.shape) != (self.d_out,):
            raise ValueError(
                f"initial map of shapes {tuple(weight.shape)}, {tuple(bias.shape)} for a "
                f"{self.d_in} -> {self.d_out} stitch"
            )
        with torch.no_grad():
            self.initial_weight.copy_(weight)
            self.initial_bias.copy_(bias)
            self.delta_weight.zero_()
            self.delta_bias.zero_()

    def normalise(self, h: torch.Tensor) -> torch.Tensor:
        """The input the affine map reads: ``LN(h)`` for ``affine_ln``, ``h`` otherwise."""
        return h if self.norm is None else self.norm(h)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(self.normalise(h.to(self.delta_weight.dtype)), self.weight, self.bias)

    def decayed_parameters(self) -> list[torch.nn.Parameter]:
        return [self.delta_weight, self.delta_bias]

    def undecayed_parameters(self) -> list[torch.nn.Parameter]:
        return [] if self.norm is None else list(self.norm.parameters())


def build_stitch_layer(kind: str, d_in: int, d_out: int, *, eps: float = LN_EPS) -> StitchLayer:
    """A freshly built φ of ``kind`` (affine kinds start at the identity map where the widths match, else at
    ``W₀ = 0``; use :meth:`AffineStitch.set_initial_map` / :func:`initialise` to set the initial map)."""
    check_kind(kind)
    if kind == "identity":
        return IdentityStitch(d_in, d_out)
    return AffineStitch(d_in, d_out, layer_norm=kind == "affine_ln", eps=eps)


def load_stitch_layer(config: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor]) -> StitchLayer:
    """Rebuilds a φ saved as ``(layer.config(), layer.state_dict())`` (strict)."""
    layer = build_stitch_layer(
        config["kind"], int(config["d_in"]), int(config["d_out"]), eps=float(config.get("eps", LN_EPS))
    )
    layer.load_state_dict(dict(state_dict), strict=True)
    return layer


class LeastSquaresAccumulator:
    """Streaming sums for the closed-form affine least-squares map ``y ≈ W x + b`` (float64).

    Keeps ``n``, ``Σx``, ``Σy``, ``Σ x xᵀ`` and ``Σ y xᵀ``; :meth:`solve` forms the centred
    covariances ``C_xx = Σ x xᵀ − n x̄ x̄ᵀ`` and ``C_yx = Σ y xᵀ − n ȳ x̄ᵀ`` and returns
    ``W = C_yx C_xx⁺`` (minimum-norm least squares, SVD-based ``gelsd``; eigenvalues of ``C_xx`` below
    :data:`RCOND` × the largest count as zero) and ``b = ȳ − W x̄``.
    """

    def __init__(self, d_in: int, d_out: int) -> None:
        self.n = 0
        self.sum_x = torch.zeros(d_in, dtype=torch.float64)
        self.sum_y = torch.zeros(d_out, dtype=torch.float64)
        self.sum_xx = torch.zeros(d_in, d_in, dtype=torch.float64)
        self.sum_yx = torch.zeros(d_out, d_in, dtype=torch.float64)

    def update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Adds rows ``x`` ``(n, d_in)`` and ``y`` ``(n, d_out)`` (any device; products in float64)."""
        if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
            raise ValueError(f"least squares needs paired rows, got shapes {tuple(x.shape)} and {tuple(y.shape)}")
        x = x.detach().to(torch.float64)
        y = y.detach().to(x.device, torch.float64)
        self.n += x.shape[0]
        self.sum_x += x.sum(0).cpu()
        self.sum_y += y.sum(0).cpu()
        self.sum_xx += (x.T @ x).cpu()
        self.sum_yx += (y.T @ x).cpu()

    def solve(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W (d_out, d_in), b (d_out,))`` in float64 on the CPU."""
        if self.n < 2:
            raise ValueError(f"least squares needs at least 2 rows, got {self.n}")
        mean_x = self.sum_x / self.n
        mean_y = self.sum_y / self.n
        c_xx = self.sum_xx - self.n * torch.outer(mean_x, mean_x)
        c_yx = self.sum_yx - self.n * torch.outer(mean_y, mean_x)
        c_xx = 0.5 * (c_xx + c_xx.T)
        # W C_xx = C_yx  <=>  C_xx Wᵀ = C_yxᵀ (C_xx symmetric). Directions of C_xx with eigenvalue below
        # RCOND × the largest carry no signal (float32 inputs; LN(h) has an exactly-zero direction, the ones
        # vector): they are dropped, as the minimum-norm solution does for exactly singular C_xx — inverting
        # their round-off would put huge weights on them.
        weight = torch.linalg.lstsq(c_xx, c_yx.T, rcond=RCOND, driver="gelsd").solution.T
        bias = mean_y - weight @ mean_x
        return weight, bias


def least_squares_map(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form ``argmin_{W, b} Σᵢ ‖W xᵢ + b − yᵢ‖²`` for rows ``x`` ``(n, d_in)``, ``y`` ``(n, d_out)``
    (see :class:`LeastSquaresAccumulator`)."""
    acc = LeastSquaresAccumulator(x.shape[1], y.shape[1])
    acc.update(x, y)
    return acc.solve()


def initialise_least_squares(layer: AffineStitch, pairs: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Sets ``layer``'s initial map to the least-squares map from ``layer.normalise(x)`` to ``y`` over the
    row pairs ``(x (n, d_in), y (n, d_out))`` (LayerNorm at its initial γ = 1, β = 0 for ``affine_ln``)."""
    acc = LeastSquaresAccumulator(layer.d_in, layer.d_out)
    with torch.no_grad():
        for x, y in pairs:
            acc.update(layer.normalise(x.to(layer.delta_weight)), y)
    weight, bias = acc.solve()
    if not bool(torch.isfinite(weight).all() and torch.isfinite(bias).all()):
        raise ValueError("the least-squares initial map is not finite (NaN/Inf in the residual streams?)")
    layer.set_initial_map(weight.to(layer.initial_weight), bias.to(layer.initial_bias))
