"""A replicate moves every seed the results depend on and keeps the data's (thinkalike.replicate_seeds), through the
project's config loader for every reader of the parameters."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from thinkalike.replicate_seeds import (
    DATA_SEEDS,
    SEED_STRIDE,
    is_data_seed,
    replicate_of,
    replicate_parameters,
    seed_paths,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base_parameters():
    from kedro.framework.startup import bootstrap_project

    from thinkalike.pipelines.parameters import configured_parameters

    bootstrap_project(ROOT)
    return configured_parameters(ROOT, "base")


def test_replicate_zero_is_the_default_run(base_parameters):
    assert base_parameters["replicate"] == 0
    assert replicate_parameters(base_parameters) == base_parameters


def test_every_seed_but_the_datas_moves_and_relations_between_seeds_are_kept(base_parameters):
    before = dict(seed_paths(base_parameters))
    after = dict(seed_paths(replicate_parameters({**base_parameters, "replicate": 2})))
    assert before.keys() == after.keys()
    kept = {path for path in before if is_data_seed(path)}
    assert kept == {"corpus.seed", "nli.pairs.seed"}  # the sentences and the NLI pairs stay the same
    for path, seed in before.items():
        assert after[path] == (seed if path in kept else seed + 2 * SEED_STRIDE), path
    # what the issue lists: zoo initialisation and data order, φ, NLI encoder and copies, MLEM, row samples, fine-tune
    for path in (
        "zoo.models.gelu_2l.seed",
        "stitching.settings.seed",
        "stitching.split_seed",
        "nli.seed",
        "nli.encoder.seed",
        "mlem.fit.seed",
        "cka.measures.seed",
        "embedding.finetune.seed",
    ):
        assert after[path] != before[path], path
    # the same-seed control still shares gelu_2l's seed; seed replicas stay distinct
    models = {path.split(".")[2]: seed for path, seed in after.items() if path.startswith("zoo.models.")}
    assert models["solu_2l_shared_seed"] == models["gelu_2l"]
    assert len({models["gelu_2l"], models["gelu_2l_seed1"], models["gelu_2l_seed2"]}) == 3
    # the stride is larger than any seed, so no replicate reuses another's seed
    assert max(before.values()) < SEED_STRIDE


def test_the_input_is_not_changed_and_nested_copies_are_new():
    parameters = {
        "replicate": 1,
        "zoo": {"models": {"a": {"seed": 3}}},
        "corpus": {"seed": 5},
        "x": {"phi_seed": 2, "seeds": 4},
    }
    shifted = replicate_parameters(parameters)
    assert parameters["zoo"]["models"]["a"]["seed"] == 3
    assert shifted["zoo"]["models"]["a"]["seed"] == 1003 and shifted["corpus"]["seed"] == 5
    assert shifted["x"] == {"phi_seed": 1002, "seeds": 4}  # "seeds" (a count or list) is not a seed
    assert DATA_SEEDS == ("corpus", "nli.pairs")


@pytest.mark.parametrize("value", [-1, 1.5, "1", True])
def test_a_bad_replicate_is_refused_naming_the_parameter(value):
    with pytest.raises(ValueError, match="^replicate: expected a non-negative integer"):
        replicate_of({"replicate": value})


def test_the_config_loader_gives_the_replicate_seeds_to_every_reader(tmp_path):
    from kedro.framework.startup import bootstrap_project

    from thinkalike.config_loader import ReplicateConfigLoader

    bootstrap_project(ROOT)
    loader = ReplicateConfigLoader(
        conf_source=str(ROOT / "conf"),
        env="base",
        base_env="base",
        default_run_env="local",
        runtime_params={"replicate": 1},
    )
    parameters = loader["parameters"]
    assert parameters["zoo"]["models"]["gelu_2l"]["seed"] == SEED_STRIDE
    assert parameters["corpus"]["seed"] == 0
    bad = ReplicateConfigLoader(
        conf_source=str(ROOT / "conf"),
        env="base",
        base_env="base",
        default_run_env="local",
        runtime_params={"replicate": -2},
    )
    with pytest.raises(click.BadParameter, match="replicate: expected"):
        bad["parameters"]
    assert (
        "mlflow"
        in ReplicateConfigLoader(
            conf_source=str(ROOT / "conf"),
            env="base",
            base_env="base",
            default_run_env="local",
            config_patterns={"mlflow": ["mlflow*"]},
        )["mlflow"]
    )


def test_the_replicates_environment_sets_the_count():
    from thinkalike.replicates import replicate_count

    assert replicate_count(ROOT, "replicates") == 4
    with pytest.raises(ValueError, match=r"replicates.count \(conf/base\)"):
        replicate_count(ROOT, "base")


def test_an_environment_of_fixed_checkpoints_moves_the_data_seed_too(base_parameters):
    from thinkalike.pipelines.parameters import configured_parameters

    real = configured_parameters(ROOT, "real")
    assert real["replicates"]["vary_data"] is True
    moved = replicate_parameters({**real, "replicate": 2})
    assert moved["corpus"]["seed"] == real["corpus"]["seed"] + 2 * SEED_STRIDE
    assert moved["mlem"]["fit"]["seed"] == real["mlem"]["fit"]["seed"] + 2 * SEED_STRIDE
    kept = replicate_parameters({**base_parameters, "replicate": 2})
    assert kept["corpus"]["seed"] == base_parameters["corpus"]["seed"]
    with pytest.raises(ValueError, match=r"replicates.vary_data: expected true or false, got 'yes'"):
        replicate_parameters({**base_parameters, "replicate": 1, "replicates": {"vary_data": "yes"}})


def test_the_real_environments_replicates_run_its_pipelines_into_the_real_column(tmp_path):
    from thinkalike.findings_cli import REAL_COLUMN, replicate_column
    from thinkalike.replicates import kedro_command, replicate_pipelines

    names = replicate_pipelines(ROOT, "real")
    assert names and "nli" not in names and "report" in names
    assert kedro_command("real", 1, False, names)[-2:] == ["--pipelines", ",".join(names)]
    assert "--pipelines" not in kedro_command("replicates", 1, False, replicate_pipelines(ROOT, "replicates"))
    assert replicate_column(ROOT, "real") == REAL_COLUMN and replicate_column(ROOT, "replicates") is None
