"""The measures at a real width (issue 39, item 5): two locally built checkpoints laid out as real ones are.

A Llama-layout causal LM (d = 256, 14 blocks: 15 stored layers, so ``cka.measures.layers: auto`` picks the
``relative`` grid) and a BERT sentence encoder (d = 384), random, saved with ``save_pretrained`` and their own
tokenizers; ``kedro run --pipelines corpus,activations,cka`` with conf/base's measures settings (512 rows at
most, every measure, calibration). The evaluation texts give 333–512 rows, fewer than the two layers' widths
together: the textbook CCA family would read 1 on any pair of these layers.
"""

from __future__ import annotations

import logging
import shutil

import pytest
import yaml
from kedro.runner import SequentialRunner

from tests.pipelines.conftest import PROJECT_ROOT, make_project_copy, run_project

WIDE, ENCODER_WIDTH, BLOCKS = 256, 384, 14
CCA_FAMILY = ("mean_cca", "svcca", "pwcca")


def save_llama(directory):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from thinkalike.language.grammar import generate_sentences
    from thinkalike.language.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(generate_sentences(300, seed=11)["text"].tolist(), vocab_size=150)
    tokenizer.save_pretrained(directory)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=WIDE,
        num_hidden_layers=BLOCKS,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=512,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory, safe_serialization=True)
    return directory


def save_encoder(directory):
    import torch
    from transformers import BertConfig, BertModel

    from tests.models.conftest import make_encoder_tokenizer

    tokenizer = make_encoder_tokenizer()
    tokenizer.save_pretrained(directory)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=ENCODER_WIDTH,
        num_hidden_layers=2,
        num_attention_heads=6,
        intermediate_size=512,
        max_position_embeddings=64,
    )
    config.architectures = ["BertModel"]
    torch.manual_seed(1)
    BertModel(config).save_pretrained(directory, safe_serialization=True)
    return directory


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("wide")
    llama, encoder = save_llama(root / "llama"), save_encoder(root / "encoder")
    (root / "project").mkdir()
    project = make_project_copy(root / "project")
    conf = project / "conf" / "wide"
    shutil.copytree(project / "conf" / "test", conf)
    base = {
        name: yaml.safe_load((PROJECT_ROOT / "conf" / "base" / f"parameters_{name}.yml").read_text())
        for name in ("activations", "cka")
    }
    activations = base["activations"]["activations"]
    activations.update(include_zoo=False, n_ctx=32, models={"llama": f"hf:{llama}", "encoder": f"hf:{encoder}"})
    cka = base["cka"]["cka"]
    cka.update(pooling="auto", pairs={"intra": True, "explicit": [["llama", "encoder"]]}, groups={})
    (conf / "parameters_activations.yml").write_text(yaml.safe_dump({"activations": activations}))
    (conf / "parameters_cka.yml").write_text(yaml.safe_dump({"cka": cka}))
    handler = _Collect()
    measures_logger = logging.getLogger("thinkalike.cka.measure_tables")  # "thinkalike" is configured by the run
    measures_logger.addHandler(handler)
    try:
        catalog = run_project(
            project, env="wide", pipeline_names=["corpus", "activations", "cka"], runner=SequentialRunner()
        )  # in this process, so its log lines reach the handler
    finally:
        measures_logger.removeHandler(handler)
    return catalog, handler.lines


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_the_defaults_log_the_grid_estimate_and_the_reduced_space(wide_run):
    catalog, lines = wide_run
    table = catalog.load("models.cka.llama__llama.measures_table")
    n_tokens = int(table["n_tokens"].iloc[0])
    assert 2 * WIDE > n_tokens - 1  # r_x + r_y > n − 1: the textbook CCA family of two such layers is 1
    assert any(
        line.startswith("measures llama vs llama (cka.measures.layers: relative): 15 layer pairs × 11 measures")
        for line in lines
    ), lines
    reduced = f"compare each layer's top {n_tokens // 10} principal components, not all {WIDE} dimensions"
    assert any(
        line.startswith("measures llama vs llama: mean_cca, svcca, pwcca ") and reduced in line for line in lines
    )
    cca = table[table["measure"].isin(CCA_FAMILY)]
    assert (cca["dims_a"] == n_tokens // 10).all() and (cca["dims_b"] == n_tokens // 10).all()
    assert (table.loc[table["measure"] == "cka", "dims_a"] == WIDE).all()


def test_no_cca_family_value_near_one_for_unrelated_layers(wide_run):
    """Unrelated: a layer against itself with its rows shuffled (the grounding control), and the two random
    models' block outputs (CKA 0.04 there). Measured: 0.26 for both (the chance level of 51 correlations of 512
    rows, sqrt(51/512) = 0.32), where the textbook values are 1. (The ``independent_rows`` control is not
    unrelated here: the drawn rows' two halves share position structure, CKA 0.33 between them, so it is left out.)
    """
    catalog, _ = wide_run
    self_table = catalog.load("models.cka.llama__llama.measures_table")
    shuffled = self_table[(self_table["variant"] == "permuted_rows") & self_table["measure"].isin(CCA_FAMILY)]
    assert len(shuffled) == len(CCA_FAMILY)
    assert (shuffled["value"] < 0.35).all(), shuffled[["measure", "value"]]
    cross = catalog.load("models.cka.llama__encoder.measures_table")
    cross = cross[(cross["variant"] == "configured") & (cross["layer_a"] > 0)].dropna(subset=["value"])
    cka = cross[cross["measure"] == "cka"]
    assert len(cka) == 2 and (cka["value"] < 0.2).all()  # the block outputs of two random models: unrelated
    cca = cross[cross["measure"].isin(CCA_FAMILY)]
    assert len(cca) == 2 * len(CCA_FAMILY) and (cca["value"] < 0.35).all(), cca[["layer_a", "measure", "value"]]
