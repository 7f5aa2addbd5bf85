"""Which tokens are rows of the CKA, how texts share rows, and the final-norm layer — in the pipelines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.pipelines.conftest import PROJECT_ROOT, make_project_copy, run_project
from thinkalike.models.activation_store import write_activation_store
from thinkalike.pipelines.activations.schema import validate_activations
from thinkalike.pipelines.cka.schema import validate_cka
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.schema import ParameterError


def test_default_cka_excludes_special_tokens_and_records_it(tiny_project):
    for env in (None, "test"):
        assert configured_parameters(PROJECT_ROOT, env)["cka"]["exclude_special_tokens"] is True
    _, catalog = tiny_project
    table = catalog.load("models.cka.gelu_1l__neox_xs.cka_table")
    index = catalog.load("models.gelu_1l.activation_index")
    assert index["is_special"].sum() > 0
    assert table["exclude_special_tokens"].all()
    assert (table["n_tokens"] == int((~index["is_special"]).sum())).all()


def test_zoo_extraction_in_the_sentence_layout_with_the_final_norm_layer(tiny_project, tmp_path):
    from thinkalike.pipelines.activations.nodes import extract_zoo_activations

    _, catalog = tiny_project
    packed_index = catalog.load("evaluation_index")
    settings = validate_activations({**catalog.load("params:activations"), "packing": "sentence", "final_norm": True})
    for name in ("gelu_1l", "neox_xs"):
        stream, index = extract_zoo_activations(
            catalog.load("evaluation_sequences"),
            packed_index,
            catalog.load("tokenizer"),
            catalog.load(f"models.{name}.model_weights"),
            catalog.load(f"models.{name}.model_config"),
            settings=settings,
            model_name=name,
        )
        assert (index.groupby("sequence")["sentence_id"].nunique() == 1).all()
        assert index["sequence"].nunique() >= packed_index["sentence_id"].nunique() > packed_index["sequence"].nunique()
        np.testing.assert_array_equal(index["token_id"], packed_index["token_id"])
        n_layers = stream.n_layers
        assert stream.layers == list(range(n_layers + 2))
        store = write_activation_store(
            tmp_path / name, stream.batches, name, n_layers=n_layers, layers=stream.layer_subset
        )
        assert store.n_layers == n_layers and store.layers[-1] == n_layers + 1
        assert sum(batch.tokens().shape[1] for batch in store) == len(index)


def test_new_settings_are_validated_by_name():
    assert validate_activations({}).packing == "packed" and validate_activations({}).final_norm is False
    with pytest.raises(ParameterError, match=r"^activations\.packing"):
        validate_activations({"packing": "rows"})
    with pytest.raises(ParameterError, match=r"^activations\.final_norm"):
        validate_activations({"final_norm": "yes"})
    with pytest.raises(ParameterError, match=r"^cka\.exclude_special_tokens"):
        validate_cka({"exclude_special_tokens": "no", "pairs": {"intra": True}}, {"m": "zoo:m"})


def _checkpoint_with_a_four_token_wrapping(directory: Path) -> Path:
    """A tiny GPT-2 whose tokenizer puts ``[CLS] [CLS] … [SEP] [SEP]`` around every text."""
    from tokenizers import processors

    from tests.models.conftest import build_module, make_encoder_tokenizer

    tokenizer = make_encoder_tokenizer()
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] [CLS] $A [SEP] [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    build_module("gpt2").save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def test_hub_model_whose_tokenizer_cannot_be_packed_fails_before_any_node_runs(tmp_path, monkeypatch):
    checkpoint = _checkpoint_with_a_four_token_wrapping(tmp_path / "wrapped")
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError) as raised:
        run_project(project, runtime_params={"activations": {"models": {"wrapped": f"hf:{checkpoint}"}, "n_ctx": 4}})
    message = str(raised.value)
    assert message.startswith("activations.models.wrapped") and "n_ctx=4" in message, message
    assert not (project / "data").exists() or not any(p.is_file() for p in (project / "data").rglob("*"))
