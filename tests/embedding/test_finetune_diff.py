"""Fine-tune differences and zero-shot stitching accuracy (thinkalike.embedding.finetune_diff)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tests.embedding.conftest import D_MODEL, VOCAB, zoo_bridge_config
from thinkalike.embedding import extract_parameters, vocabulary_embedding
from thinkalike.embedding.finetune_diff import (
    TASK_WORDS,
    classification_scores,
    diff_readings,
    encode_sentences,
    feature_token_ids,
    finetune_top_layers,
    signed_fraction,
    task_labels,
    zero_shot_accuracy,
)
from thinkalike.embedding.weights import ModelParameters
from thinkalike.models.finetune import FinetuneConfig, predict_labels
from thinkalike.models.sources import load_classifier
from thinkalike.threads import torch_threads


class WordPieces:
    """A planted tokenizer: each word maps to fixed token ids."""

    def __init__(self, pieces: dict[str, list[int]]):
        self.pieces = pieces

    def __call__(self, words, add_special_tokens=False):
        return {"input_ids": [self.pieces[w] for w in words]}


def test_feature_tokens_are_those_only_feature_words_use():
    tokenizer = WordPieces({"walked": [7, 9], "talked": [8, 9], "walk": [7], "the": [3], "ran": [5]})
    features = feature_token_ids(tokenizer, {"walked", "talked", "ran"}, ["walked", "talked", "walk", "the", "ran"])
    assert features == {8, 9, 5}  # 7 is also in "walk"; 3 only in "the"


def test_grammar_tense_words_on_the_corpus_tokenizer():
    from thinkalike.language.grammar import generate_sentences, lexicon_words
    from thinkalike.language.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(generate_sentences(2000, seed=1)["text"].tolist(), vocab_size=400)
    features = feature_token_ids(tokenizer, frozenset().union(*TASK_WORDS["tense"].values()), lexicon_words())
    vocab = tokenizer.get_vocab()
    marked = frozenset().union(*TASK_WORDS["tense"].values())
    whole = [word for word in marked if word in vocab]
    assert len(whole) >= 10 and all(vocab[word] in features for word in whole)  # whole-word tokens of tense forms
    unmarked = [word for word in ("the", "dog", "see", "run", "that", ".", "happy") if word in vocab]
    assert len(unmarked) >= 4 and not any(vocab[word] in features for word in unmarked)
    assert task_labels("tense") == ["present", "past"]
    with pytest.raises(ValueError, match="unknown task 'mood'"):
        task_labels("mood")


def test_signed_fraction_takes_the_better_sign_per_row():
    frame = pd.DataFrame(
        {
            "row": [0, 0, 0, 0, 1, 1, 1, 1],
            "sign": ["+", "+", "-", "-"] * 2,
            "is_feature": [True, True, False, False, False, True, False, False],
        }
    )
    assert signed_fraction(frame) == pytest.approx((1.0 + 0.5) / 2)


def _planted_parameters(name: str, rows: torch.Tensor) -> ModelParameters:
    return ModelParameters(
        name, (0,), ({"FF_out": rows},), {g: "absent" for g in ("W_Q", "W_K", "W_V", "W_O", "FF_in")}
    )


def test_diff_rows_pointing_at_feature_tokens_score_one_random_rows_near_chance():
    """Planted truth: E = [I_d | small noise]; ΔW rows are e_0 + … + e_3, so the top-4 tokens of every diff row
    are the feature tokens 0 … 3, while the fine-tuned matrix's random rows are not; of the two head rows, one
    points at the features and one at tokens 4 … 7."""
    d, vocabulary, k = 16, 64, 4
    generator = torch.Generator().manual_seed(0)
    embedding = torch.cat([torch.eye(d), 0.01 * torch.randn(d, vocabulary - d, generator=generator)], dim=1)
    base = torch.randn(200, d, generator=generator)
    delta = torch.zeros_like(base)
    delta[:4] = 50 * torch.eye(d)[:4].sum(dim=0)  # rows 0-3 move toward tokens 0-3
    head = torch.stack([torch.eye(d)[:4].sum(dim=0), torch.eye(d)[4:8].sum(dim=0)]) * 5
    features = {0, 1, 2, 3}
    readings, fractions = diff_readings(
        _planted_parameters("a", base),
        _planted_parameters("a", base + delta),
        head,
        embedding,
        features,
        model="a",
        task="tense",
        k=k,
        n_rows=4,
        n_random=100,
        groups=["FF_value"],
    )
    by_source = fractions.set_index(["source", "group"])["feature_fraction"]
    assert by_source[("finetune_diff", "FF_value")] == 1.0
    assert by_source[("classifier", "head")] == 0.5
    assert by_source[("random_rows", "FF_value")] < 0.5  # ≈ 4/16 of the identity block, best of two signs
    assert (fractions["chance_fraction"] == 4 / vocabulary).all()
    assert set(readings["source"]) == {"finetune_diff", "random_rows", "classifier"}


@pytest.fixture(scope="module")
def tuned(zoo_model):
    """``(tuned handle, weights, data)``: the zoo toy's top layer + head fine-tuned to tell whether token 5 occurs."""
    generator = np.random.default_rng(0)
    ids = generator.integers(6, VOCAB, size=(96, 10))
    labels = generator.integers(0, 2, size=96)
    ids[labels == 1, generator.integers(0, 10, size=int(labels.sum()))] = 5
    data = {"input_ids": ids, "attention_mask": np.ones_like(ids), "labels": labels}
    weights = {k: v.clone() for k, v in zoo_model.module.state_dict().items()}
    settings = FinetuneConfig(steps=30, batch_size=16, learning_rate=5e-3, warmup_steps=3, weight_decay=0.0)
    with torch_threads(1):
        tuned_weights, config, curve = finetune_top_layers(
            weights, zoo_bridge_config(), data, "toy_cls", ["absent", "present"], settings, 1, "cpu", progress=False
        )
    return load_classifier(tuned_weights, config, device="cpu"), tuned_weights, weights, data, curve


def test_only_the_top_layers_and_head_change(tuned):
    _, after, before, _, curve = tuned
    assert curve["train_loss"].iloc[-1] < curve["train_loss"].iloc[0]
    changed = {key for key in before if not torch.equal(before[key], after[key])}
    assert any(key.startswith("blocks.3.") for key in changed)
    assert all(key.startswith(("blocks.3.", "ln_final.", "unembed.")) for key in changed), sorted(changed)
    assert sum(key.startswith(("blocks.0.", "blocks.1.", "blocks.2.", "embed.", "pos_embed.")) for key in before) > 10


def test_self_stitching_through_full_rank_e_gives_own_accuracy(tuned, zoo_model, zoo_permuted):
    """B = A's base model. E_A (d × V) has full row rank, so E_A E_A⁺ = I and x_A = x_B: keeping ℓ ≤ 3 layers of
    B (the frozen blocks 0 … 2 are A's own) gives fine-tuned A's own accuracy exactly; so does a copy of the base
    whose residual basis is permuted (x_B E_B = x_A E_A, mapped back exactly)."""
    handle, _, _, data, _ = tuned
    embedding = vocabulary_embedding(zoo_model)
    assert torch.linalg.matrix_rank(embedding.double()) == D_MODEL
    own = float(np.mean(predict_labels(handle, data["input_ids"], data["attention_mask"]) == data["labels"]))
    same = zero_shot_accuracy(
        handle, zoo_model, embedding, embedding, data["input_ids"], data["attention_mask"], data["labels"]
    )
    assert list(same) == [0, 1, 2, 3, 4] and all(same[layer] == pytest.approx(own) for layer in range(4))
    permuted, _ = zoo_permuted
    moved = zero_shot_accuracy(
        handle,
        permuted,
        embedding,
        vocabulary_embedding(permuted),
        data["input_ids"],
        data["attention_mask"],
        data["labels"],
    )
    assert all(moved[layer] == pytest.approx(own) for layer in range(4)) and moved[4] == pytest.approx(same[4])
    with pytest.raises(ValueError, match=r"layers \[9\] outside 0 … 4"):
        zero_shot_accuracy(
            handle,
            zoo_model,
            embedding,
            embedding,
            data["input_ids"],
            data["attention_mask"],
            data["labels"],
            layers=[9],
        )


def test_diff_readings_of_a_real_fine_tune(tuned, zoo_model):
    handle, *_ = tuned
    features = {5}
    readings, fractions = diff_readings(
        extract_parameters(zoo_model, [3]),
        extract_parameters(handle, [3]),
        handle.unembedding_matrix().T,
        vocabulary_embedding(zoo_model),
        features,
        model="toy",
        task="planted",
        k=5,
        n_rows=2,
        n_random=4,
    )
    assert set(fractions["group"]) == {"FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O", "head"}
    assert fractions["feature_fraction"].between(0, 1).all()
    assert (readings.groupby(["source", "group", "layer", "row", "sign"]).size() == 5).all()


def test_encode_sentences_labels_follow_the_table():
    from thinkalike.language.grammar import generate_sentences
    from thinkalike.language.tokenizer import train_tokenizer

    sentences = generate_sentences(120, seed=3)
    tokenizer = train_tokenizer(sentences["text"].tolist(), vocab_size=200)
    encoded = encode_sentences(sentences, tokenizer, 40, "tense", limit=50, seed=0)
    assert encoded["input_ids"].shape[0] == 50 == len(encoded["labels"])
    past = tokenizer.convert_tokens_to_ids("did")
    for row, label in zip(encoded["input_ids"], encoded["labels"]):
        if past in row:
            assert label == 1
    with pytest.raises(ValueError, match="n_ctx"):
        encode_sentences(sentences, tokenizer, 6, "tense")


def test_classification_scores_read_signal_a_miscalibrated_stitch_has():
    """Logits that order the classes perfectly but all favour class 0 score the majority rate in accuracy and 1 in
    AUROC; balanced accuracy is 0.5 there; reversed logits give AUROC 0 (scikit-learn's definitions)."""
    truth = np.array([0] * 30 + [1] * 10)
    margin = np.where(truth == 1, 1.0, 0.0)  # class 1 always scores higher, never above class 0's 5
    logits = torch.tensor(np.stack([np.full(40, 5.0), margin], axis=1))
    scores = classification_scores(logits, truth)
    assert scores == {"accuracy": 0.75, "balanced_accuracy": 0.5, "auroc": 1.0}
    assert classification_scores(torch.tensor(np.stack([np.zeros(40), -margin], axis=1)), truth)["auroc"] == 0.0
    exact = classification_scores(torch.tensor(np.stack([-margin, margin], axis=1)), truth)
    assert exact == {"accuracy": 1.0, "balanced_accuracy": 1.0, "auroc": 1.0}
    assert np.isnan(classification_scores(logits[:30], truth[:30])["auroc"])
