"""A :class:`~thinkalike.models.handle.ModelHandle` for Hugging Face ``transformers`` models.

Supported (tested on tiny random checkpoints): GPT-2 (``GPT2LMHeadModel``), GPT-NeoX / Pythia
(``GPTNeoXForCausalLM``), BERT (``BertForMaskedLM``, and ``BertModel`` sentence encoders
without an LM head), Llama and its relatives with
``self_attn.{q,k,v,o}_proj`` (``LlamaForCausalLM``, GQA included) and Mamba
(``MambaForCausalLM``). Any other model whose blocks form one ``nn.ModuleList`` of
``num_hidden_layers`` entries can still be hooked (residual streams, ``logits_from_layer``);
its parameter groups raise :class:`UnsupportedArchitectureError`.

Conventions
-----------
* **Residual streams** are captured with hooks, never read from ``output_hidden_states``:
  index 0 is the input of block 0 (a forward pre-hook: embeddings incl. position embeddings,
  dropout, BERT's embedding LayerNorm), index ``l`` the output of block ``l - 1``. For pre-LN
  models (GPT-2, NeoX, Llama, Mamba; GGUF files, loaded as these) Hugging Face's *last* hidden
  state has the final norm applied; ours is the raw residual after the last block (the last
  stored layer is pre-final-norm), so ``final_norm(residual[-1]) @ U (+ bias)`` gives the
  logits. BERT is post-LN: block outputs are the hidden states; its MLM head (dense + GELU +
  LayerNorm) comes before ``U`` and is what ``final_norm`` applies for BERT.
* **Final norm as one more layer** (``layer_streams(..., final_norm=True)``,
  ``activations.final_norm``): ``final_norm_output`` applies the base model's final norm
  (``ln_f``, ``final_layer_norm``, ``norm``, ``norm_f``…) to the last residual stream; it equals
  transformers' ``hidden_states[-1]``. Post-LN masked families (BERT…) have no final norm —
  their ``hidden_states[-1]`` is the last block's output, already stored — and raise
  :class:`~thinkalike.models.handle.NoFinalNormError`, as does any model whose base has no final norm.
* **logits_from_layer** runs the tail only: the model's own forward with its block list
  temporarily cut to blocks ``layer …`` (:func:`~thinkalike.models.handle.running_only_blocks_from`)
  and a pre-hook that substitutes the given residual for the input of block ``layer`` — or, for
  ``layer == n_layers``, of the final norm (else the LM head). The embedding lookup, masks and
  positions are prepared as usual (their output is replaced); blocks before ``layer`` do not
  run. Gradients flow into ``residual``. ``logits`` is the plain forward pass.
* **Parameter groups** (TransformerLens shapes, biases omitted):

  ========  ======================================  ==========================================
  family    attention                               MLP (FF_in / FF_out)
  ========  ======================================  ==========================================
  GPT-2     ``attn.c_attn`` (Conv1D, (d, 3d):       ``mlp.c_fc`` / ``mlp.c_proj`` (Conv1D)
            q | k | v blocks), ``attn.c_proj``
  NeoX      ``attention.query_key_value`` rows       ``mlp.dense_h_to_4h`` / ``mlp.dense_4h_to_h``
            laid out ``[head, (q, k, v), d_head]``,
            ``attention.dense``
  BERT      ``attention.self.{query,key,value}``,    ``intermediate.dense`` / ``output.dense``
            ``attention.output.dense``
  Llama     ``self_attn.{q,k,v,o}_proj``; with GQA   ``mlp.up_proj`` / ``mlp.down_proj``; the
            K/V heads are repeated to ``n_heads``    gate (``gate_proj``) is omitted
            (kv head j serves query heads
            ``j*r .. j*r+r-1``, as ``repeat_kv``)
  Mamba     none: ``params["W_Q"]`` etc. raise       ``mixer.in_proj`` x-half (the first
            :class:`UnsupportedArchitectureError`    ``intermediate_size`` rows; the gate half
                                                     is omitted) / ``mixer.out_proj``
  ========  ======================================  ==========================================

  ``layer_parameters`` returns a :class:`ParameterGroups` dict: a group the architecture lacks
  is absent from it, and indexing it raises :class:`UnsupportedArchitectureError` naming the
  model and the group.
* **Models without an LM head** (a base model such as ``BertModel``): residual streams, the
  input embedding and parameter groups work; ``unembedding_matrix``, ``unembedding_bias`` and
  ``logits_from_layer`` raise :class:`NoUnembeddingError`, and so does ``final_norm`` for the
  post-LN masked families (BERT…), whose "final norm" is the head's transform. A pre-LN base
  model keeps its final norm (it belongs to the base model).
* **Missing weights** (``missing_weights``: the keys transformers reported as newly
  initialised) are sorted into parts — ``embeddings`` (anything of the base model before the
  blocks), ``block i``, ``final_norm``, ``head``, ``unused`` (a pooler) — and every method
  raises :class:`MissingWeightsError` naming the missing weights of the parts it computes
  with; ``check_view("residual_streams")`` needs ``embeddings`` and the blocks,
  ``check_view("all")`` every part but ``unused``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import torch

from thinkalike.models.handle import (
    MissingWeightsError,
    ModelDimensions,
    ModelHandle,
    NoUnembeddingError,
    UnsupportedArchitectureError,
    check_view_name,
    first_tensor,
    missing_weights_message,
    running_only_blocks_from,
    substitute_input,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# Attribute names, relative to ``module.base_model``.
_BLOCK_LIST_PATHS: tuple[str, ...] = ("h", "layers", "layer", "encoder.layer", "blocks", "decoder.layers")
_FINAL_NORM_NAMES: tuple[str, ...] = ("ln_f", "final_layer_norm", "norm", "norm_f", "final_layernorm")
_MASKED_MODEL_TYPES = frozenset(
    {
        "bert",
        "roberta",
        "xlm-roberta",
        "distilbert",
        "albert",
        "electra",
        "deberta",
        "deberta-v2",
        "camembert",
        "modernbert",
        "megatron-bert",
    }
)


def _token_class_head(module: torch.nn.Module) -> torch.nn.Module | None:
    """The ``classifier`` linear layer of a transformers token classifier (its logits are per position, like an LM
    head's over classes), else ``None``."""
    head = getattr(module, "classifier", None)
    if type(module).__name__.endswith("ForTokenClassification") and isinstance(head, torch.nn.Linear):
        return head
    return None


def _get_attr_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _heads_in(weight_in_out: torch.Tensor, n_heads: int, d_head: int) -> torch.Tensor:
    """``(d_model, n_heads * d_head)`` (x @ W convention) -> ``(n_heads, d_model, d_head)``."""
    d_model = weight_in_out.shape[0]
    return weight_in_out.reshape(d_model, n_heads, d_head).permute(1, 0, 2).contiguous()


def _heads_out(weight_in_out: torch.Tensor, n_heads: int, d_head: int) -> torch.Tensor:
    """``(n_heads * d_head, d_model)`` (z @ W convention) -> ``(n_heads, d_head, d_model)``."""
    return weight_in_out.reshape(n_heads, d_head, weight_in_out.shape[-1]).contiguous()


class ParameterGroups(dict):
    """The groups of one block; asking for a group the architecture lacks raises
    :class:`UnsupportedArchitectureError` naming the model and the group (not ``KeyError``)."""

    def __init__(self, model: str, reason: str, groups: dict[str, torch.Tensor]) -> None:
        super().__init__(groups)
        self.model = model
        self.reason = reason

    def __missing__(self, group: str):
        raise UnsupportedArchitectureError(f"{self.model}: no parameter group {group!r} ({self.reason})")


class HFModelHandle(ModelHandle):
    """A ``transformers`` ``PreTrainedModel`` (with an LM head, or a base model without one) seen
    through :class:`ModelHandle`.

    ``is_causal`` is inferred when ``None`` (masked-LM classes and BERT-like model types are not
    causal). ``missing_weights``: state-dict keys the checkpoint lacked (transformers'
    ``missing_keys``); methods that would use one raise. The module is put in eval mode.
    ``residual_streams`` ends with the last block's output before the final norm; the final
    norm's output (``hidden_states[-1]``) is layer ``n_layers + 1`` of
    ``layer_streams(..., final_norm=True)`` only.
    """

    module: PreTrainedModel

    def __init__(
        self,
        name: str,
        spec: str,
        module: PreTrainedModel,
        tokenizer=None,
        is_causal: bool | None = None,
        missing_weights: Iterable[str] = (),
    ) -> None:
        config = getattr(module, "config", None)
        if config is None:
            raise UnsupportedArchitectureError(
                f"model {name!r} ({spec}): {type(module).__name__} has no transformers config"
            )
        self.config = config
        self.model_type = getattr(config, "model_type", "")
        module.eval()
        self._name_for_errors = f"model {name!r} ({spec}, {type(module).__name__})"
        self.base = getattr(module, "base_model", module)
        self.blocks = self._find_blocks(module)
        # the LM head, or a fine-tuned copy's per-position class head (transformers' *ForTokenClassification)
        # (None without either: has_unembedding; typed as transformers types get_output_embeddings)
        self.output_embeddings = cast(torch.nn.Linear, module.get_output_embeddings() or _token_class_head(module))
        self.final_norm_module = self._find_final_norm(module)
        if is_causal is None:
            is_causal = not ("MaskedLM" in type(module).__name__ or self.model_type in _MASKED_MODEL_TYPES)
        dims = self._dimensions(module)
        super().__init__(name, spec, module, tokenizer, dims, is_causal, tuple(missing_weights))
        self._names = {id(m): n for n, m in module.named_modules()}
        self._missing_by_part: dict[str, list[str]] = {}
        for key in self.missing_weights:
            self._missing_by_part.setdefault(self.weight_part(key), []).append(key)

    # ------------------------------------------------------------------ heads and missing weights
    @property
    def has_unembedding(self) -> bool:
        return self.output_embeddings is not None

    @property
    def ties_input_embedding(self) -> bool:
        return bool(getattr(self.config, "tie_word_embeddings", False))

    def _qualified_name(self, target: torch.nn.Module | None) -> str | None:
        """``target``'s dotted name inside the module (``""`` for the module itself)."""
        return None if target is None else self._names.get(id(target))

    @staticmethod
    def _under(key: str, prefix: str | None) -> bool:
        return prefix is not None and (prefix == "" or key == prefix or key.startswith(prefix + "."))

    def weight_part(self, key: str) -> str:
        """Which part of the model a state-dict key belongs to: ``final_norm``, ``block i``,
        ``head`` (outside the base model), ``unused`` (a pooler) or ``embeddings`` (the rest of the
        base model: whatever runs before the first block)."""
        if self.final_norm_module is not None and self._under(key, self._qualified_name(self.final_norm_module)):
            return "final_norm"
        blocks = self._qualified_name(self.blocks)
        if self._under(key, blocks):
            return f"block {key[len(blocks) + 1 :].split('.', 1)[0]}" if blocks else "block ?"
        base = self._qualified_name(self.base)
        if base and not self._under(key, base):
            return "head"
        if any(part == "pooler" for part in key.split(".")[:-1]):
            return "unused"
        return "embeddings"

    def missing_weights_for(self, view: str) -> list[str]:
        check_view_name(view)
        if view == "residual_streams":
            return [
                k
                for part, keys in self._missing_by_part.items()
                for k in keys
                if part == "embeddings" or part.startswith("block ")
            ]
        return [k for part, keys in self._missing_by_part.items() for k in keys if part != "unused"]

    def _require(self, keys: list[str], what: str) -> None:
        if keys:
            raise MissingWeightsError(missing_weights_message(self._name_for_errors, sorted(keys), what))

    def _missing_parts(self, *parts: str) -> list[str]:
        return [k for part in parts for k in self._missing_by_part.get(part, [])]

    def _missing_under(self, target: torch.nn.Module | None, *names: str) -> list[str]:
        prefix = self._qualified_name(target)
        if prefix is None:
            return []
        wanted = {f"{prefix}.{n}" if prefix else n for n in names}
        return [k for k in self.missing_weights if k in wanted]

    def _require_head(self, what: str) -> None:
        if self.output_embeddings is None:
            raise NoUnembeddingError(
                f"{self._name_for_errors} has no LM head (the checkpoint has none; it was loaded as its base model), "
                f"so there is no {what}"
            )

    # ------------------------------------------------------------------ structure
    def _find_blocks(self, module: torch.nn.Module) -> torch.nn.ModuleList:
        n_layers = getattr(self.config, "num_hidden_layers", None)
        for path in _BLOCK_LIST_PATHS:
            blocks = _get_attr_path(self.base, path)
            if isinstance(blocks, torch.nn.ModuleList) and (n_layers is None or len(blocks) == n_layers):
                return blocks
        candidates = [
            m
            for m in self.base.modules()
            if isinstance(m, torch.nn.ModuleList) and n_layers is not None and len(m) == n_layers
        ]
        if len(candidates) >= 1:
            return candidates[0]
        raise UnsupportedArchitectureError(
            f"{self._name_for_errors}: cannot find its list of {n_layers} blocks to hook"
        )

    def _find_final_norm(self, module: torch.nn.Module) -> torch.nn.Module | None:
        """BERT's MLM head transform; ``None`` for a masked family without head; else the base's final norm."""
        head_transform = _get_attr_path(module, "cls.predictions.transform")  # BERT's MLM head
        if isinstance(head_transform, torch.nn.Module):
            return head_transform
        if self.model_type in _MASKED_MODEL_TYPES:
            return None
        for attr in _FINAL_NORM_NAMES:
            norm = getattr(self.base, attr, None)
            if isinstance(norm, torch.nn.Module):
                return norm
        return None

    def _dimensions(self, module: PreTrainedModel) -> ModelDimensions:
        cfg = self.config
        d_model = int(cfg.hidden_size)
        n_heads = int(getattr(cfg, "num_attention_heads", 0) or 0)
        d_head = getattr(cfg, "head_dim", None)
        if not isinstance(d_head, int) or d_head <= 0:
            d_head = d_model // n_heads if n_heads else 0
        d_mlp = (
            getattr(cfg, "intermediate_size", None)
            or getattr(cfg, "n_inner", None)
            or getattr(cfg, "ffn_dim", None)
            or 4 * d_model
        )
        out = self.output_embeddings
        d_vocab = int(out.weight.shape[0]) if out is not None else int(cfg.vocab_size)
        return ModelDimensions(
            n_layers=len(self.blocks),
            d_model=d_model,
            d_vocab=d_vocab,
            n_heads=n_heads,
            d_head=int(d_head),
            d_mlp=int(d_mlp),
        )

    def _forward_kwargs(self, target: torch.nn.Module, attention_mask: torch.Tensor | None) -> dict:
        params = inspect.signature(target.forward).parameters
        kwargs: dict[str, Any] = {}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if "use_cache" in params:
            kwargs["use_cache"] = False
        return kwargs

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer <= self.n_layers:
            raise IndexError(f"{self._name_for_errors}: layer {layer} outside 0..{self.n_layers}")

    def _check_block(self, block: int) -> None:
        if not 0 <= block < self.n_layers:
            raise IndexError(f"{self._name_for_errors}: block {block} outside 0..{self.n_layers - 1}")

    # ------------------------------------------------------------------ ModelHandle API
    def residual_streams(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        self._require(self.missing_weights_for("residual_streams"), "residual streams")
        captured: list[torch.Tensor | None] = [None] * (self.n_layers + 1)

        def pre_hook(_mod, args, kwargs):
            captured[0] = args[0] if args else kwargs["hidden_states"]

        def make_hook(i: int):
            def hook(_mod, _args, output):
                captured[i + 1] = first_tensor(output)

            return hook

        handles = [self.blocks[0].register_forward_pre_hook(pre_hook, with_kwargs=True)]
        handles += [block.register_forward_hook(make_hook(i)) for i, block in enumerate(self.blocks)]
        try:
            self.base(input_ids=input_ids, **self._forward_kwargs(self.base, attention_mask))
        finally:
            for h in handles:
                h.remove()
        streams = [c for c in captured if c is not None]
        if len(streams) < len(captured):
            raise UnsupportedArchitectureError(f"{self._name_for_errors}: not every block ran")
        dtype = streams[0].dtype
        for c in streams[1:]:
            dtype = torch.promote_types(dtype, c.dtype)
        return torch.stack([c.to(dtype) for c in streams])

    def embedding_matrix(self) -> torch.Tensor:
        embeddings = self.module.get_input_embeddings()
        self._require(self._missing_under(embeddings, "weight"), "the input embedding")
        weight = embeddings.weight
        assert isinstance(weight, torch.Tensor)  # an embedding module's weight (its type says only Module)
        return weight.detach()

    def unembedding_matrix(self) -> torch.Tensor:
        """``U`` ``(d_model, d_vocab)``; raises :class:`NoUnembeddingError` for a model without LM head
        (see :meth:`ModelHandle.vocabulary_matrix` for the documented input-embedding fallback)."""
        self._require_head("unembedding matrix")
        self._require(self._missing_under(self.output_embeddings, "weight"), "the unembedding")
        return self.output_embeddings.weight.detach().T

    def final_norm(self, residual: torch.Tensor) -> torch.Tensor:
        """What the model applies between the last residual stream and ``U`` (pre-LN models: the
        final norm; BERT: its MLM head transform dense + GELU + LayerNorm), so that
        ``logits = final_norm(x) @ U + unembedding_bias()``; identity if there is none. Raises
        :class:`NoUnembeddingError` for a masked family without head (its transform is absent)."""
        if self.final_norm_module is None and self.output_embeddings is None and self.model_type in _MASKED_MODEL_TYPES:
            self._require_head("final transform (for BERT-like models it is part of the MLM head)")
        self._require(self._missing_parts("final_norm"), "the final norm")
        return residual if self.final_norm_module is None else self.final_norm_module(residual)

    def final_norm_absence(self) -> str | None:
        """Why there is no final norm to add as a layer (post-LN masked family, or none on the base); else None."""
        if self.model_type in _MASKED_MODEL_TYPES:
            return (
                f"{self.model_type} is post-LN: each block ends in a LayerNorm, transformers' hidden_states[-1] "
                "is the last block's output, and what precedes its LM head is the head's transform"
            )
        if self.final_norm_module is None:
            return f"{type(self.base).__name__} has none of the final norms {list(_FINAL_NORM_NAMES)}"
        return None

    def final_norm_output(self, residual: torch.Tensor) -> torch.Tensor:
        """The base model's final norm of the last residual stream: transformers' ``hidden_states[-1]``.

        Raises :class:`~thinkalike.models.handle.NoFinalNormError` (post-LN masked families, bases without a final norm)
        and :class:`MissingWeightsError` when the checkpoint lacks the norm's weights.
        """
        self.check_final_norm()
        assert self.final_norm_module is not None  # check_final_norm raised otherwise (final_norm_absence)
        self._require(self._missing_parts("final_norm"), "the final norm")
        return self.final_norm_module(residual)

    def unembedding_bias(self) -> torch.Tensor | None:
        """Bias added after ``U`` (BERT's decoder bias), or ``None``; raises without LM head."""
        self._require_head("unembedding bias")
        self._require(self._missing_under(self.output_embeddings, "bias"), "the unembedding bias")
        bias = getattr(self.output_embeddings, "bias", None)
        return None if bias is None else bias.detach()

    def logits_from_layer(
        self, residual: torch.Tensor, layer: int, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        self._check_layer(layer)
        self._require_head("logits")
        self._require(self.missing_weights_for("all"), "logits")
        if layer < self.n_layers:
            entry = self.blocks[layer]
        else:  # no block left: the residual enters the final norm (or, without one, the head)
            entry = self.final_norm_module if self.final_norm_module is not None else self.output_embeddings
        handle = substitute_input(entry, residual)
        try:
            with running_only_blocks_from(self.blocks, layer):
                out = self.module(input_ids=input_ids, **self._forward_kwargs(self.module, attention_mask))
        finally:
            handle.remove()
        return out.logits

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The plain forward pass's logits ``(batch, seq, d_vocab)``; raises without an LM head."""
        self._require_head("logits")
        self._require(self.missing_weights_for("all"), "logits")
        return self.module(input_ids=input_ids, **self._forward_kwargs(self.module, attention_mask)).logits

    def layer_parameters(self, block: int) -> dict[str, torch.Tensor]:
        self._check_block(block)
        self._require(self._missing_parts(f"block {block}"), f"the parameters of block {block}")
        blk = self.blocks[block]
        for attr, build in (
            ("attn.c_attn", self._gpt2_parameters),
            ("attention.query_key_value", self._neox_parameters),
            ("attention.self.query", self._bert_parameters),
            ("self_attn.q_proj", self._llama_parameters),
            ("mixer.in_proj", self._mamba_parameters),
        ):
            if _get_attr_path(blk, attr) is not None:
                with torch.no_grad():
                    groups = build(blk)
                if not isinstance(groups, ParameterGroups):
                    groups = ParameterGroups(self._name_for_errors, "not provided", groups)
                return groups
        raise UnsupportedArchitectureError(
            f"{self._name_for_errors}: parameter groups are not mapped for block type {type(blk).__name__}"
        )

    def _mamba_parameters(self, blk) -> ParameterGroups:
        mixer = blk.mixer
        d_inner = mixer.out_proj.weight.shape[1]
        return ParameterGroups(
            self._name_for_errors,
            "Mamba has no attention",
            {
                "FF_in": mixer.in_proj.weight.detach()[:d_inner].T.contiguous(),
                "FF_out": mixer.out_proj.weight.detach().T.contiguous(),
            },
        )

    def _gpt2_parameters(self, blk) -> dict[str, torch.Tensor]:
        H, dh, d = self.dims.n_heads, self.dims.d_head, self.d_model
        w = blk.attn.c_attn.weight.detach()  # Conv1D: (d, 3 d), y = x @ w
        wq, wk, wv = w.split(d, dim=1)
        return {
            "W_Q": _heads_in(wq, H, dh),
            "W_K": _heads_in(wk, H, dh),
            "W_V": _heads_in(wv, H, dh),
            "W_O": _heads_out(blk.attn.c_proj.weight.detach(), H, dh),
            "FF_in": blk.mlp.c_fc.weight.detach().clone(),
            "FF_out": blk.mlp.c_proj.weight.detach().clone(),
        }

    def _neox_parameters(self, blk) -> dict[str, torch.Tensor]:
        H, dh, d = self.dims.n_heads, self.dims.d_head, self.d_model
        # Linear (3 d, d); output viewed as (..., H, 3 * dh) then chunked into q, k, v per head.
        w = blk.attention.query_key_value.weight.detach().T.reshape(d, H, 3, dh)
        qkv = [w[:, :, i, :].permute(1, 0, 2).contiguous() for i in range(3)]
        return {
            "W_Q": qkv[0],
            "W_K": qkv[1],
            "W_V": qkv[2],
            "W_O": _heads_out(blk.attention.dense.weight.detach().T, H, dh),
            "FF_in": blk.mlp.dense_h_to_4h.weight.detach().T.contiguous(),
            "FF_out": blk.mlp.dense_4h_to_h.weight.detach().T.contiguous(),
        }

    def _bert_parameters(self, blk) -> dict[str, torch.Tensor]:
        H, dh = self.dims.n_heads, self.dims.d_head
        att = blk.attention.self
        return {
            "W_Q": _heads_in(att.query.weight.detach().T, H, dh),
            "W_K": _heads_in(att.key.weight.detach().T, H, dh),
            "W_V": _heads_in(att.value.weight.detach().T, H, dh),
            "W_O": _heads_out(blk.attention.output.dense.weight.detach().T, H, dh),
            "FF_in": blk.intermediate.dense.weight.detach().T.contiguous(),
            "FF_out": blk.output.dense.weight.detach().T.contiguous(),
        }

    def _llama_parameters(self, blk) -> dict[str, torch.Tensor]:
        att = blk.self_attn
        H = self.dims.n_heads
        dh = int(getattr(att, "head_dim", self.dims.d_head))
        n_kv = att.k_proj.weight.shape[0] // dh
        rep = H // n_kv

        def kv(weight: torch.Tensor) -> torch.Tensor:
            return _heads_in(weight.detach().T, n_kv, dh).repeat_interleave(rep, dim=0)

        mlp = blk.mlp
        up = getattr(mlp, "up_proj", None) or getattr(mlp, "fc1", None)
        down = getattr(mlp, "down_proj", None) or getattr(mlp, "fc2", None)
        if up is None or down is None:
            raise UnsupportedArchitectureError(f"{self._name_for_errors}: MLP {type(mlp).__name__} not mapped")
        return {
            "W_Q": _heads_in(att.q_proj.weight.detach().T, H, dh),
            "W_K": kv(att.k_proj.weight),
            "W_V": kv(att.v_proj.weight),
            "W_O": _heads_out(att.o_proj.weight.detach().T, H, dh),
            "FF_in": up.weight.detach().T.contiguous(),
            "FF_out": down.weight.detach().T.contiguous(),
        }
