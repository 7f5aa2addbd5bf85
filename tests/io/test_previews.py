"""kedro-viz previews: every project dataset previews through kedro-viz's own serialisation, or says why not."""

import base64
import json

import numpy as np
import pandas as pd
import pytest
import torch
from kedro.io.core import Version
from kedro_datasets.pandas import ParquetDataset
from kedro_viz.api.rest.responses.utils import get_encoded_response
from kedro_viz.models.flowchart.node_metadata import DataNodeMetadata
from kedro_viz.models.flowchart.nodes import GraphNode

from tests.io.test_datasets import batches
from thinkalike.io import atomic
from thinkalike.io.datasets import ActivationStoreDataset, HFTokenizerDataset
from thinkalike.io.previews import cell_text, jsonable_table
from thinkalike.models.activation_store import ActivationStream

VERSION = Version(None, "2026-01-01T00.00.00.000Z")
SENTENCES = pd.DataFrame(
    {
        "text": ["did every pilot greet the brave tables ?", "the girls sing ."],
        "words": [
            np.array(["did", "every", "pilot", "greet", "the", "brave", "tables", "?"], dtype=object),
            np.array(["the", "girls", "sing", "."], dtype=object),
        ],
        "word_position": [np.arange(8), np.arange(4)],
        "p_value": [np.nan, 0.5],
    }
)


def viz_metadata(name: str, dataset) -> dict:
    """What kedro-viz's ``/api/nodes/<id>`` answers for a dataset, decoded (raises where kedro-viz fails)."""
    node = GraphNode.create_data_node(
        dataset_id=name, dataset_name=name, layer=None, tags=set(), dataset=dataset, modular_pipelines=None
    )
    DataNodeMetadata.set_is_all_previews_enabled(True)
    return json.loads(get_encoded_response(DataNodeMetadata(data_node=node)))


def test_table_with_list_columns_previews_through_kedro_viz(tmp_path):
    dataset = atomic.ParquetDataset(filepath=str(tmp_path / "sentences.parquet"), version=VERSION)
    dataset.save(SENTENCES)
    plain = ParquetDataset(filepath=str(tmp_path / "sentences.parquet"), version=VERSION)  # kedro-datasets' own
    with pytest.raises(Exception, match="Unable to serialize unknown type: <class 'numpy.ndarray'>"):
        viz_metadata("sentences", plain)  # the HTTP 500 of kedro viz run, the abort of kedro viz build
    answer = viz_metadata("sentences", dataset)
    assert answer["preview_type"] == "TablePreview"
    preview = answer["preview"]
    assert preview["columns"] == ["text", "words", "word_position", "p_value"]
    assert preview["data"][0] == [
        "did every pilot greet the brave tables ?",
        "[did, every, pilot, greet, the, brave, tables, ?]",
        "[0, 1, 2, 3, 4, 5, 6, 7]",
        None,
    ]
    assert preview["data"][1][3] == 0.5


def test_long_list_cells_are_cut():
    assert cell_text(range(15), limit=4) == "[0, 1, 2, 3, … (+11)]"
    table = jsonable_table({"columns": [0], "index": [np.int64(3)], "data": [[np.float32(1.5)]]})
    assert table == {"columns": ["0"], "index": [3], "data": [[1.5]]}


def test_unsaved_datasets_say_why_in_their_own_kind(tmp_path):
    datasets = {
        "TablePreview": atomic.ParquetDataset(filepath=str(tmp_path / "t.parquet"), version=Version(None, None)),
        "JSONPreview": atomic.JSONDataset(filepath=str(tmp_path / "s.json"), version=Version(None, None)),
        "ImagePreview": atomic.MatplotlibDataset(filepath=str(tmp_path / "f.png"), version=Version(None, None)),
        "PlotlyPreview": atomic.PlotlyJSONDataset(filepath=str(tmp_path / "p.json"), version=Version(None, None)),
        "ActivationStore": ActivationStoreDataset(filepath=str(tmp_path / "acts"), version=Version(None, None)),
        "Tokenizer": HFTokenizerDataset(filepath=str(tmp_path / "tok"), version=Version(None, None)),
        "Safetensors": atomic.SafetensorsDataset(filepath=str(tmp_path / "w.safetensors"), version=Version(None, None)),
    }
    for kind, dataset in datasets.items():
        answer = viz_metadata(kind, dataset)
        shown = answer["preview"]
        if answer["preview_type"] == "ImagePreview":
            assert base64.b64decode(shown).startswith(b"\x89PNG")  # the message, drawn
        else:
            assert "Not saved yet" in json.dumps(shown), kind
            assert str(tmp_path) in json.dumps(shown), kind


def test_unreadable_dataset_says_why(tmp_path):
    dataset = atomic.ParquetDataset(filepath=str(tmp_path / "t.parquet"), version=VERSION)
    dataset.save(SENTENCES)
    (tmp_path / "t.parquet" / VERSION.save / "t.parquet").write_bytes(b"not parquet")
    preview = viz_metadata("t", dataset)["preview"]
    assert preview["columns"] == ["preview unavailable"]
    assert preview["data"][0][0].startswith("Cannot preview: ")


def test_json_preview_has_no_nan(tmp_path):
    dataset = atomic.JSONDataset(filepath=str(tmp_path / "stats.json"), version=VERSION)
    dataset.save({"unigram_entropy": float("nan"), "n": 3})
    answer = viz_metadata("stats", dataset)
    assert answer["preview_type"] == "JSONPreview"
    assert json.loads(answer["preview"]) == {"unigram_entropy": None, "n": 3}  # strict JSON: the browser parses it


def test_safetensors_preview_lists_tensors(tmp_path):
    dataset = atomic.SafetensorsDataset(filepath=str(tmp_path / "w.safetensors"), backend="torch", version=VERSION)
    tensors = {f"block{i}.weight": torch.arange(20.0).reshape(4, 5) + i for i in range(14)}
    tensors["ids"] = torch.arange(100)
    dataset.save(tensors)
    answer = viz_metadata("w", dataset)
    assert answer["preview_type"] == "TablePreview"
    rows = answer["preview"]["data"]
    assert answer["preview"]["columns"] == ["tensor", "dtype", "shape", "first 8 values"]
    assert rows[0] == ["block0.weight", "F32", "[4, 5]", "[0, 1, 2, 3, 4]"]  # the first row of a matrix
    assert rows[10] == ["block10.weight", "F32", "[4, 5]", "[10, 11, 12, 13, 14]"]  # natural order
    assert rows[-1] == ["… 3 more tensors", "", "", ""]
    assert len(rows) == 13


def test_activation_store_preview_shows_shape_layers_dtype_and_rows(tmp_path):
    dataset = ActivationStoreDataset(filepath=str(tmp_path / "acts"), version=VERSION)
    written = batches(2, layers=3, width=8)
    dataset.save(
        ActivationStream("gelu_1l", written, dtype="float16", n_layers=4, layer_subset=[0, 2, 4], spec="zoo:gelu_1l")
    )
    answer = viz_metadata("models.gelu_1l.activations", dataset)
    assert answer["preview_type"] == "JSONPreview"
    preview = json.loads(answer["preview"])
    assert preview["model"] == "gelu_1l" and preview["spec"] == "zoo:gelu_1l"
    assert preview["dtype"] == "float16"
    assert preview["layers (0 = embeddings)"] == [0, 2, 4]
    assert preview["shape (layers, tokens, d_model)"] == [3, 2 * (2 * 5 - 2), 8]
    rows = preview["first 4 tokens, first 6 dimensions"]
    assert list(rows) == ["layer 0", "layer 2", "layer 4"]
    expected = written[0].tokens()[1, :4, :6].astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(rows["layer 2"], expected, rtol=1e-3)


def test_tokenizer_preview(tmp_path):
    from thinkalike.language.grammar import generate_sentences
    from thinkalike.language.tokenizer import train_tokenizer

    dataset = HFTokenizerDataset(filepath=str(tmp_path / "tok"), version=VERSION)
    dataset.save(train_tokenizer(generate_sentences(100, seed=1)["text"].tolist(), vocab_size=60))
    answer = viz_metadata("tokenizer", dataset)
    assert answer["preview_type"] == "JSONPreview"
    preview = json.loads(answer["preview"])
    assert preview["vocab_size"] == len(dataset.load())
    assert "<bos>" in preview["special_tokens"]
    assert len(preview["first 20 tokens (by id)"]) == 20
