"""Fine-tune differences (Dar et al. §4.3) and zero-shot stitching accuracy (§5.2) on a grammar task.

Task. A sentence feature of the grammar (:data:`TASK_WORDS`: ``tense``, ``subject_number``,
``sentence_type``) is the label; a zoo model's **top** ``n_top`` blocks, its final norm and a new class head are
fine-tuned (everything below stays frozen), with the classifier of :mod:`thinkalike.models.finetune`
(``build_classifier``: the head ``W`` ``(C, d)`` replaces the LM head; class logits are the mean over real
positions of ``W · LN_f(h_t)``, ``pool_logits``).

Feature tokens. ``TASK_WORDS[task][label]`` are the lexicon words that mark ``label`` on their own (tense: the
past forms and "did" vs the 3rd-person present forms and "does"/"do"; the plural present form is left out,
being also the base form of past questions). A token *carries the feature* when every lexicon word whose
tokenisation contains it is a feature word (of any label) — whole-word tokens of feature words, and subword
pieces found only inside them (:func:`feature_token_ids`). The measure of a set of d-vectors is

    f = mean over vectors v of max_{s=±1} |top_k(s·v·E) ∩ F| / k     (k = 20, F the feature tokens, E the base
                                                                        model's; a row's sign is arbitrary)

for the rows of ``ΔW = W_fine-tuned − W_base`` of every vector group of the fine-tuned blocks (the ``n_rows``
rows of largest ‖Δ‖ per group and layer), for the class head's rows, and for random rows of the same
fine-tuned matrices (the baseline; for the head: random rows of the fine-tuned blocks' groups).

Zero-shot stitching. With ``ℓ`` layers of model B kept, ``x_A = x_B E_B E_A⁺``
(:func:`~thinkalike.embedding.zero_shot.zero_shot_stitch`, ``E`` the base models' unembeddings) is written
into fine-tuned A's residual stream after its layer ``ℓ`` and A's blocks ``ℓ … L−1``, final norm and head run
(``logits_from_layer``); accuracy against ``ℓ = 0 … min(L_A, L_B)``. For B = A's base model with
``rank E_A = d``, ``E_A E_A⁺ = I``: every ℓ ≤ L − n_top (B's blocks below ℓ are A's frozen ones) gives
fine-tuned A's own accuracy; above, B's un-tuned top blocks replace A's tuned ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from thinkalike.embedding.reading import top_tokens
from thinkalike.embedding.space import check_k, token_labels
from thinkalike.embedding.weights import VECTOR_GROUPS, ModelParameters
from thinkalike.embedding.zero_shot import zero_shot_map
from thinkalike.language import grammar
from thinkalike.models.finetune import (
    FinetuneConfig,
    finetune_classifier,
)
from thinkalike.models.handle import ModelHandle

_VERBS = grammar.TRANSITIVE_VERBS + grammar.INTRANSITIVE_VERBS
_SINGULAR_DETERMINERS = (*grammar.DETERMINERS[grammar.SINGULAR], "an")

#: Per task (a sentence feature of the grammar), per label: the words of :func:`grammar.generate_sentences` that
#: mark that label by themselves (the NLI-only passive forms are left out: the corpus tokenizer never saw them).
TASK_WORDS: dict[str, dict[str, frozenset[str]]] = {
    "tense": {
        grammar.PAST: frozenset({v.past for v in _VERBS} | {"did"}),
        grammar.PRESENT: frozenset({v.singular for v in _VERBS} | {"does", "do"}),
    },
    "subject_number": {
        grammar.SINGULAR: frozenset(
            {n.singular for n in grammar.NOUNS} | {v.singular for v in _VERBS} | {"does", *_SINGULAR_DETERMINERS}
        ),
        grammar.PLURAL: frozenset({n.plural for n in grammar.NOUNS} | {"do", *grammar.DETERMINERS[grammar.PLURAL]}),
    },
    "sentence_type": {
        "question": frozenset({"?", "does", "do", "did"}),
        "declarative": frozenset({"."}),
    },
}
TASKS: tuple[str, ...] = tuple(TASK_WORDS)
FRACTION_COLUMNS = [
    "model",
    "task",
    "source",
    "group",
    "layer",
    "n_vectors",
    "k",
    "feature_fraction",
    "chance_fraction",
]
TOP_TOKEN_COLUMNS = [
    "model",
    "task",
    "source",
    "group",
    "layer",
    "row",
    "sign",
    "rank",
    "token_id",
    "token",
    "score",
    "is_feature",
]
ZERO_SHOT_COLUMNS = [
    "model_a",
    "model_b",
    "task",
    "layers_from_b",
    "accuracy",
    "balanced_accuracy",
    "auroc",
    "own_accuracy",
    "chance",
    "n_sentences",
]
ZERO_SHOT_SCORES: tuple[str, ...] = ("accuracy", "balanced_accuracy", "auroc")


def task_labels(task: str) -> list[str]:
    """The class labels of ``task`` in the grammar's order (:data:`grammar.FEATURE_VALUES`)."""
    if task not in TASK_WORDS:
        raise ValueError(f"task: unknown task {task!r}; known: {list(TASKS)}")
    return [value for value in grammar.FEATURE_VALUES[task] if value in TASK_WORDS[task]]


def encode_sentences(
    sentences: pd.DataFrame, tokenizer: Any, n_ctx: int, task: str, *, limit: int | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """``input_ids``, ``attention_mask`` (one wrapped sentence per row, right-padded: the ``sentence`` layout of
    :func:`~thinkalike.language.packing.pack_evaluation_sequences`) and ``labels`` (the index of the sentence's
    ``task`` value in :func:`task_labels`) of at most ``limit`` sentences drawn with ``seed`` (all when None).
    Raises ``ValueError`` when a sentence does not fit in ``n_ctx`` tokens."""
    from thinkalike.language.packing import pack_evaluation_sequences

    labels = task_labels(task)
    table = sentences[sentences[task].isin(labels)]
    if limit is not None and limit < len(table):
        table = table.iloc[np.sort(np.random.default_rng(seed).choice(len(table), limit, replace=False))]
    arrays, index = pack_evaluation_sequences(table[["sentence_id", "text"]], tokenizer, n_ctx, "sentence")
    owner = index.groupby("sequence")["sentence_id"].first()
    if owner.duplicated().any():
        raise ValueError(f"n_ctx={n_ctx} splits some sentences over several rows; raise n_ctx")
    label_of = dict(zip(table["sentence_id"], table[task].map(labels.index)))
    return {**arrays, "labels": owner.map(label_of).to_numpy(np.int64)}


def feature_token_ids(
    tokenizer: Any, feature_words: Sequence[str] | frozenset[str], lexicon: Sequence[str] | frozenset[str]
) -> set[int]:
    """Ids of the tokens that occur only inside ``feature_words`` among the ``lexicon`` words' tokenisations
    (each word tokenised alone, without special tokens); tokens no lexicon word uses are not feature tokens."""
    features = set(feature_words)
    words = sorted(set(lexicon) | features)
    encoded = tokenizer(words, add_special_tokens=False)["input_ids"]
    users: dict[int, set[str]] = {}
    for word, ids in zip(words, encoded):
        for token in ids:
            users.setdefault(int(token), set()).add(word)
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    return {token for token, owners in users.items() if owners <= features and token not in special}


def finetune_top_layers(
    encoder_weights: Mapping[str, torch.Tensor],
    encoder_config: Mapping[str, Any],
    train: Mapping[str, np.ndarray],
    name: str,
    labels: Sequence[str],
    settings: FinetuneConfig,
    top_layers: int,
    device: torch.device | str | None = None,
    *,
    progress: bool = True,
    log_every: int = 10,
) -> tuple[dict[str, torch.Tensor], dict[str, Any], pd.DataFrame]:
    """:func:`thinkalike.models.finetune.finetune_classifier` (same classifier, loss, AdamW, schedule, clipping,
    seeds) with only the top ``top_layers`` blocks, the final norm and the head trained (:func:`freeze_below`).
    Returns the classifier's weights, config (``"classifier"`` entry with ``top_layers``) and training curve
    (``step``, ``train_loss``, ``seconds``)."""
    return finetune_classifier(
        encoder_weights,
        encoder_config,
        train,
        name,
        labels,
        settings,
        device,
        progress=progress,
        log_every=log_every,
        top_layers=top_layers,
    )


def finetuned_layers(n_layers: int, top_layers: int) -> list[int]:
    """The blocks a top-``top_layers`` fine-tuning trains."""
    return list(range(n_layers - top_layers, n_layers))


def _top_token_frame(
    vectors: torch.Tensor,
    embedding: torch.Tensor,
    k: int,
    features: set[int],
    tokenizer: Any,
    base: dict[str, Any],
    rows: Sequence[int],
) -> pd.DataFrame:
    frames = []
    for sign, largest in (("+", True), ("-", False)):
        scores, ids = top_tokens(vectors, embedding, k, largest=largest)
        flat = ids.reshape(-1).tolist()
        frames.append(
            pd.DataFrame(
                {
                    **base,
                    "row": np.repeat(list(rows), k),
                    "sign": sign,
                    "rank": np.tile(np.arange(k), len(rows)),
                    "token_id": flat,
                    "token": token_labels(tokenizer, flat),
                    "score": scores.reshape(-1).double().numpy(),
                    "is_feature": [t in features for t in flat],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def signed_fraction(frame: pd.DataFrame) -> float:
    """Mean over rows of the larger of a row's two fractions of feature tokens, among the top-k of ``v·E`` and
    of ``−v·E`` (a row's sign is arbitrary for W_Q, W_K, W_V, W_O and the keys; the same rule for every source)."""
    per_sign = frame.groupby(["row", "sign"])["is_feature"].mean().unstack("sign")
    return float(per_sign.max(axis=1).mean()) if len(per_sign) else float("nan")


def diff_readings(
    base: ModelParameters,
    tuned: ModelParameters,
    head_rows: torch.Tensor,
    embedding: torch.Tensor,
    features: set[int],
    *,
    model: str,
    task: str,
    k: int = 20,
    n_rows: int = 10,
    n_random: int = 50,
    seed: int = 0,
    tokenizer: Any = None,
    groups: Sequence[str] = VECTOR_GROUPS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(top_tokens, fractions)`` of the module docstring: for every group the two models have and every
    extracted (fine-tuned) layer, the ``n_rows`` rows of ΔW with the largest norm (source ``finetune_diff``) and
    ``n_random`` random rows of the fine-tuned matrix (source ``random_rows``); the head's rows (source
    ``classifier``, group ``head``) and ``n_random`` random rows of all the fine-tuned groups (source
    ``random_rows``, group ``head``). Top-k tokens of ``v·E`` and ``−v·E``; the fraction is
    :func:`signed_fraction`; ``chance_fraction`` is |F| / V."""
    if base.layers != tuned.layers:
        raise ValueError(f"base and fine-tuned parameters cover different layers ({base.layers} vs {tuned.layers})")
    embedding = embedding.detach().float()
    check_k(k, embedding.shape[1])
    generator = torch.Generator().manual_seed(seed)
    chance = len(features) / embedding.shape[1]
    readings, records, pooled = [], [], []

    def measure(vectors: torch.Tensor, source: str, group: str, layer: int, rows: Sequence[int]) -> None:
        frame = _top_token_frame(
            vectors.float(),
            embedding,
            k,
            features,
            tokenizer,
            {"model": model, "task": task, "source": source, "group": group, "layer": layer},
            rows,
        )
        readings.append(frame)
        records.append(
            {
                "model": model,
                "task": task,
                "source": source,
                "group": group,
                "layer": layer,
                "n_vectors": len(rows),
                "k": k,
                "feature_fraction": signed_fraction(frame),
                "chance_fraction": chance,
            }
        )

    for position, layer in enumerate(tuned.layers):
        for group in groups:
            if not (base.has(group) and tuned.has(group)):
                continue
            after = tuned.vectors(group, position).float()
            delta = after - base.vectors(group, position).float()
            chosen = delta.norm(dim=1).topk(min(n_rows, delta.shape[0])).indices.tolist()
            measure(delta[chosen], "finetune_diff", group, layer, chosen)
            drawn = torch.randperm(after.shape[0], generator=generator)[:n_random].tolist()
            measure(after[drawn], "random_rows", group, layer, drawn)
            pooled.append(after)
    measure(head_rows.float(), "classifier", "head", -1, list(range(head_rows.shape[0])))
    if pooled:
        pool = torch.cat(pooled)
        drawn = torch.randperm(pool.shape[0], generator=generator)[:n_random].tolist()
        measure(pool[drawn], "random_rows", "head", -1, drawn)
    return pd.concat(readings, ignore_index=True)[TOP_TOKEN_COLUMNS], pd.DataFrame.from_records(
        records, columns=FRACTION_COLUMNS
    )


@torch.no_grad()
def zero_shot_scores(
    tuned_a: ModelHandle,
    handle_b: ModelHandle,
    embedding_a: torch.Tensor,
    embedding_b: torch.Tensor,
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    labels: np.ndarray,
    *,
    layers: Sequence[int] | None = None,
    batch_size: int = 64,
) -> dict[int, dict[str, float]]:
    """``{ℓ: {accuracy, balanced_accuracy, auroc}}`` of fine-tuned A's class logits when its residual stream after
    layer ℓ is B's after layer ℓ mapped by ``E_B E_A⁺`` (module docstring); ``layers`` default ``0 … min(L_A, L_B)``.

    Balanced accuracy is the mean over classes of the recall (chance: 1 / classes); AUROC ranks the softmax
    probability of class 1 (two classes) or averages one-against-rest AUROCs (more), chance 0.5 — both read the
    signal a miscalibrated stitch has even when its argmax lands below the majority rate. NaN where a class is
    absent from ``labels`` (scikit-learn's ``balanced_accuracy_score`` and ``roc_auc_score``)."""
    top = min(tuned_a.n_layers, handle_b.n_layers)
    layers = list(range(top + 1)) if layers is None else [int(layer) for layer in layers]
    bad = [layer for layer in layers if not 0 <= layer <= top]
    if bad:
        raise ValueError(f"layers {bad} outside 0 … {top} (the shallower model's depth)")
    mapping = zero_shot_map(embedding_b.float(), embedding_a.float()).to(handle_b.device)
    # copies (torch.tensor): the arrays may be read-only (loaded datasets), which torch cannot share
    ids = torch.tensor(np.asarray(input_ids), dtype=torch.long)
    mask = torch.tensor(np.asarray(attention_mask), dtype=torch.long)
    truth = np.asarray(labels).astype(np.int64)
    logits_by_layer: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    for start in range(0, len(ids), batch_size):
        batch_ids, batch_mask = ids[start : start + batch_size], mask[start : start + batch_size]
        streams = handle_b.residual_streams(batch_ids.to(handle_b.device), batch_mask.to(handle_b.device))
        for layer in layers:
            mapped = (streams[layer].float() @ mapping).to(device=tuned_a.device, dtype=tuned_a.dtype)
            logits = tuned_a.logits_from_layer(
                mapped, layer, batch_ids.to(tuned_a.device), batch_mask.to(tuned_a.device)
            )
            logits_by_layer[layer].append(logits.float().cpu())
    return {layer: classification_scores(torch.cat(parts), truth) for layer, parts in logits_by_layer.items()}


def classification_scores(logits: torch.Tensor, truth: np.ndarray) -> dict[str, float]:
    """Accuracy, balanced accuracy and AUROC (see :func:`zero_shot_scores`) of ``logits`` (rows × classes)."""
    predicted = logits.argmax(dim=-1).numpy()
    probabilities = torch.softmax(logits.double(), dim=-1).numpy()
    present = np.unique(truth)
    scores = {"accuracy": float(np.mean(predicted == truth))}
    if len(present) < 2:
        return {**scores, "balanced_accuracy": float("nan"), "auroc": float("nan")}
    scores["balanced_accuracy"] = float(balanced_accuracy_score(truth, predicted))
    if probabilities.shape[1] == 2:
        scores["auroc"] = float(roc_auc_score(truth, probabilities[:, 1]))
    elif len(present) == probabilities.shape[1]:
        scores["auroc"] = float(roc_auc_score(truth, probabilities, multi_class="ovr"))
    else:
        scores["auroc"] = float("nan")
    return scores


def zero_shot_accuracy(*args: Any, **kwargs: Any) -> dict[int, float]:
    """``{ℓ: accuracy}`` of :func:`zero_shot_scores` (same arguments)."""
    return {layer: scores["accuracy"] for layer, scores in zero_shot_scores(*args, **kwargs).items()}
