"""Fine-tuning copies of a pretrained zoo encoder as sequence classifiers (McCoy et al. 2020).

A classifier is the pretrained encoder (a ``bridge``-family zoo model, e.g. the masked encoder)
whose LM head is replaced by a class head ``W`` ``(n_classes, d_model)``; every other weight
starts from the encoder's. With ``LN_f`` the encoder's final norm, ``h_t`` the last residual
stream at position ``t`` and ``T`` the real (attention-mask 1) positions, the class logits are

    z = (1/|T|) Σ_{t∈T} W · LN_f(h_t)     (``pooling="mean"``)   or   z = W · LN_f(h_0)   (``"first"``:
                                                                        the ``<bos>`` token, BERT's [CLS])

(the head has no bias of its own; ``W · b`` of the final norm's bias plays that part). The
per-position head is the bridge's unembedding with ``d_vocab_out = n_classes``, so a classifier
is an ordinary zoo model — config dict + state dict — plus the ``"classifier"`` entry of its
config (labels, pooling, seeds) that :func:`thinkalike.models.sources.load_classifier` reads to pool its logits.

Training minimises the mean cross-entropy of ``z`` against the labels with AdamW, linear
warm-up then cosine decay to 10 % (:func:`thinkalike.models.training.learning_rate_factor`),
gradient norm clipped at 1. Copies differ only in two seeds (McCoy et al. 2020):
``head_seed`` draws ``W ~ N(0, head_init_std²)`` and ``data_seed`` the order of the training
pairs (a fresh permutation each epoch). Nothing else is random (the encoder has no dropout), so
the same seeds give the same weights on the same device.

:class:`SequenceClassifierHandle` is the :class:`~thinkalike.models.handle.ModelHandle` of a
classifier: residual streams, parameters and final norm are the encoder's; ``logits`` and
``logits_from_layer`` are the pooled class logits ``(batch, n_classes)``, which the stitching
``label`` objective scores.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, model_validator

from thinkalike.models.handle import ModelHandle, ModelSourceError, default_device
from thinkalike.models.training import (
    TrainingConfig,
    adamw,
    learning_rate_factor,
    progress_bar,
)
from thinkalike.models.zoo import state_dict_for_saving

POOLINGS: tuple[str, ...] = ("mean", "first")
CLASSIFIER_KEY = "classifier"
#: State-dict entries of the class head per zoo family: the bridge's unembedding (the encoder's LM head, replaced),
#: transformers' token-classification head (``classifier``, new).
HEAD_KEYS_BY_FAMILY: dict[str, tuple[str, str]] = {
    "bridge": ("unembed.weight", "unembed.bias"),
    "hf": ("classifier.weight", "classifier.bias"),
}
HEAD_KEYS: tuple[str, ...] = HEAD_KEYS_BY_FAMILY["bridge"]
#: Dropout settings of transformers' configs, set to 0 in an hf classifier: copies differ only in their two seeds.
HF_DROPOUTS: tuple[str, ...] = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")


class FinetuneConfig(BaseModel):
    """Fine-tuning settings of one copy: optimisation, pooling, the class head's init scale and the
    two seeds (``head_seed``: head initialisation; ``data_seed``: order of the training pairs). Strict types, unknown
    settings refused; the optimisation settings are checked as :class:`TrainingConfig` checks them."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    steps: int = 600
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 60
    weight_decay: float = 0.01
    pooling: str = "mean"
    head_init_std: float = 0.02
    head_seed: int = 0
    data_seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> FinetuneConfig:
        name = type(self).__name__
        if self.pooling not in POOLINGS:
            raise ValueError(f"{name}.pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.head_init_std <= 0:
            raise ValueError(f"{name}.head_init_std must be > 0, got {self.head_init_std}")
        self.schedule()  # TrainingConfig checks steps, batch_size, warmup_steps, learning_rate, weight_decay
        return self

    def schedule(self) -> TrainingConfig:
        """The optimisation settings as a :class:`TrainingConfig` (for the learning-rate schedule)."""
        return TrainingConfig(
            steps=self.steps,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            warmup_steps=self.warmup_steps,
            weight_decay=self.weight_decay,
        )


def copy_seeds(n_copies: int, seed: int = 0) -> list[tuple[int, int]]:
    """``(head_seed, data_seed)`` of each of ``n_copies`` copies: 2·n distinct 31-bit integers from
    ``numpy.random.SeedSequence(seed)``, so no two copies share either seed and the two seeds of a copy
    are unrelated."""
    if n_copies < 1:
        raise ValueError(f"n_copies must be >= 1, got {n_copies}")
    state = np.random.SeedSequence(seed).generate_state(4 * n_copies, dtype=np.uint32) >> 1
    distinct = list(dict.fromkeys(int(s) for s in state))[: 2 * n_copies]
    if len(distinct) < 2 * n_copies:  # pragma: no cover - 2n of 4n draws among 2^31 values
        raise ValueError(f"could not draw {2 * n_copies} distinct seeds from seed {seed}")
    return [(distinct[2 * i], distinct[2 * i + 1]) for i in range(n_copies)]


def classifier_config(
    encoder_config: Mapping[str, Any], name: str, labels: Sequence[str], settings: FinetuneConfig
) -> dict[str, Any]:
    """The zoo config of classifier ``name`` fine-tuned from ``encoder_config`` (JSON-serialisable): the
    encoder's with ``d_vocab_out = len(labels)`` and a ``"classifier"`` entry (labels, pooling, base model,
    the fine-tuning settings with both seeds). A ``bridge`` encoder's LM head becomes ``len(labels)`` wide; an
    ``hf`` encoder (a real checkpoint, e.g. BERT) becomes transformers' token classifier of its model type with
    every dropout 0. Raises :class:`ModelSourceError` for another family."""
    family = encoder_config.get("family")
    settings_key = {"bridge": "bridge_config", "hf": "hf_config"}.get(str(family))
    if settings_key is None or not isinstance(encoder_config.get(settings_key), Mapping):
        raise ModelSourceError(
            f"zoo model {encoder_config.get('name')!r}: fine-tuning needs a 'bridge' or 'hf' zoo encoder with its "
            f"{settings_key or 'bridge_config or hf_config'}, got family {family!r}"
        )
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise ValueError(f"a classifier needs at least two distinct labels, got {list(labels)}")
    config = copy.deepcopy(dict(encoder_config))
    config["name"] = name
    if family == "bridge":
        config["bridge_config"] = {**config["bridge_config"], "d_vocab_out": len(labels)}
    else:
        hf = dict(config["hf_config"])
        model_type = str(hf.get("model_type"))
        config["hf_config"] = {
            **hf,
            **dict.fromkeys(HF_DROPOUTS, 0.0),
            "architectures": [f"{_class_prefix(model_type)}ForTokenClassification"],
            "id2label": {str(i): label for i, label in enumerate(labels)},
            "label2id": {label: i for i, label in enumerate(labels)},
        }
    config[CLASSIFIER_KEY] = {
        "labels": list(labels),
        "pooling": settings.pooling,
        "base_model": encoder_config.get("name"),
        "finetune": settings.model_dump(),
    }
    return config


def _class_prefix(model_type: str) -> str:
    """The transformers class-name prefix of ``model_type`` (``bert`` → ``Bert``), from its masked-LM class."""
    from transformers.models.auto import modeling_auto

    masked = modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES.get(model_type)
    if not isinstance(masked, str) or not masked.endswith("ForMaskedLM"):
        raise ModelSourceError(f"fine-tuning: no masked-LM class for model_type {model_type!r} to classify with")
    return masked.removesuffix("ForMaskedLM")


def head_keys(config: Mapping[str, Any]) -> tuple[str, str]:
    """The class head's weight and bias keys of a classifier's family (:data:`HEAD_KEYS_BY_FAMILY`)."""
    return HEAD_KEYS_BY_FAMILY[str(config.get("family"))]


def build_classifier(
    encoder_weights: Mapping[str, torch.Tensor],
    encoder_config: Mapping[str, Any],
    name: str,
    labels: Sequence[str],
    settings: FinetuneConfig,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The classifier module before fine-tuning: the encoder's weights, a class head drawn from
    ``settings.head_seed``; and its config (:func:`classifier_config`)."""
    from thinkalike.models.architectures import build_zoo_module

    config = classifier_config(encoder_config, name, labels, settings)
    weight_key, bias_key = head_keys(config)
    module = build_zoo_module(config)
    state = module.state_dict()
    body = {key: value for key, value in encoder_weights.items() if key not in (weight_key, bias_key)}
    if config["family"] == "hf":  # the encoder's own LM head (outside its base model: BERT's cls.*) is dropped
        base = f"{getattr(module, 'base_model_prefix', '')}."
        body = {key: value for key, value in body.items() if key in state or key.startswith(base)}
    if set(state) - set(body) != {weight_key, bias_key} or set(body) - set(state):
        raise ModelSourceError(
            f"zoo model {encoder_config.get('name')!r}: its weights do not match its config "
            f"(missing {sorted(set(state) - set(body) - {weight_key, bias_key})[:5]}, unexpected "
            f"{sorted(set(body) - set(state))[:5]})"
        )
    generator = torch.Generator().manual_seed(int(settings.head_seed))
    head = torch.randn(state[weight_key].shape, generator=generator) * settings.head_init_std
    module.load_state_dict({**body, weight_key: head, bias_key: torch.zeros_like(state[bias_key])}, strict=True)
    return module, config


def pool_logits(logits: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """Per-position class logits ``(batch, seq, C)`` → sequence logits ``(batch, C)``: the mean over real
    positions (``"mean"``) or position 0 (``"first"``)."""
    if pooling == "first":
        return logits[:, 0]
    if pooling != "mean":
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if attention_mask is None:
        return logits.mean(dim=1)
    weights = attention_mask.to(device=logits.device, dtype=logits.dtype).unsqueeze(-1)
    return (logits * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def _class_logits(
    module: torch.nn.Module,
    config: Mapping[str, Any],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    pooling: str,
) -> torch.Tensor:
    from thinkalike.models.architectures import zoo_logits

    return pool_logits(zoo_logits(module, dict(config), input_ids, attention_mask), attention_mask, pooling)


def freeze_below(module: torch.nn.Module, n_top: int) -> list[str]:
    """Makes only the top ``n_top`` blocks, the final norm and the head of a TransformerLens bridge trainable;
    returns the names of the trainable parts. Raises ``ValueError`` for ``n_top`` outside ``1 … n_layers``."""
    blocks = module.blocks
    if not isinstance(blocks, torch.nn.ModuleList):
        raise TypeError(f"{type(module).__name__} is not a TransformerLens bridge (its blocks are not a module list)")
    if not 1 <= n_top <= len(blocks):
        raise ValueError(f"top_layers: {n_top} outside 1 … {len(blocks)} (blocks of the model)")
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    trainable = {f"blocks.{i}": blocks[i] for i in range(len(blocks) - n_top, len(blocks))}
    trainable.update({"ln_final": module.get_submodule("ln_final"), "unembed": module.get_submodule("unembed")})
    for part in trainable.values():
        for parameter in part.parameters():
            parameter.requires_grad_(True)
    return list(trainable)


def finetune_classifier(
    encoder_weights: Mapping[str, torch.Tensor],
    encoder_config: Mapping[str, Any],
    train: Mapping[str, np.ndarray],
    name: str,
    labels: Sequence[str],
    settings: FinetuneConfig,
    device: torch.device | str | None = None,
    *,
    progress: bool = True,
    log_every: int = 10,
    top_layers: int | None = None,
) -> tuple[dict[str, torch.Tensor], dict[str, Any], pd.DataFrame]:
    """Fine-tunes one copy of the encoder on ``train`` (``input_ids``, ``attention_mask``, ``labels``, e.g.
    :func:`thinkalike.language.nli.encode_pairs`); returns its weights (contiguous CPU tensors, ready for
    safetensors), its config (JSON-serialisable) and the training curve (``step``, ``train_loss`` — the mean
    over the last ``log_every`` steps —, ``seconds``). A progress bar named ``name`` shows the loss. With
    ``top_layers``, only the top ``top_layers`` blocks, the final norm and the head train (:func:`freeze_below`;
    recorded in the config's ``"classifier"`` entry)."""
    input_ids = torch.tensor(np.asarray(train["input_ids"]), dtype=torch.long)
    attention_mask = torch.tensor(np.asarray(train["attention_mask"]), dtype=torch.long)
    targets = torch.tensor(np.asarray(train["labels"]), dtype=torch.long)
    if input_ids.ndim != 2 or len(input_ids) < 1 or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"fine-tuning needs (n, seq) input_ids and an attention_mask of the same shape, got "
            f"{tuple(input_ids.shape)} and {tuple(attention_mask.shape)}"
        )
    if targets.shape != (len(input_ids),) or int(targets.min()) < 0 or int(targets.max()) >= len(labels):
        raise ValueError(f"fine-tuning needs one label id in 0..{len(labels) - 1} per sequence")
    device = default_device(device)
    module, config = build_classifier(encoder_weights, encoder_config, name, labels, settings)
    if top_layers is not None:
        config["classifier"]["top_layers"] = int(top_layers)
        freeze_below(module, top_layers)
    module.to(device).train()
    trainable = [parameter for parameter in module.parameters() if parameter.requires_grad]
    schedule = settings.schedule()
    optimiser = adamw(trainable, settings.learning_rate, settings.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: learning_rate_factor(step, schedule))
    order_rng = np.random.default_rng(settings.data_seed)
    order: np.ndarray = np.empty(0, dtype=np.int64)
    rows, window, started = [], [], time.perf_counter()
    with progress_bar(settings.steps, name, progress) as bar:
        for step in range(settings.steps):
            if len(order) < settings.batch_size:  # a fresh permutation each epoch; the tail starts the next
                order = np.concatenate([order, order_rng.permutation(len(input_ids))])
            index, order = torch.as_tensor(order[: settings.batch_size]), order[settings.batch_size :]
            logits = _class_logits(
                module, config, input_ids[index].to(device), attention_mask[index].to(device), settings.pooling
            )
            loss = F.cross_entropy(logits.float(), targets[index].to(device))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimiser.step()
            scheduler.step()
            window.append(float(loss.detach()))
            if (step + 1) % log_every == 0 or step + 1 == settings.steps:
                rows.append(
                    {"step": step + 1, "train_loss": float(np.mean(window)), "seconds": time.perf_counter() - started}
                )
                window = []
            bar.set_postfix_str(f"loss {window[-1] if window else rows[-1]['train_loss']:.3f}", refresh=False)
            bar.update(1)
    module.eval()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    curve = pd.DataFrame(rows)
    curve.insert(0, "model", name)
    return state_dict_for_saving(module), config, curve


class SequenceClassifierHandle(ModelHandle):
    """:class:`ModelHandle` of a fine-tuned classifier (module docstring): everything but the logits is the
    wrapped encoder handle's; ``logits`` / ``logits_from_layer`` are pooled class logits ``(batch, n_classes)``
    and ``unembedding_matrix()`` is the class head ``(d_model, n_classes)``."""

    def __init__(self, inner: ModelHandle, labels: Sequence[str], pooling: str) -> None:
        super().__init__(
            inner.name,
            inner.spec,
            inner.module,
            inner.tokenizer,
            inner.dims,
            is_causal=False,
            missing_weights=inner.missing_weights,
        )
        self.inner = inner
        self.labels = tuple(labels)
        self.pooling = pooling

    @property
    def n_classes(self) -> int:
        return len(self.labels)

    def residual_streams(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self.inner.residual_streams(input_ids, attention_mask)

    def final_norm_absence(self) -> str | None:
        return self.inner.final_norm_absence()

    def final_norm_output(self, residual: torch.Tensor) -> torch.Tensor:
        return self.inner.final_norm_output(residual)

    def embedding_matrix(self) -> torch.Tensor:
        return self.inner.embedding_matrix()

    def unembedding_matrix(self) -> torch.Tensor:
        return self.inner.unembedding_matrix()

    def layer_parameters(self, block: int) -> dict[str, torch.Tensor]:
        return self.inner.layer_parameters(block)

    def logits_from_layer(
        self, residual: torch.Tensor, layer: int, input_ids: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Class logits when the residual stream after ``layer`` is ``residual`` (only the tail blocks run)."""
        return pool_logits(
            self.inner.logits_from_layer(residual, layer, input_ids, attention_mask), attention_mask, self.pooling
        )

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Class logits ``(batch, n_classes)`` of a plain forward pass."""
        return pool_logits(self.inner.logits(input_ids, attention_mask), attention_mask, self.pooling)


def classifier_entry(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``"classifier"`` entry of a classifier's zoo config; :class:`ModelSourceError` when it has none
    (or one without labels and a pooling in :data:`POOLINGS`)."""
    entry = config.get(CLASSIFIER_KEY)
    if not isinstance(entry, Mapping) or "labels" not in entry or entry.get("pooling") not in POOLINGS:
        raise ModelSourceError(
            f"zoo model {config.get('name')!r} is not a classifier: its config has no "
            f"'{CLASSIFIER_KEY}' entry with labels and a pooling in {POOLINGS}"
        )
    return entry


def wrap_classifier(inner: ModelHandle, config: Mapping[str, Any]) -> SequenceClassifierHandle:
    """``inner`` (the encoder handle of a classifier's zoo config) as a :class:`SequenceClassifierHandle` with the
    labels and pooling of the config's ``"classifier"`` entry (what ``load_model("zoo:…")`` returns for it)."""
    entry = classifier_entry(config)
    return SequenceClassifierHandle(inner, entry["labels"], entry["pooling"])


@torch.no_grad()
def predict_labels(
    handle: ModelHandle, input_ids: np.ndarray, attention_mask: np.ndarray, batch_size: int = 256
) -> np.ndarray:
    """``argmax`` of the handle's class logits for every sequence, int64 ``(n,)``."""
    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    mask = torch.as_tensor(np.asarray(attention_mask), dtype=torch.long)
    out = []
    for start in range(0, len(ids), batch_size):
        logits = handle.logits(
            ids[start : start + batch_size].to(handle.device), mask[start : start + batch_size].to(handle.device)
        )
        out.append(logits.argmax(dim=-1).cpu())
    return torch.cat(out).numpy().astype(np.int64) if out else np.empty(0, dtype=np.int64)
