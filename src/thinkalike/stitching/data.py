"""Token splits, training targets and f's frozen features for stitching.

* :class:`TokenSplit` — token ids ``(n, seq)``, their 0/1 attention mask and, for classifiers,
  one label per sequence. :func:`split_tokens` cuts a corpus into disjoint training and
  evaluation splits (identical sequences go to the same side); :func:`check_disjoint` refuses
  evaluation sequences that also occur in training.
* Objectives (:data:`OBJECTIVES`) — the loss of g's output:

  - ``causal``: next-token cross-entropy, ``−log softmax(z_t)[x_{t+1}]`` over positions whose
    next token is real (attention mask 1) and, with ``exclude_ids`` (:func:`excluded_target_ids`:
    the tokenizer's special tokens, by default), not a special token — the ``<bos>``/``<eos>``
    between the sentences of a packed row are not predicted from the text, and g predicts them
    almost perfectly, so scoring them would dilute every penalty;
  - ``masked``: BERT masking (:func:`thinkalike.models.training.mask_tokens`: a fraction of the
    non-special real tokens is selected; 80 % become the mask token, 10 % a random token, 10 %
    stay) and cross-entropy at the selected positions. The masking is drawn **once** per split
    from a seed, so f's features of the corrupted inputs can be computed once; g's own loss, f's
    own loss and the stitched loss all use the same corrupted inputs and targets (a selected
    position holding one of ``exclude_ids`` is not scored either);
  - ``label``: cross-entropy of the sequence's logits ``(batch, n_classes)`` against its label.

  - ``label``'s targets are labels, never tokens: ``exclude_ids`` does not apply.

  Losses are kept as sums and target counts per batch (:func:`loss_sum`), so means are
  token-weighted over a split and micro-batches combine exactly.
* :func:`excluded_target_ids` — which token ids are never targets: the special tokens of the
  tokenizer by the rule the CKA side uses for ``is_special``
  (:func:`thinkalike.language.packing.special_token_ids`: bos, eos, pad, cls, sep, mask and any
  additional special token; never ``<unk>``, which stands for real text).
* :func:`layer_features` — f's residual stream after layer l for every sequence of a split,
  computed once under ``no_grad`` (or :func:`features_from_store`, read from an activation store).
* :func:`token_stream_mismatch` — stitching feeds f's features of *the same tokens* to g, so the
  two models must share a tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from thinkalike.language.packing import special_token_ids
from thinkalike.models.handle import ModelHandle
from thinkalike.models.training import MaskingTokens, mask_tokens
from thinkalike.stitching.layers import StitchConfigError

OBJECTIVES: tuple[str, ...] = ("causal", "masked", "label")
IGNORE = -100


def _long(values, what: str) -> torch.Tensor:
    tensor = values.detach().cpu() if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values))
    if tensor.is_floating_point():
        raise StitchConfigError(f"{what} must be integers, got {tensor.dtype}")
    return tensor.to(torch.long)


@dataclass(frozen=True)
class TokenSplit:
    """Sequences of token ids ``input_ids`` ``(n, seq)``, their 0/1 ``attention_mask`` (all ones when not
    given) and optional per-sequence ``labels`` ``(n,)`` (classifiers). CPU ``long`` tensors."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor | None = None

    @classmethod
    def of(cls, tokens, attention_mask=None, labels=None, *, what: str = "tokens") -> TokenSplit:
        """From arrays or tensors; a :class:`TokenSplit` is returned as is (then the other arguments must be None)."""
        if isinstance(tokens, TokenSplit):
            if attention_mask is not None or labels is not None:
                raise StitchConfigError(f"{what}: give the mask and labels inside the TokenSplit, not beside it")
            return tokens
        ids = _long(tokens, what)
        if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
            raise StitchConfigError(
                f"{what} must be a non-empty (n_sequences, seq) array, got shape {tuple(ids.shape)}"
            )
        mask = torch.ones_like(ids) if attention_mask is None else _long(attention_mask, f"{what} attention mask")
        if mask.shape != ids.shape:
            raise StitchConfigError(
                f"{what}: attention mask shape {tuple(mask.shape)} != token shape {tuple(ids.shape)}"
            )
        if labels is not None:
            labels = _long(labels, f"{what} labels").reshape(-1)
            if labels.shape[0] != ids.shape[0]:
                raise StitchConfigError(f"{what}: {labels.shape[0]} labels for {ids.shape[0]} sequences")
        return cls(ids, mask, labels)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.input_ids.shape[1])

    def subset(self, index) -> TokenSplit:
        """The sequences at ``index`` (array of positions)."""
        index = torch.as_tensor(np.asarray(index), dtype=torch.long)
        return TokenSplit(
            self.input_ids[index], self.attention_mask[index], None if self.labels is None else self.labels[index]
        )

    def row_keys(self) -> list[bytes]:
        """One hashable key per sequence: its real tokens (padding ignored) and label."""
        ids = self.input_ids.numpy()
        mask = self.attention_mask.numpy().astype(bool)
        labels = None if self.labels is None else self.labels.numpy()
        return [
            ids[i][mask[i]].tobytes() + (b"" if labels is None else b"|" + labels[i].tobytes())
            for i in range(len(self))
        ]


def split_indices(split: TokenSplit, *, eval_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers ``(train, eval)`` of disjoint splits of ``split``: distinct sequences (padding ignored) are
    shuffled with ``seed`` and about ``eval_fraction`` of them, with every copy of each, go to evaluation."""
    if not 0 < eval_fraction < 1:
        raise StitchConfigError(f"eval_fraction must be in (0, 1), got {eval_fraction}")
    keys = split.row_keys()
    distinct = sorted(set(keys))
    if len(distinct) < 2:
        raise StitchConfigError(
            f"cannot split {len(split)} sequences with {len(distinct)} distinct one(s) into "
            "disjoint training and evaluation sets"
        )
    order = np.random.default_rng(seed).permutation(len(distinct))
    n_eval = min(len(distinct) - 1, max(1, round(eval_fraction * len(distinct))))
    held = {distinct[i] for i in order[:n_eval]}
    is_eval = np.array([key in held for key in keys])
    return np.flatnonzero(~is_eval), np.flatnonzero(is_eval)


def split_tokens(
    tokens, attention_mask=None, labels=None, *, eval_fraction: float = 0.2, seed: int = 0
) -> tuple[TokenSplit, TokenSplit]:
    """Disjoint ``(train, eval)`` splits of a corpus (:func:`split_indices`)."""
    split = TokenSplit.of(tokens, attention_mask, labels)
    train, evaluation = split_indices(split, eval_fraction=eval_fraction, seed=seed)
    return split.subset(train), split.subset(evaluation)


def check_disjoint(train: TokenSplit, evaluation: TokenSplit) -> None:
    """Raises :class:`StitchConfigError` when an evaluation sequence also occurs in the training split."""
    seen = set(train.row_keys())
    shared = sum(key in seen for key in evaluation.row_keys())
    if shared:
        raise StitchConfigError(
            f"the evaluation tokens must be disjoint from the training tokens: {shared} of "
            f"{len(evaluation)} evaluation sequences also occur in the training split "
            "(split_tokens makes disjoint splits)"
        )


# --------------------------------------------------------------------------- objectives


def resolve_objective(objective: str, g: ModelHandle, has_labels: bool) -> str:
    """``auto``: ``label`` when labels are given, else ``causal`` / ``masked`` from g (``is_causal``)."""
    if objective == "auto":
        objective = "label" if has_labels else ("causal" if g.is_causal else "masked")
    if objective not in OBJECTIVES:
        raise StitchConfigError(f"unknown stitching objective {objective!r}; known: auto, {', '.join(OBJECTIVES)}")
    if objective == "label" and not has_labels:
        raise StitchConfigError("the label objective needs labels for the training and evaluation sequences")
    return objective


def masking_tokens(g: ModelHandle, masking: MaskingTokens | None) -> MaskingTokens:
    """``masking`` if given, else the mask token, special tokens and vocabulary size of g's tokenizer."""
    if masking is not None:
        return masking
    tokenizer = g.tokenizer
    if tokenizer is None or getattr(tokenizer, "mask_token_id", None) is None:
        raise StitchConfigError(
            f"the masked objective needs g's mask token: model {g.name!r} has no tokenizer with "
            "a mask token; pass masking=MaskingTokens(...)"
        )
    return MaskingTokens(
        mask_id=int(tokenizer.mask_token_id), special_ids=tuple(tokenizer.all_special_ids), vocab_size=len(tokenizer)
    )


def excluded_target_ids(
    f: ModelHandle | None, g: ModelHandle, exclude: bool, special_ids: Iterable[int] | None = None
) -> frozenset[int]:
    """The token ids that are never scored as targets: none when ``exclude`` is false; else ``special_ids`` when
    given, else the special tokens of g's tokenizer (f's when g has none; the two read the same token stream)
    by :func:`thinkalike.language.packing.special_token_ids` — the rule that marks ``is_special`` for CKA
    (bos, eos, pad, cls, sep, mask, additional special tokens; never ``<unk>``). A model without a tokenizer
    has no known special tokens: nothing is excluded unless ``special_ids`` says which."""
    if not exclude:
        return frozenset()
    if special_ids is not None:
        return frozenset(int(i) for i in special_ids)
    tokenizer = g.tokenizer if g.tokenizer is not None else (f.tokenizer if f is not None else None)
    return frozenset() if tokenizer is None else special_token_ids(tokenizer)


def _drop_ids(targets: torch.Tensor, ids: torch.Tensor, exclude_ids: frozenset[int]) -> torch.Tensor:
    """``targets`` with ``IGNORE`` wherever ``ids`` holds one of ``exclude_ids``."""
    if not exclude_ids:
        return targets
    excluded = torch.isin(ids, torch.tensor(sorted(exclude_ids), dtype=ids.dtype, device=ids.device))
    return targets.masked_fill(excluded, IGNORE)


def targets_for(
    split: TokenSplit,
    objective: str,
    *,
    masking: MaskingTokens | None = None,
    mask_probability: float = 0.15,
    seed: int = 0,
    exclude_ids: frozenset[int] = frozenset(),
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(model input ids, targets)`` of a split: ``causal`` — the ids, and the ids with ``IGNORE`` at padding
    and at the tokens of ``exclude_ids`` (the loss shifts them: position t is scored against target t+1);
    ``masked`` — the corrupted ids and the original ids at the selected real positions that are not in
    ``exclude_ids`` (``IGNORE`` elsewhere), drawn once from ``seed``; ``label`` — the ids and the labels
    ``(n,)`` (``exclude_ids`` does not apply)."""
    ids = split.input_ids
    if objective == "causal":
        return ids, _drop_ids(ids.masked_fill(split.attention_mask == 0, IGNORE), ids, exclude_ids)
    if objective == "masked":
        if masking is None:
            raise StitchConfigError("the masked objective needs MaskingTokens")
        generator = torch.Generator().manual_seed(int(seed))
        corrupted, targets = mask_tokens(ids, masking, mask_probability, generator)
        targets = _drop_ids(targets.masked_fill(split.attention_mask == 0, IGNORE), ids, exclude_ids)
        corrupted = torch.where(split.attention_mask == 0, ids, corrupted)
        return corrupted, targets
    if objective == "label":
        if split.labels is None:
            raise StitchConfigError("the label objective needs labels")
        return ids, split.labels
    raise StitchConfigError(f"unknown objective {objective!r}")


def loss_targets(targets: torch.Tensor, objective: str) -> torch.Tensor:
    """The targets the logits are scored against: shifted left by one for ``causal`` (position t predicts t+1)."""
    return targets[:, 1:] if objective == "causal" else targets


def target_count(targets: torch.Tensor, objective: str) -> torch.Tensor:
    """Number of scored targets (a 0-d tensor on ``targets``' device)."""
    return (loss_targets(targets, objective) != IGNORE).sum()


def loss_sum(logits: torch.Tensor, targets: torch.Tensor, objective: str) -> torch.Tensor:
    """Σ cross-entropy over the scored targets (float32): ``causal`` — logits ``(b, seq, V)`` at t against
    token t+1; ``masked`` — at the selected positions; ``label`` — logits ``(b, C)`` against ``(b,)``.

    For ``causal`` the targets are shifted left (the last position gets ``IGNORE``) rather than the logits cut
    to ``seq − 1`` positions: the same terms in the same order, without copying the logits (a sliced view is
    not contiguous) nor zero-filling their gradient around the slice."""
    if objective == "label" and logits.ndim != 2:
        raise ValueError(f"the label objective needs (batch, n_classes) logits, got shape {tuple(logits.shape)}")
    if objective == "causal":
        scored = torch.cat([targets[:, 1:], targets.new_full((targets.shape[0], 1), IGNORE)], dim=1)
    else:
        scored = targets
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), scored.reshape(-1), ignore_index=IGNORE, reduction="sum"
    )


def logits_fit(logits: torch.Tensor, targets: torch.Tensor, objective: str) -> bool:
    """Whether ``logits`` can be scored against ``targets`` (shape and vocabulary/class count)."""
    if tuple(logits.shape[:-1]) != tuple(targets.shape):
        return False
    scored = loss_targets(targets, objective)
    valid = scored[scored != IGNORE]
    return valid.numel() == 0 or int(valid.max()) < logits.shape[-1]


# --------------------------------------------------------------------------- features and token streams


@dataclass(frozen=True)
class PreparedSplit:
    """What training or evaluation reads: the inputs g's tail gets (``input_ids``, ``attention_mask``), the
    ``targets`` and f's frozen ``features`` ``(n, seq, d_f)`` after its layer l, all on one device."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    features: torch.Tensor

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(features, input_ids, attention_mask, targets)`` of the sequences ``index``."""
        return self.features[index], self.input_ids[index], self.attention_mask[index], self.targets[index]


def layer_features(
    handle: ModelHandle,
    layer: int,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    batch_size: int = 32,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The residual stream after ``layer`` (0 = embeddings) for every sequence, ``(n, seq, d_model)`` in
    ``dtype`` on ``device`` (default: the handle's), computed once under ``no_grad``. Raises ``ValueError``
    naming the model and layer if it holds NaN/Inf."""
    return layers_features(
        handle, [layer], input_ids, attention_mask, batch_size=batch_size, device=device, dtype=dtype
    )[layer]


def layers_features(
    handle: ModelHandle,
    layers: Iterable[int],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    batch_size: int = 32,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict[int, torch.Tensor]:
    """:func:`layer_features` of several layers from one pass over the sequences (each batch's residual streams
    hold every layer): ``{layer: (n, seq, d_model)}``."""
    layers = sorted(set(int(layer) for layer in layers))
    for layer in layers:
        if not 0 <= layer <= handle.n_layers:
            raise StitchConfigError(f"layer {layer} of model {handle.name!r} is out of range 0..{handle.n_layers}")
    device = torch.device(device) if device is not None else handle.device
    out = {layer: torch.empty((*input_ids.shape, handle.d_model), dtype=dtype, device=device) for layer in layers}
    with torch.no_grad():
        for start in range(0, input_ids.shape[0], batch_size):
            ids = input_ids[start : start + batch_size].to(handle.device)
            mask = attention_mask[start : start + batch_size].to(handle.device)
            streams = handle.residual_streams(ids, mask)
            for layer in layers:
                stream = streams[layer]
                if not bool(torch.isfinite(stream).all()):
                    raise ValueError(
                        f"model {handle.name!r}: NaN/Inf in the residual stream after layer {layer} "
                        f"(sequences {start}..{start + ids.shape[0] - 1})"
                    )
                out[layer][start : start + ids.shape[0]] = stream.to(device=device, dtype=dtype)
    return out


def features_from_store(store, layer: int, *, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """f's residual stream after ``layer`` read from an activation store (``ActivationStore`` or stream):
    ``(features (n, seq, d_model) — zeros at padding, attention_mask (n, seq))`` in the store's sequence
    order. The caller pairs them with the same token ids the store was extracted from."""
    layers = list(store.layers)
    if layer not in layers:
        raise StitchConfigError(f"the activation store of {store.model!r} holds layers {layers}, not layer {layer}")
    row = layers.index(layer)
    features, masks = [], []
    for batch in store:
        mask = torch.as_tensor(np.asarray(batch.attention_mask), dtype=torch.long)
        tokens = torch.as_tensor(np.asarray(batch.tokens()[row]), dtype=dtype)
        padded = torch.zeros((*mask.shape, tokens.shape[-1]), dtype=dtype)
        padded[mask.bool()] = tokens
        features.append(padded)
        masks.append(mask)
    if not features:
        raise StitchConfigError(f"the activation store of {store.model!r} is empty")
    return torch.cat(features), torch.cat(masks)


def _tokenizer_fingerprint(tokenizer) -> str:
    """What decides a tokenizer's token stream: the fast tokenizer's full definition (normaliser,
    pre-tokenizer, model, post-processor; not its truncation/padding settings), else its class and vocabulary."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        return json.dumps(spec, sort_keys=True)
    return json.dumps([type(tokenizer).__name__, sorted(tokenizer.get_vocab().items())])


def token_stream_mismatch(f: ModelHandle, g: ModelHandle) -> str | None:
    """Why f and g do not read the same token stream, or ``None``. With both tokenizers known they must
    tokenize identically (:func:`_tokenizer_fingerprint`); without, the input vocabulary sizes must match
    (a necessary condition only)."""
    tf, tg = f.tokenizer, g.tokenizer
    if tf is not None and tg is not None:
        if tf is tg or _tokenizer_fingerprint(tf) == _tokenizer_fingerprint(tg):
            return None
        return (
            f"model {f.name!r} and model {g.name!r} use different tokenizers (vocabulary sizes {len(tf)} and "
            f"{len(tg)}); stitching needs the same token stream"
        )
    vf, vg = f.embedding_matrix().shape[0], g.embedding_matrix().shape[0]
    if vf != vg:
        return (
            f"model {f.name!r} and model {g.name!r} have different vocabularies ({vf} and {vg} input tokens); "
            "stitching needs the same token stream"
        )
    return None


def check_features(features: torch.Tensor, split: TokenSplit, d_model: int, what: str) -> torch.Tensor:
    """``features`` if shaped ``(n, seq, d_model)`` for ``split`` and finite, else :class:`StitchConfigError`."""
    expected = (len(split), split.seq_len, d_model)
    if tuple(features.shape) != expected:
        raise StitchConfigError(
            f"{what} have shape {tuple(features.shape)}, expected {expected} (sequences, positions, f's d_model)"
        )
    if not bool(torch.isfinite(features).all()):
        raise StitchConfigError(f"{what} hold NaN/Inf")
    return features
