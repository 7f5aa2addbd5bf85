"""Real checkpoints as researchers use them, through the activations pipeline: a BERT sentence encoder
(BertModel weights only, [CLS]/[SEP], no bos/eos) and natural text used alone with hub models only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from tests.models.conftest import save_sentence_encoder
from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.language.grammar import generate_sentences
from thinkalike.language.natural_text import natural_text_table
from thinkalike.language.packing import pack_evaluation_sequences
from thinkalike.models.activation_store import write_activation_store
from thinkalike.models.handle import MissingWeightsError
from thinkalike.pipelines.activations.nodes import extract_external_activations
from thinkalike.pipelines.activations.schema import validate_activations
from thinkalike.pipelines.corpus.nodes import build_evaluation_texts
from thinkalike.pipelines.corpus.schema import validate_corpus

ZWSP = "\u200b"
LONG = "the quick brown fox jumps over the lazy dog and the cat sat on the mat in the house by the river ."
LINES = [
    "the cat sat on the mat .",
    LONG,  # longer than a row of 16 tokens for every tokenizer here: split at words
    f"the dog {ZWSP} ran to the tree .",  # the encoder's BERT normaliser deletes the zero-width space
    "one two three four five six seven eight nine ten .",
    "this line is beyond n_evaluation_sentences .",
    "and so is this one .",
]
ACTIVATIONS = validate_activations({"batch_size": 2, "dtype": "float32", "device": "cpu"})


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return save_sentence_encoder(tmp_path_factory.mktemp("encoder"))


@pytest.fixture(scope="module")
def gpt2_dir(grammar_gpt2_dir):
    return grammar_gpt2_dir


def test_extraction_node_on_a_sentence_encoder(tmp_path, encoder_dir):
    from transformers import AutoTokenizer, BertModel

    texts = natural_text_table(LINES[:4], first_id=0)
    stream, index = extract_external_activations(
        texts, settings=ACTIVATIONS, model_name="enc", spec=f"hf:{encoder_dir}", n_ctx=16
    )
    store = write_activation_store(tmp_path / "enc", stream.batches, stream.model)
    assert store.n_layers == 2 and store.d_model == 32
    assert set(index.loc[index["is_special"], "token"]) == {"[CLS]", "[SEP]"}
    assert index.groupby("sentence_id")["sequence"].nunique().loc[1] > 1  # the long line was split
    # the stored residuals are the checkpoint's own hidden states (no random head, no random weights)
    tokenizer = AutoTokenizer.from_pretrained(encoder_dir)
    sequences, again = pack_evaluation_sequences(texts, tokenizer, 16)
    pd.testing.assert_frame_equal(index, again)
    model = BertModel.from_pretrained(encoder_dir).eval()
    with torch.no_grad():
        hidden = model(
            input_ids=torch.as_tensor(sequences["input_ids"][:2]),
            attention_mask=torch.as_tensor(sequences["attention_mask"][:2]),
            output_hidden_states=True,
        ).hidden_states
    first = store.batch(0)
    mask = first.attention_mask.astype(bool)
    for layer, expected in enumerate(hidden):
        np.testing.assert_allclose(first.residual[layer][mask], expected.numpy()[mask], rtol=1e-4, atol=1e-5)


def test_extraction_node_names_missing_block_weights(tmp_path):
    directory = save_sentence_encoder(tmp_path / "enc", drop=("encoder.layer.0.output.dense.weight",))
    texts = natural_text_table(LINES[:2], first_id=0)
    with pytest.raises(MissingWeightsError, match=r"encoder\.layer\.0\.output\.dense\.weight"):
        extract_external_activations(texts, settings=ACTIVATIONS, model_name="enc", spec=f"hf:{directory}", n_ctx=16)


def test_n_evaluation_sentences_limits_natural_text(tmp_path):
    path = tmp_path / "natural.txt"
    path.write_text("\n".join(LINES), encoding="utf-8")
    heldout = generate_sentences(10, seed=3)
    corpus = {"n_evaluation_sentences": 3, "natural_text": {"path": str(path), "use": "replace"}}
    replaced = build_evaluation_texts(heldout, settings=validate_corpus(corpus))
    assert replaced["text"].tolist() == [" ".join(line.split()) for line in LINES[:3]]
    assert set(replaced["source"]) == {"natural"}
    joined = build_evaluation_texts(
        heldout, settings=validate_corpus({**corpus, "natural_text": {"path": str(path), "use": "join"}})
    )
    assert joined["source"].tolist() == ["grammar"] * 3 + ["natural"] * 3
    assert joined["sentence_id"].is_unique


def _only_hub_models(project, encoder_dir, gpt2_dir, natural_path):
    """conf/test of the project copy: no zoo models; CKA of the two hub models with word pooling, embedding-space
    readings of gpt2 (the sentence encoder has no LM head), nothing to align or fine-tune. The files merge into
    conf/base's key by key; the models, pairs and groups they set replace conf/base's whole."""
    conf = project / "conf" / "test"
    (conf / "parameters_zoo.yml").write_text(yaml.safe_dump({"zoo": {"models": {}}}))
    cka = yaml.safe_load((conf / "parameters_cka.yml").read_text())
    cka["cka"].update(pooling="word", pairs={"intra": False, "explicit": [["enc", "gpt2"]]}, groups={})
    (conf / "parameters_cka.yml").write_text(yaml.safe_dump(cka))
    embedding = yaml.safe_load((conf / "parameters_embedding.yml").read_text())  # gpt2 only: enc has no LM head
    embedding["embedding"].update(
        models=["gpt2"],
        alignment={**embedding["embedding"]["alignment"], "pairs": {}},
        finetune={**embedding["embedding"]["finetune"], "models": []},
        zero_shot={"pairs": []},
    )
    (conf / "parameters_embedding.yml").write_text(yaml.safe_dump(embedding))
    return {
        "corpus": {
            "n_evaluation_sentences": 4,
            "natural_text": {"path": str(natural_path), "mode": "lines", "use": "replace"},
        },
        "activations": {
            "include_zoo": False,
            "n_ctx": 16,
            "models": {"enc": f"hf:{encoder_dir}", "gpt2": f"hf:{gpt2_dir}"},
        },
    }


def test_natural_text_alone_with_hub_models_only(tmp_path, monkeypatch, encoder_dir, gpt2_dir):
    natural_path = tmp_path / "natural.txt"
    natural_path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    (tmp_path / "project").mkdir()
    project = make_project_copy(tmp_path / "project")
    monkeypatch.chdir(project)
    catalog = run_project(project, runtime_params=_only_hub_models(project, encoder_dir, gpt2_dir, natural_path))

    texts = catalog.load("evaluation_texts")
    assert texts["text"].tolist() == [" ".join(line.split()) for line in LINES[:4]]  # n_evaluation_sentences
    # nothing was packed with the grammar tokenizer for a zoo that is not used
    assert not (project / "data/05_model_input/evaluation_sequences.safetensors").exists()
    assert "n_evaluation_tokens" not in catalog.load("corpus_statistics")

    enc, gpt2 = catalog.load("models.enc.activation_index"), catalog.load("models.gpt2.activation_index")
    assert set(enc.loc[enc["is_special"], "token"]) == {"[CLS]", "[SEP]"}
    assert set(gpt2.loc[gpt2["is_special"], "token"]) == {"<bos>", "<eos>"}
    long_id = int(texts["sentence_id"].iloc[1])
    for index in (enc, gpt2):
        assert index["position"].max() < 16
        assert index.loc[index["sentence_id"] == long_id, "sequence"].nunique() > 1  # split, not failed
    zwsp_id, zwsp_word = int(texts["sentence_id"].iloc[2]), 2
    assert not ((enc["sentence_id"] == zwsp_id) & (enc["word_index"] == zwsp_word)).any()
    assert ((gpt2["sentence_id"] == zwsp_id) & (gpt2["word_index"] == zwsp_word)).any()

    def words(index):
        real = index[(~index["is_special"]) & (index["word_index"] >= 0)]
        return set(zip(real["sentence_id"], real["word_index"]))

    shared = words(enc) & words(gpt2)
    assert len(words(gpt2) - shared) == 1 and not words(enc) - shared  # only the zero-width space is left out
    table = catalog.load("models.cka.enc__gpt2.cka_table")
    assert (table["pooling"] == "word").all() and np.isfinite(table["cka"]).all()
    assert (table["n_tokens"] == len(shared)).all()


def test_extraction_node_on_a_llama_gguf_uses_its_bos_only_convention(tmp_path):
    from tests.models.conftest import build_module, write_llama_gguf

    path = tmp_path / "tiny-llama.gguf"
    write_llama_gguf(path, build_module("llama", seed=5))
    texts = natural_text_table(["ab cd ef", "the cat sat on the mat and the dog ran"], first_id=0)
    stream, index = extract_external_activations(
        texts, settings=ACTIVATIONS, model_name="llama", spec=f"gguf:{path}", n_ctx=16
    )
    store = write_activation_store(tmp_path / "llama", stream.batches, stream.model)
    assert store.n_layers == 2
    specials = index[index["is_special"]]
    assert specials["token"].tolist() == ["<s>"] * len(specials)  # what tokenizer(text) adds: <s>, no </s>
    assert index.groupby("sentence_id")["sequence"].nunique().loc[1] > 1  # longer than 16 tokens: split
    first_of_each_piece = index.groupby(["sentence_id", "sequence"])["is_special"].first()
    assert first_of_each_piece.all()
