"""Residual-stream extraction, one batch at a time.

Layers are the handle's (:mod:`thinkalike.models.handle`): 0 = embeddings, ``l`` = after block
``l - 1``, ``n_layers`` = the last block's output *before* the final norm; with ``final_norm``
the final norm's output is one more layer, ``n_layers + 1`` (transformers' ``hidden_states[-1]``).

Where the streams go:

* **to the host** (the default; what a store is written from): on a GPU, batch ``k``'s copy to page-locked host
  memory runs on a side CUDA stream while batch ``k + 1``'s forward pass runs (:func:`overlapped_host_copies`, one
  batch of lookahead); the finiteness check reads float64 per-layer sums that travel with the copy;
* **kept on the device** (``on_device=True``; streaming CKA, :meth:`ResidualBatches.kept_on_device`): the batches are
  torch tensors on the model's device and nothing is copied to the host.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, TypedDict

import numpy as np
import torch
from tqdm.auto import tqdm

from thinkalike.models.activation_store import ActivationBatch
from thinkalike.models.handle import ModelHandle

_NUMPY_DTYPES = {torch.float32: np.float32, torch.float16: np.float16, torch.float64: np.float64}


def _as_tensor(values, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values.to(dtype)
    return torch.as_tensor(np.asarray(values), dtype=dtype)


def layer_sums(residual: torch.Tensor) -> torch.Tensor:
    """One float64 sum per layer, ``(L,)``: NaN and ±Inf propagate into it, and a float64 sum of finite
    float16/32 values cannot overflow, so a finite sum means a finite layer."""
    return residual.flatten(1).sum(dim=1, dtype=torch.float64)


def _check_finite(
    residual: torch.Tensor, handle: ModelHandle, start: int, what: str, sums: torch.Tensor | None = None
) -> None:
    """Raises naming the first layer with a NaN/Inf.

    Fast path: the per-layer sums (:func:`layer_sums`; ``sums`` when already computed); only a non-finite sum
    triggers the element-wise scan.
    """
    if sums is None:
        sums = layer_sums(residual)
    if bool(torch.isfinite(sums).all()):
        return
    finite = torch.isfinite(residual).flatten(1).all(dim=1)
    if not bool(finite.all()):
        layer = int((~finite).nonzero()[0, 0])
        raise ValueError(
            f"model {handle.name!r}: {what} in the residual stream at layer {layer} "
            f"(layer 0 = embeddings; batch starting at sequence {start})"
        )


def to_host(streams: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``streams`` as ``dtype`` in host memory. From a GPU the copy lands in page-locked memory, which the GPU
    writes directly, where a copy into ordinary pages goes through a staging buffer of the driver, chunk by chunk
    (``benchmarks/gpu_scale.py`` measures extraction to host memory); the values are those of
    ``streams.to("cpu", dtype)``."""
    if streams.is_cuda:
        host = torch.empty(streams.shape, dtype=dtype, pin_memory=True)
        host.copy_(streams)
        return host
    return streams.to(dtype=dtype)


def narrows(source: torch.dtype, target: torch.dtype) -> bool:
    """Whether casting ``source`` to ``target`` can turn a finite value into ±Inf (a smaller largest value:
    float32 → float16, bfloat16 → float16); widening (bfloat16 or float16 → float32) never does."""
    return source != target and torch.finfo(target).max < torch.finfo(source).max


class ResidualBatch(TypedDict):
    """One batch of :func:`iter_residual_batches`: every layer's streams, padded, and its first sequence."""

    residual: np.ndarray | torch.Tensor  # (layers, batch, seq, d_model); a torch tensor when kept on the device
    sequence_start: int


def iter_residual_batches(
    handle: ModelHandle,
    input_ids,
    attention_mask=None,
    batch_size: int = 32,
    dtype: torch.dtype = torch.float32,
    progress: bool = True,
    final_norm: bool = False,
    on_device: bool = False,
) -> Iterator[ResidualBatch]:
    """Yield ``{"residual": (n_layers + 1 + final_norm, b, seq, d_model) numpy array, "sequence_start": int}``
    for consecutive batches of ``input_ids`` ``(n_sequences, seq)``; with ``on_device`` the residual is a torch
    tensor on the handle's device (module docstring).

    ``final_norm``: add the final norm's output as layer ``n_layers + 1``
    (:meth:`ModelHandle.layer_streams`; raises ``NoFinalNormError`` before any forward pass for
    a model without one).

    Computed under ``torch.no_grad()`` on the handle's device; ``dtype`` is the output dtype
    (``torch.float32``, ``torch.float16`` or ``torch.float64``). ``attention_mask`` ``None`` means
    all ones. Raises ``ValueError`` naming the model and the first layer holding NaN/Inf (or
    values that overflow ``dtype``).
    """
    if dtype not in _NUMPY_DTYPES:
        raise ValueError(f"dtype must be one of {list(_NUMPY_DTYPES)}, got {dtype}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if final_norm:
        handle.check_final_norm()
    ids = _as_tensor(input_ids, torch.long)
    if ids.ndim != 2:
        raise ValueError(f"input_ids must be (n_sequences, seq), got shape {tuple(ids.shape)}")
    mask = torch.ones_like(ids) if attention_mask is None else _as_tensor(attention_mask, torch.long)
    if mask.shape != ids.shape:
        raise ValueError(f"attention_mask shape {tuple(mask.shape)} != input_ids shape {tuple(ids.shape)}")
    device = handle.device
    n = ids.shape[0]
    starts = range(0, n, batch_size)

    def forward_passes() -> Iterator[tuple[int, torch.Tensor]]:
        for start in tqdm(
            starts, total=len(starts), disable=not progress, desc=f"residuals {handle.name}", unit="batch"
        ):
            with torch.no_grad():
                streams = handle.layer_streams(
                    ids[start : start + batch_size].to(device),
                    mask[start : start + batch_size].to(device),
                    final_norm=final_norm,
                )
            yield start, streams  # outside no_grad: the consumer runs with the caller's grad mode

    if on_device:
        for start, residual in forward_passes():
            _check_finite(residual, handle, start, "NaN/Inf")
            widened = residual.to(dtype)
            if narrows(residual.dtype, dtype):
                _check_finite(widened, handle, start, f"values that overflow {dtype}")
            yield {"residual": widened, "sequence_start": start}
        return
    for copy in overlapped_host_copies(forward_passes(), dtype):
        _check_finite(copy.streams, handle, copy.start, "NaN/Inf", sums=copy.sums)
        if narrows(copy.source_dtype, dtype):
            _check_finite(copy.streams, handle, copy.start, f"values that overflow {dtype}")
        yield {"residual": copy.streams.numpy(), "sequence_start": copy.start}


class HostCopy(NamedTuple):
    """One batch's streams in host memory, with the per-layer float64 sums of the values before the cast."""

    start: int
    streams: torch.Tensor
    sums: torch.Tensor
    source_dtype: torch.dtype


def overlapped_host_copies(
    batches: Iterable[tuple[int, torch.Tensor]], dtype: torch.dtype, lookahead: int | None = None
) -> Iterator[HostCopy]:
    """A :class:`HostCopy` (the streams on the host as ``dtype``) of each ``(start, streams)`` of ``batches``, in
    order.

    On a GPU each batch is cast to ``dtype`` and summed per layer (:func:`layer_sums`) on the device as it arrives,
    and its copy to page-locked host memory (on a side CUDA stream) is queued only after the next batch has been
    taken from ``batches`` (``lookahead``: default 1 on a GPU, 0 elsewhere) — that is, after the next forward pass
    has been launched. The order matters: a forward pass that reads a value back to the host (transformers checks
    the attention mask so, before its first block) queues that small copy behind any large copy in flight on the
    same copy engine: with the copy queued before the next forward pass, a batch costs the forward pass and the copy
    one after the other; queued after it, the copy overlaps the forward pass (``benchmarks/gpu_scale.py`` measures
    extraction against the bare forward pass at Pythia-6.9b's shape). The device
    tensors are held until their copy is done (no allocator reuse under a running copy). The sums are of the values
    before the cast (a NaN or ±Inf of the model), so an overflow of a narrowing cast is checked by the caller on the
    host copy. Elsewhere (CPU) the copy is :func:`to_host`.
    """
    waiting: list[_DeviceBatch] = []
    side: torch.cuda.Stream | None = None
    for start, streams in batches:
        depth = (1 if streams.is_cuda else 0) if lookahead is None else lookahead
        waiting.append(_DeviceBatch.arrived(start, streams, dtype))
        while len(waiting) > depth:
            batch = waiting.pop(0)
            if batch.cast.is_cuda:
                side = side or torch.cuda.Stream(device=batch.cast.device)
            yield batch.copied(side)
    while waiting:
        yield waiting.pop(0).copied(side)


@dataclass
class _DeviceBatch:
    """One batch on its device, cast and summed, waiting for its copy to the host."""

    start: int
    source_dtype: torch.dtype
    cast: torch.Tensor
    sums: torch.Tensor
    ready: torch.cuda.Event | None  # recorded after the cast and the sums (GPU only)

    @classmethod
    def arrived(cls, start: int, streams: torch.Tensor, dtype: torch.dtype) -> _DeviceBatch:
        sums, cast, ready = layer_sums(streams), streams.to(dtype), None
        if streams.is_cuda:
            ready = torch.cuda.Event()
            ready.record()
        return cls(start, streams.dtype, cast, sums, ready)

    def copied(self, side: torch.cuda.Stream | None) -> HostCopy:
        """The copy, done: queued on ``side`` after this batch's cast (GPU) and waited for; :func:`to_host` on a
        CPU."""
        if self.ready is None or side is None:
            return HostCopy(self.start, to_host(self.cast, self.cast.dtype), self.sums, self.source_dtype)
        side.wait_event(self.ready)
        with torch.cuda.stream(side):
            host = torch.empty(self.cast.shape, dtype=self.cast.dtype, pin_memory=True)
            host.copy_(self.cast, non_blocking=True)
            host_sums = torch.empty(self.sums.shape, dtype=self.sums.dtype, pin_memory=True)
            host_sums.copy_(self.sums, non_blocking=True)
            done = torch.cuda.Event()
            done.record(side)
        done.synchronize()
        return HostCopy(self.start, host, host_sums, self.source_dtype)


def iter_activation_batches(
    handle: ModelHandle,
    input_ids,
    attention_mask,
    batch_size: int = 32,
    dtype: torch.dtype = torch.float32,
    progress: bool = True,
    layers: Sequence[int] | None = None,
    final_norm: bool = False,
    on_device: bool = False,
) -> Iterator[ActivationBatch]:
    """:func:`iter_residual_batches` as :class:`ActivationBatch` es (real tokens only, with their attention
    mask), ready for :func:`thinkalike.models.activation_store.write_activation_store`; with ``on_device`` their
    rows are torch tensors on the handle's device (for streaming CKA; not for writing).

    ``layers``: keep only these residual streams (0 = embeddings … ``handle.n_layers``, and
    ``n_layers + 1`` = the final norm's output when ``final_norm``); all by default.
    """
    mask = np.asarray(attention_mask)
    keep = check_layers(layers, handle.n_layers, handle.name, final_norm)
    for batch in iter_residual_batches(
        handle, input_ids, mask, batch_size, dtype=dtype, progress=progress, final_norm=final_norm, on_device=on_device
    ):
        start = int(batch["sequence_start"])
        residual = batch["residual"]
        if keep is not None:
            residual = residual[keep]
        yield ActivationBatch.from_padded(residual, mask[start : start + residual.shape[1]], start)


@dataclass(frozen=True)
class ResidualBatches:
    """Re-iterable extraction of ``handle`` on ``sequences`` (``input_ids``, ``attention_mask``): each pass runs the
    model batch by batch (:func:`iter_activation_batches`; bounded memory), so a consumer that iterates twice runs
    it twice. ``on_device``: the batches stay on the model's device (:meth:`kept_on_device`)."""

    handle: ModelHandle
    sequences: dict[str, np.ndarray]
    batch_size: int
    dtype: torch.dtype
    layers: list[int] | None = None
    final_norm: bool = False
    progress: bool = True
    on_device: bool = False

    def __iter__(self) -> Iterator[ActivationBatch]:
        return iter_activation_batches(
            self.handle,
            self.sequences["input_ids"],
            self.sequences["attention_mask"],
            self.batch_size,
            dtype=self.dtype,
            progress=self.progress,
            layers=self.layers,
            final_norm=self.final_norm,
            on_device=self.on_device,
        )

    def kept_on_device(self) -> ResidualBatches:
        """The same extraction with its batches left on the model's device (streaming CKA)."""
        return replace(self, on_device=True)


def check_layers(layers: Sequence[int] | None, n_layers: int, model: str, final_norm: bool = False) -> list[int] | None:
    """``layers`` as a sorted list of distinct residual-stream indices in ``0 … n_layers`` (``… n_layers + 1``
    with ``final_norm``, the final norm's output); ``None`` for all."""
    if layers is None:
        return None
    top = n_layers + int(final_norm)
    chosen = sorted({int(layer) for layer in layers})
    if not chosen or chosen[0] < 0 or chosen[-1] > top:
        what = f"; {top} = the final norm's output" if final_norm else " (before the final norm)"
        raise ValueError(
            f"activations.layers: {list(layers)} is not a non-empty subset of 0 … {top} "
            f"(the residual streams of {model!r}; 0 = embeddings, {n_layers} = the last block{what})"
        )
    return chosen
