"""corpus -> zoo -> activations end to end on conf/test, through a real Kedro session."""

import sqlite3

import numpy as np
import pandas as pd
import pytest
import torch

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.models.sources import load_model
from thinkalike.pipelines.schema import ParameterError

ZOO_MODELS = ("gelu_1l", "neox_xs")


def test_corpus_outputs_are_versioned_and_consistent(tiny_project):
    project, catalog = tiny_project
    sentences = catalog.load("sentences")
    assert {"text", "words", "subject_number", "tense", "relative_clause", "attractor_number"} <= set(sentences)
    train, heldout = catalog.load("train_sentences"), catalog.load("heldout_sentences")
    assert set(train["sentence_id"]).isdisjoint(heldout["sentence_id"])
    tokenizer = catalog.load("tokenizer")
    sequences = catalog.load("evaluation_sequences")
    index = catalog.load("evaluation_index")
    assert sequences["attention_mask"].sum() == len(index)
    flat = sequences["input_ids"][index["sequence"], index["position"]]
    np.testing.assert_array_equal(flat, index["token_id"])
    assert catalog.load("train_sequences")["input_ids"].shape[1] == 32
    # versioned: one timestamped folder per dataset
    versions = list((project / "data/01_raw/sentences.parquet").iterdir())
    assert len(versions) == 1 and versions[0].name[:4].isdigit()
    assert len(tokenizer) <= 200


def test_every_zoo_model_learned_the_language(tiny_project):
    _, catalog = tiny_project
    summary = catalog.load("zoo_summary").set_index("model")
    assert set(summary.index) == set(ZOO_MODELS)
    assert summary["beats_baseline"].all(), summary
    assert (summary["improvement"] >= 0.30).all()
    curve = catalog.load("models.gelu_1l.training_curve")
    assert curve["heldout_loss"].iloc[-1] < curve["heldout_loss"].iloc[0]


@pytest.mark.parametrize("model", ZOO_MODELS)
def test_activations_match_the_models_own_residual_stream(tiny_project, model):
    _, catalog = tiny_project
    store = catalog.load(f"models.{model}.activations")
    index = catalog.load(f"models.{model}.activation_index")
    config = catalog.load(f"models.{model}.model_config")
    assert store.n_layers == int(
        config.get("bridge_config", {}).get("n_layers", 0) or config.get("hf_config", {}).get("num_hidden_layers")
    )
    assert sum(len(batch.tokens()[0]) for batch in store) == len(index)
    handle = load_model(
        f"zoo:{model}",
        zoo_artifacts={model: (config, catalog.load(f"models.{model}.model_weights"))},
        tokenizer=catalog.load("tokenizer"),
        device="cpu",
    )
    sequences = catalog.load("evaluation_sequences")
    first = store.batch(0)
    with torch.no_grad():
        expected = handle.residual_streams(
            torch.as_tensor(sequences["input_ids"][:2]), torch.as_tensor(sequences["attention_mask"][:2])
        )
    real = sequences["attention_mask"][:2].astype(bool)  # only real tokens are stored
    np.testing.assert_allclose(first.residual[:, :2][:, real], expected.numpy()[:, real], rtol=1e-5, atol=1e-5)
    assert not first.residual[:, :2][:, ~real].any()


def test_run_is_recorded_in_mlflow(tiny_project):
    project, _ = tiny_project
    with sqlite3.connect(project / "mlflow.db") as db:
        keys = {row[0] for row in db.execute("select distinct key from metrics")}
        params = {row[0] for row in db.execute("select distinct key from params")}
        statuses = {row[0] for row in db.execute("select status from runs")}
    assert "zoo/gelu_1l.heldout_loss" in keys, keys
    assert "corpus/unigram_entropy_nats" in keys
    assert "corpus.n_ctx" in params
    assert statuses == {"FINISHED"}  # the run is closed, not left open in the process
    import mlflow

    assert mlflow.active_run() is None


def test_one_namespace_runs_alone_and_keeps_earlier_versions(tiny_project, monkeypatch):
    project, catalog = tiny_project
    monkeypatch.chdir(project)
    before = sorted((project / "data/07_model_output/activations/neox_xs").iterdir())
    run_project(project, pipeline_names=["activations"], namespaces=["models.neox_xs"])
    after = sorted((project / "data/07_model_output/activations/neox_xs").iterdir())
    assert len(after) == len(before) + 1 and set(before) < set(after)
    assert len(list((project / "data/07_model_output/activations/gelu_1l").iterdir())) == 1


def test_bad_model_spec_fails_before_any_node_runs(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(Exception, match="nowhere"):
        run_project(project, runtime_params={"activations": {"models": {"ghost": "hf:./nowhere/model"}}})
    assert not (project / "data").exists() or not any((project / "data").rglob("*.parquet"))


def test_missing_natural_text_is_named(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError, match="corpus.natural_text.path: .*missing.txt"):
        run_project(project, runtime_params={"corpus": {"natural_text": {"path": str(tmp_path / "missing.txt")}}})


def test_natural_text_joins_the_evaluation_texts(tmp_path):
    from thinkalike.pipelines.corpus.nodes import build_evaluation_texts
    from thinkalike.pipelines.corpus.schema import validate_corpus

    text = tmp_path / "docs.txt"
    text.write_text("The cat sat on the mat .\n\nA second document here .\n")
    heldout = pd.DataFrame({"sentence_id": [5, 9], "text": ["the dog runs .", "the dogs run ."]})
    corpus = {"natural_text": {"path": str(text), "mode": "lines", "use": "join"}}
    joined = build_evaluation_texts(heldout, settings=validate_corpus(corpus))
    assert len(joined) == 4 and joined["sentence_id"].is_unique
    corpus["natural_text"]["use"] = "replace"
    assert len(build_evaluation_texts(heldout, settings=validate_corpus(corpus))) == 2
    corpus["natural_text"]["use"] = "append"
    with pytest.raises(ValueError, match="natural_text.use"):
        build_evaluation_texts(heldout, settings=validate_corpus(corpus))
