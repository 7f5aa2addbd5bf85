"""Streaming CKA (``cka.mode: streaming``): CKA straight from the forward passes equals the stored path."""

import numpy as np

from tests.pipelines.conftest import run_project

PAIRS = ("models.cka.gelu_1l__neox_xs", "models.cka.gelu_1l__gelu_1l")


def test_streaming_cka_equals_the_stored_path_and_writes_no_activations(tiny_project, monkeypatch):
    project, catalog = tiny_project
    monkeypatch.chdir(project)
    stored = {pair: catalog.load(f"{pair}.cka_table") for pair in PAIRS}
    activations_before = sorted((project / "data/07_model_output/activations").rglob("meta.json"))
    streamed_catalog = run_project(
        project,
        pipeline_names=["cka"],
        namespaces=list(PAIRS),
        runtime_params={
            "cka": {"mode": "streaming"},  # each model on its own device
            "activations": {"devices": {"gelu_1l": "cpu", "neox_xs": "cpu"}},
        },
    )
    for pair in PAIRS:
        streamed = streamed_catalog.load(f"{pair}.cka_table")
        assert len(streamed) == len(stored[pair])
        np.testing.assert_allclose(streamed["cka"], stored[pair]["cka"], rtol=0, atol=1e-9)
        assert (streamed["n_tokens"] == stored[pair]["n_tokens"]).all()
    assert sorted((project / "data/07_model_output/activations").rglob("meta.json")) == activations_before
