"""A local Hugging Face checkpoint with its own tokenizer, compared with a zoo model through word pooling."""

import numpy as np
import pytest

from tests.pipelines.conftest import make_project_copy, run_project


@pytest.fixture(scope="module")
def gpt2_checkpoint(grammar_gpt2_dir):
    """A tiny random GPT-2 with a different (smaller-vocabulary) tokenizer, saved locally."""
    return grammar_gpt2_dir


def test_word_pooling_compares_models_with_different_tokenizers(tmp_path, monkeypatch, gpt2_checkpoint):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    overrides = {
        "activations": {"models": {"gpt2_local": f"hf:{gpt2_checkpoint}"}, "n_ctx": 64},
        "cka": {"pooling": "auto", "pairs": {"intra": True, "explicit": [["gelu_1l", "gpt2_local"]]}, "measures": None},
    }  # CKA's word pooling is the point here
    catalog = run_project(
        project,
        runtime_params=overrides,  # the pipelines the checks read
        pipeline_names=["corpus", "zoo", "activations", "cka", "mlem"],
    )
    zoo_index = catalog.load("models.gelu_1l.activation_index")
    gpt2_index = catalog.load("models.gpt2_local.activation_index")
    assert len(gpt2_index) > len(zoo_index)  # the smaller vocabulary splits words into more tokens
    table = catalog.load("models.cka.gelu_1l__gpt2_local.cka_table")
    # pooling: auto is word across tokenizers, token within one model and between zoo models
    assert (table["pooling"] == "word").all() and np.isfinite(table["cka"]).all()
    for model in ("gelu_1l", "gpt2_local"):
        assert (catalog.load(f"models.cka.{model}__{model}.cka_table")["pooling"] == "token").all()
    # provenance: the model specs and the activation store versions the numbers came from
    store_version = catalog.load("models.gpt2_local.activations").path.parent.name
    assert set(table["spec_a"]) == {"zoo:gelu_1l"} and set(table["spec_b"]) == {f"hf:{gpt2_checkpoint}"}
    assert set(table["activations_version_b"]) == {store_version} and store_version[:4].isdigit()
    n_words = len(zoo_index[zoo_index["word_index"] >= 0].groupby(["sentence_id", "word_index"]))
    assert (table["n_tokens"] == n_words).all()
    # MLEM works unchanged on the hub model: its words are pooled from its own tokens
    profile = catalog.load("models.mlem.gpt2_local.mlem_profile")
    store = catalog.load("models.gpt2_local.activations")
    assert sorted(profile["layer"].unique()) == sorted(store.layers)  # every stored layer fitted
    assert profile["spearman_heldout"].between(-1, 1).all() and profile["spearman_heldout"].notna().all()


def test_token_level_comparison_across_tokenizers_says_to_pool(tmp_path, monkeypatch, gpt2_checkpoint):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    overrides = {
        "activations": {"models": {"gpt2_local": f"hf:{gpt2_checkpoint}"}, "n_ctx": 64},
        "cka": {"pooling": "token", "pairs": {"intra": False, "explicit": [["gelu_1l", "gpt2_local"]]}},
    }
    with pytest.raises(Exception, match="pooling to 'word' or 'sequence'|set pooling"):
        run_project(project, runtime_params=overrides)
