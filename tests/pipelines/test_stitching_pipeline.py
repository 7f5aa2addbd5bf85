"""The stitching pipeline: its plan (pairs, directions, layer grids), figures, MLflow histories, the GPU
environment, and its outputs on the tiny project (the saved φ's re-evaluate to the table's losses)."""

import tempfile

import numpy as np
import pandas as pd
import pytest

from tests.pipelines.conftest import PROJECT_ROOT, make_project_copy, run_project
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import ParameterError
from thinkalike.pipelines.stitching.pipeline import SUMMARY_OUTPUTS
from thinkalike.pipelines.stitching.plan import layer_grid, ordered_pairs
from thinkalike.pipelines.stitching.schema import validate_stitching
from thinkalike.stitching.figures import (
    curves_figure,
    penalty_heatmap,
    penalty_heatmap_plotly,
    penalty_matrix,
    penalty_plotly,
)

PAIR = ("gelu_1l", "neox_xs")
NAMESPACE = f"models.stitching.{PAIR[0]}__{PAIR[1]}"
MLFLOW_NAMESPACE = NAMESPACE.removeprefix("models.")  # MLflow names drop the models. prefix (hooks.py)


def test_ordered_pairs_add_reverse_and_self_baselines_once():
    assert ordered_pairs([("a", "b"), ("b", "c")], "both", self_baselines=True) == [
        ("a", "b"),
        ("b", "a"),
        ("a", "a"),
        ("b", "b"),
        ("b", "c"),
        ("c", "b"),
        ("c", "c"),
    ]
    assert ordered_pairs([("a", "b")], "forward", self_baselines=False) == [("a", "b")]


def test_layer_grids():
    assert layer_grid("diagonal", 2, 3) == [(0, 0), (1, 1), (2, 2)]
    assert layer_grid("relative", 2, 2) == layer_grid("diagonal", 2, 2)
    assert layer_grid("relative", 1, 3) == [(0, 0), (1, 3)]
    assert len(layer_grid("all", 1, 2)) == 6
    with pytest.raises(ValueError, match="stitching.layers"):
        layer_grid("diagonals", 1, 1)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"kinds": ["rotation"]}, r"stitching\.kinds\.0"),
        ({"layers": "diag"}, r"stitching\.layers"),
        ({"directions": "back"}, r"stitching\.directions"),
        ({"train_source": "corpus"}, r"stitching\.train_source"),
        ({"max_train_sequences": 0}, r"stitching\.max_train_sequences"),
        ({"settings": {"stepz": 3}}, r"stitching\.settings\.stepz: unknown parameter"),
        ({"pairs": {"explicit": [["a", "ghost"]]}}, r"stitching\.pairs: .*\['ghost'\] that are not zoo models"),
        ({"phi_seeds": 0}, r"stitching\.phi_seeds must be a number of seeds >= 1"),
        ({"phi_seeds": -3}, r"stitching\.phi_seeds must be a number of seeds >= 1"),
        ({"phi_seeds": 2.0}, r"stitching\.phi_seeds must be .*got 2\.0"),
        ({"phi_seeds": "2"}, r"stitching\.phi_seeds must be .*got '2'"),
        ({"phi_seeds": [0, 1, 1]}, r"stitching\.phi_seeds must be distinct, got \[1\]"),
        ({"phi_seeds": [0, -1]}, r"stitching\.phi_seeds must be integers >= 0"),
        ({"exclude_special_targets": "yes"}, r"stitching\.exclude_special_targets"),
        (
            {"settings": {"exclude_special_targets": False}},
            r"stitching\.settings\.exclude_special_targets: unknown "
            r"parameter \(set stitching\.exclude_special_targets\)",
        ),
    ],
)
def test_bad_stitching_parameters_are_named(values, message):
    with pytest.raises(ParameterError, match=message):
        validate_stitching({"pairs": {"explicit": [["a", "b"]]}, **values}, ["a", "b"])


@pytest.fixture(scope="module")
def stitched(tiny_project):
    """The catalog after running the ``stitching`` pipeline on the tiny project."""
    project, _ = tiny_project
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(project)
        return run_project(project, pipeline_names=["stitching"])


def test_penalty_table_has_both_directions_and_self_baselines(stitched):
    table = stitched.load("stitching_penalties")
    assert set(zip(table["model_f"], table["model_g"])) == {PAIR, PAIR[::-1], (PAIR[0], PAIR[0]), (PAIR[1], PAIR[1])}
    assert set(table["stitch"]) == {"identity", "affine_ln"}
    assert table[["loss", "g_loss", "penalty", "ci_low", "ci_high"]].notna().all().all()
    assert (table["train_tokens"] > 0).all() and (table["eval_tokens"] > 0).all()
    assert list(table.columns[:14]) == [
        "model_f",
        "layer_f",
        "model_g",
        "layer_g",
        "stitch",
        "loss",
        "ci_low",
        "ci_high",
        "g_loss",
        "f_loss",
        "penalty",
        "steps",
        "train_tokens",
        "eval_tokens",
    ]
    own = stitched.load(f"models.stitching.{PAIR[0]}__{PAIR[1]}.stitch_table")
    assert set(own["model_f"]) == {PAIR[0]} and set(own["model_g"]) == {PAIR[1]}


def test_table_has_the_targets_and_the_phi_seeds(stitched):
    """conf/test: special tokens left out of the targets, two φ seeds per trained stitch, one for identity."""
    import json

    table = stitched.load("stitching_penalties")
    assert table["exclude_special_targets"].all() and (table["n_targets"] > 0).all()
    assert (table["n_targets"] < table["eval_tokens"]).all()
    trained, identity = table[table["stitch"] == "affine_ln"], table[table["stitch"] == "identity"]
    assert (trained["n_phi_seeds"] == 2).all() and (identity["n_phi_seeds"] == 1).all()
    assert (identity["penalty_seed_std"] == 0).all() and (identity["penalty_seed_mean"] == identity["penalty"]).all()
    for row in table.itertuples():
        seeds, penalties = json.loads(row.phi_seeds), json.loads(row.penalty_seeds)
        assert seeds == ([0, 1] if row.stitch == "affine_ln" else [0]) and len(penalties) == row.n_phi_seeds
        assert penalties[0] == row.penalty and row.phi_seed == 0  # the single-stitch columns: the first seed's
        assert row.penalty_seed_mean == pytest.approx(np.mean(penalties))
        assert (row.penalty_seed_min, row.penalty_seed_max) == (min(penalties), max(penalties))
    assert (trained["penalty_seed_max"] > trained["penalty_seed_min"]).all()  # the seeds' data orders differ


def test_identity_self_stitch_costs_nothing(stitched):
    table = stitched.load("stitching_penalties")
    selves = table[(table["model_f"] == table["model_g"]) & (table["stitch"] == "identity")]
    assert len(selves) == 2 + 3  # gelu_1l: layers 0..1, neox_xs: 0..2
    np.testing.assert_allclose(selves["penalty"], 0.0, atol=1e-6)


def test_curves_and_figure_are_saved(stitched, tiny_project):
    project, _ = tiny_project
    curves = stitched.load("stitching_curves")
    assert len(curves) and set(curves["kind"]) == {"affine_ln"}
    assert curves["heldout_loss"].notna().any()
    assert list((project / "data" / "08_reporting").glob("stitching_penalties.png/*/stitching_penalties.png"))


def test_unknown_stitch_kind_fails_before_any_node(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError, match=r"stitching\.kinds"):
        run_project(project, runtime_params={"stitching": {"kinds": ["identity", "rotation"]}})
    assert not (project / "data").exists() or not any((project / "data").rglob("*.parquet"))


def test_bad_phi_seeds_fail_before_any_node(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError, match=r"stitching\.phi_seeds must be distinct"):
        run_project(project, runtime_params={"stitching": {"phi_seeds": [2, 2]}})
    assert not (project / "data").exists() or not any((project / "data").rglob("*.parquet"))


def test_bad_stitch_setting_is_named(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError, match=r"stitching\.settings"):
        run_project(project, runtime_params={"stitching": {"settings": {"warmup_steps": 10, "steps": 5}}})


# ---------------------------------------------------------------- figures, metrics, options (no run)
def _grid_table() -> pd.DataFrame:
    """An ``all``-grid table of f (2 layers) → g (3 layers), two kinds, penalty = 10·l + m (+ 100 for affine)."""
    rows = [
        {
            "model_f": "a",
            "model_g": "b",
            "layer_f": lf,
            "layer_g": lg,
            "stitch": kind,
            "penalty": 10.0 * lf + lg + (100.0 if kind == "affine" else 0.0),
        }
        for kind in ("affine_ln", "affine")
        for lf in range(3)
        for lg in range(4)
    ]
    table = pd.DataFrame(rows)
    return table.assign(ci_low=table["penalty"] - 1, ci_high=table["penalty"] + 1)


def _curves() -> pd.DataFrame:
    """Learning curves of a → b: 6 steps, held-out every 3 (and at 0), two layer pairs, two kinds."""
    frames = []
    for kind in ("affine", "affine_ln"):
        for layer in (0, 1):
            steps = np.arange(7)
            held = np.where(steps % 3 == 0, 3.0 - 0.1 * steps, np.nan)
            frames.append(
                pd.DataFrame(
                    {
                        "f": "a",
                        "layer_f": layer,
                        "g": "b",
                        "layer_g": layer,
                        "kind": kind,
                        "step": steps,
                        "train_loss": np.r_[np.nan, 3.0 - 0.1 * steps[1:]],
                        "lr": 0.1,
                        "heldout_loss": held,
                        "heldout_penalty": held - 2.5,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def _pixels_wide(figure) -> float:
    return figure.get_size_inches()[0] * figure.dpi


def test_penalty_heatmap_puts_each_penalty_at_its_layers():
    table = _grid_table()
    layers_f, layers_g, matrix = penalty_matrix(table, "affine")
    assert (layers_f, layers_g) == ([0, 1, 2], [0, 1, 2, 3])
    assert matrix[2, 3] == 123.0 and matrix[1, 0] == 110.0
    figure = penalty_heatmap(table)
    assert _pixels_wide(figure) >= 1000 and len(figure.axes) == 4  # two panels and their colour bars
    assert np.array_equal(figure.axes[0].images[0].get_array(), penalty_matrix(table, "affine_ln")[2])
    plotly = penalty_heatmap_plotly(table)
    assert [trace.name for trace in plotly.data] == [None, None] and plotly.layout.width >= 1000
    np.testing.assert_array_equal(np.asarray(plotly.data[1].z), matrix)
    assert list(plotly.data[1].x) == [0, 1, 2, 3] and list(plotly.data[1].y) == [0, 1, 2]
    np.testing.assert_array_equal(np.asarray(plotly.data[1].customdata)[..., 1], matrix + 1)


def test_learning_curves_figure_draws_training_and_heldout_per_layer_pair():
    figure = curves_figure(_curves())
    assert _pixels_wide(figure) >= 1000 and len(figure.axes) == 2
    axis = figure.axes[0]
    lines = [line for line in axis.get_lines() if line.get_label().startswith("l")]
    assert [line.get_label() for line in lines] == ["l0 → m0", "l1 → m1"]
    np.testing.assert_array_equal(lines[0].get_xdata(), [0, 3, 6])  # held-out every 3 steps, and at init
    assert len(axis.get_lines()) == 2 * 2 + 1  # training + held-out per layer pair, g's own loss
    assert any(line.get_label() == "b's own held-out loss" and line.get_ydata()[0] == 2.5 for line in axis.get_lines())
    assert curves_figure(_curves().iloc[:0]).axes  # identity-only pairs: an empty, labelled figure


def test_penalty_plotly_has_the_lines_of_the_penalty_figure():
    table = _grid_table()
    table = table[table["layer_f"] == table["layer_g"]]
    both = pd.concat([table, table.assign(model_f="b", model_g="a"), table.assign(model_g="a")])
    figure = penalty_plotly(both, [("a", "b")])
    names = {trace.name for trace in figure.data}
    assert names == {
        f"{line} ({kind})" for line in ("a → b", "b → a", "a → a (self)") for kind in ("affine_ln", "affine")
    }
    trace = next(trace for trace in figure.data if trace.name == "a → b (affine)")
    np.testing.assert_array_equal(trace.y, [100.0, 111.0, 122.0])
    np.testing.assert_array_equal(trace.error_y.array, [1.0, 1.0, 1.0])
    assert figure.layout.width >= 1000


def _seeded(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with φ-seed columns: three seeds, mean = penalty + 0.5, min/max ± 2 around it."""
    return table.assign(
        n_phi_seeds=3,
        penalty_seed_mean=table["penalty"] + 0.5,
        penalty_seed_min=table["penalty"] - 1.5,
        penalty_seed_max=table["penalty"] + 2.5,
    )


def test_penalty_figures_show_the_seed_spread_beside_the_interval():
    from thinkalike.stitching.figures import SEED_OFFSET, penalty_figure

    table = _grid_table()
    table = _seeded(table[table["layer_f"] == table["layer_g"]])
    figure = penalty_plotly(table, [("a", "b")])
    line = next(trace for trace in figure.data if trace.name == "a → b (affine)")
    seeds = next(trace for trace in figure.data if trace.name == "a → b (affine) φ seeds")
    np.testing.assert_array_equal(line.error_y.array, [1.0, 1.0, 1.0])  # the bootstrap interval stays
    np.testing.assert_allclose(seeds.x, np.array([0, 1, 2]) + SEED_OFFSET)
    np.testing.assert_array_equal(seeds.y, [100.5, 111.5, 122.5])
    np.testing.assert_array_equal(seeds.error_y.array, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(seeds.error_y.arrayminus, [2.0, 2.0, 2.0])
    assert seeds.legendgroup == line.legendgroup and seeds.showlegend is False
    axis = penalty_figure(table, [("a", "b")]).axes[1]  # affine
    bars = [container for container in axis.containers if container.has_yerr]
    assert len(bars) == 1
    np.testing.assert_allclose(bars[0].lines[0].get_ydata(), [100.5, 111.5, 122.5])
    one_seed = _seeded(table).assign(n_phi_seeds=1)  # nothing to draw with a single seed
    assert not any(" φ seeds" in trace.name for trace in penalty_plotly(one_seed, [("a", "b")]).data)


def test_curves_and_mlflow_histories_are_the_first_seeds():
    from thinkalike.pipelines.stitching.mlflow_rules import curve_histories

    first = _curves().assign(phi_seed=0)
    second = first.assign(phi_seed=1, train_loss=first["train_loss"] + 1.0)
    histories = curve_histories("a__b", pd.concat([first, second], ignore_index=True))
    assert histories == curve_histories("a__b", _curves())
    figure = curves_figure(pd.concat([first, second], ignore_index=True))
    assert len(figure.axes[0].get_lines()) == 2 * 2 + 1


class _Recorder:
    """Collects what :func:`record_saved_output` logs."""

    def __init__(self):
        self.histories, self.metrics, self.tables = {}, {}, []

    def log_metric_history(self, histories, what):
        self.histories.update(histories)

    def log_metrics(self, metrics, step=0, what="metrics"):
        self.metrics.update(metrics)

    def log_table(self, table, artifact_file):
        self.tables.append(artifact_file)


def test_learning_curves_are_a_table_and_curve_histories_names_their_values():
    """Every stitch's learning curve is a row of the run's ``stitching_curves`` table, no metric history;
    :func:`curve_histories` names the values as the histories of older runs did."""
    from thinkalike.hooks import record_saved_output
    from thinkalike.pipelines.stitching.mlflow_rules import curve_histories

    recorder = _Recorder()
    record_saved_output(recorder, "stitching_curves", _curves())
    record_saved_output(recorder, "models.stitching.a__b.stitch_curves", _curves())  # in the summary already
    assert recorder.tables == ["tables/stitching_curves.csv"] and not recorder.histories and not recorder.metrics
    histories = curve_histories("stitch_a__b", _curves())
    assert len(histories) == 2 * 2 * 3  # kinds × layer pairs × (train, held-out loss and penalty)
    values, steps = histories["stitch_a__b.affine_ln.train_loss_1_1"]
    assert steps == [1, 2, 3, 4, 5, 6] and values == pytest.approx(3.0 - 0.1 * np.arange(1, 7))
    values, steps = histories["stitch_a__b.affine.heldout_penalty_0_0"]
    assert steps == [0, 3, 6] and values == pytest.approx([0.5, 0.2, -0.1])
    assert curve_histories("stitch_a__b", _curves().iloc[:0]) == {}  # identity only: nothing


def test_pipeline_options_add_heatmaps_and_training_sequences():
    from thinkalike.pipelines.stitching.pipeline import create_pipeline

    parameters = {
        "zoo": {"models": {"a": {}, "b": {}}},
        "stitching": {
            "pairs": {"explicit": [["a", "b"]]},
            "self_baselines": False,
            "train_source": "heldout",
            "eval_fraction": 0.3,
        },
    }
    plain = create_pipeline(RunSettings(parameters))
    assert "train_sequences" not in plain.inputs() and not any("heatmap" in d for d in plain.all_outputs())
    parameters["stitching"].update(layers="all", train_source="train_sequences")
    options = create_pipeline(RunSettings(parameters))
    assert "train_sequences" in options.inputs()
    # every pair output is read by the summary, which draws the figures: kedro-viz keeps them in the pairs' boxes
    assert options.outputs() == set(SUMMARY_OUTPUTS) | {"stitching_heatmaps", "stitching_heatmaps_plotly"}
    assert plain.outputs() == set(SUMMARY_OUTPUTS)
    (summary,) = [node for node in options.nodes if node.name.endswith("summarise_stitching")]
    assert {
        f"models.stitching.{pair}.{name}"
        for pair in ("a__b", "b__a")
        for name in ("stitch_phi", "stitch_phi_config", "stitch_eval_split")
    } <= set(summary.inputs)


def test_training_on_train_sequences_keeps_the_evaluation_split():
    from thinkalike.pipelines.schema import validate_section
    from thinkalike.pipelines.stitching.nodes import token_splits
    from thinkalike.pipelines.stitching.schema import StitchingParameters

    rng = np.random.default_rng(0)
    held = {"input_ids": rng.integers(0, 50, (40, 8)), "attention_mask": np.ones((40, 8), dtype=np.int64)}
    training = {"input_ids": rng.integers(50, 99, (100, 8)), "attention_mask": np.ones((100, 8), dtype=np.int64)}
    options = {"eval_fraction": 0.25, "split_seed": 3}
    own = token_splits(held, validate_section(StitchingParameters, {**options, "train_source": "heldout"}, "stitching"))
    corpus = token_splits(
        held,
        validate_section(
            StitchingParameters, {**options, "train_source": "train_sequences", "max_train_sequences": 60}, "stitching"
        ),
        training,
    )
    assert np.array_equal(own.eval_ids, corpus.eval_ids) and len(own.train) == 30 and len(corpus.train) == 60
    assert np.array_equal(corpus.train.input_ids.numpy(), training["input_ids"][:60])
    saved = corpus.eval_arrays()
    assert np.array_equal(saved["input_ids"], held["input_ids"][saved["sequence_ids"]])
    with pytest.raises(ValueError, match="stitching.train_source"):
        token_splits(held, validate_section(StitchingParameters, {"train_source": "everything"}, "stitching"))


def test_an_evaluation_fraction_of_one_evaluates_every_held_out_sequence():
    from thinkalike.pipelines.schema import validate_section
    from thinkalike.pipelines.stitching.nodes import token_splits
    from thinkalike.pipelines.stitching.schema import StitchingParameters

    rng = np.random.default_rng(1)
    held = {"input_ids": rng.integers(0, 50, (40, 8)), "attention_mask": np.ones((40, 8), dtype=np.int64)}
    training = {"input_ids": rng.integers(50, 99, (100, 8)), "attention_mask": np.ones((100, 8), dtype=np.int64)}
    options = {"eval_fraction": 1.0, "train_source": "train_sequences"}
    split = token_splits(held, validate_section(StitchingParameters, options, "stitching"), training)
    assert np.array_equal(split.eval_ids, np.arange(40)) and len(split.train) == 100
    assert np.array_equal(split.eval_arrays()["input_ids"], held["input_ids"])
    with pytest.raises(ParameterError, match=r"^stitching\.eval_fraction: 1 .*train_source: heldout"):
        validate_stitching({"eval_fraction": 1.0, "train_source": "heldout"}, [])


def test_the_gpu_environment_validates_with_the_papers_schedule_and_a_larger_nli():
    from thinkalike.pipelines.parameters import configured_parameters
    from thinkalike.pipelines.stitching.pipeline import create_pipeline
    from thinkalike.pipelines.validation import validate_parameters

    parameters = configured_parameters(PROJECT_ROOT, "gpu")
    validate_parameters(parameters)
    settings = parameters["stitching"]["settings"]
    assert (settings["steps"], settings["warmup_steps"]) == (2000, 200)
    assert settings["tokens_per_step"] > 2048 and parameters["stitching"]["train_source"] == "train_sequences"
    base = configured_parameters(PROJECT_ROOT, None)
    changed = {"stitching", "nli"}  # all it changes; nli at larger sizes
    assert {key: value for key, value in parameters.items() if key not in changed} == {
        key: value for key, value in base.items() if key not in changed
    }
    nli, base_nli = parameters["nli"], base["nli"]
    assert nli["n_copies"] > base_nli["n_copies"] and nli["finetune"]["steps"] > base_nli["finetune"]["steps"]
    assert nli["stitching"]["max_pairs"] is None and nli["pairs"]["n_train"] > base_nli["pairs"]["n_train"]
    assert "train_sequences" in create_pipeline(RunSettings(parameters)).inputs()


# ---------------------------------------------------------------- the run's saved φ's, figures and MLflow
def test_saved_phis_reevaluate_to_the_tables_losses(stitched):
    import json

    import torch

    from thinkalike.language.packing import special_token_ids
    from thinkalike.pipelines.stitching.nodes import zoo_handle
    from thinkalike.pipelines.stitching.pipeline import model_inputs
    from thinkalike.stitching import StitchSettings, evaluate_saved, unpack_stitch

    table = stitched.load(f"{NAMESPACE}.stitch_table")
    state = stitched.load(f"{NAMESPACE}.stitch_phi")
    config = stitched.load(f"{NAMESPACE}.stitch_phi_config")
    split = stitched.load(f"{NAMESPACE}.stitch_eval_split")
    held = stitched.load("heldout_sequences")
    assert np.array_equal(split["input_ids"], np.asarray(held["input_ids"])[split["sequence_ids"]])
    assert list(split["train_sequence_ids"]) == list(range(24))  # conf/test: the first 24 train_sequences
    assert (table["train_source"] == "train_sequences").all()
    assert int(split["attention_mask"].sum()) == table["eval_tokens"].iloc[0]
    assert all(isinstance(value, torch.Tensor) for value in state.values())
    parameters = validate_stitching(stitched.load("parameters")["stitching"], list(PAIR))
    tokenizer = stitched.load("tokenizer")
    # the scored targets: every real next token that is not a special token of the tokenizer
    special = sorted(special_token_ids(tokenizer))
    assert config["excluded_target_ids"] == special and tokenizer.unk_token_id not in special
    ids, mask = split["input_ids"], split["attention_mask"]
    expected = ((mask[:, 1:] == 1) & ~np.isin(ids[:, 1:], special)).sum()
    assert int(split["scored_targets"].sum()) == expected == table["n_targets"].iloc[0]
    f, g = (
        zoo_handle(model, *[stitched.load(name) for name in model_inputs(model)], tokenizer, parameters)
        for model in PAIR
    )
    settings = StitchSettings.model_validate(config["settings"])
    assert settings.exclude_special_targets and config["phi_seeds"] == [0, 1]
    assert len(table) == 4  # identity and affine_ln at layers (0, 0) and (1, 1); affine_ln twice, one per φ seed
    assert set(config["stitches"]) == {
        f"l{layer}_m{layer}{seed}.{kind}"
        for layer in (0, 1)
        for kind, seeds in (("identity", [""]), ("affine_ln", ["", "_s1"]))
        for seed in seeds
    }
    phis = stitched.load("stitching_phis")  # the summary's list of every saved φ, every seed
    assert len(phis) == stitched.load("stitching_penalties")["n_phi_seeds"].sum()
    assert phis["eval_split_digest"].nunique() == 1
    own = phis[(phis["model_f"] == PAIR[0]) & (phis["model_g"] == PAIR[1])]
    assert sorted(own.loc[own["stitch"] == "affine_ln", "phi_seed"]) == [0, 0, 1, 1]
    own = own.set_index(["layer_f", "layer_g", "stitch", "phi_seed"])
    assert (own["n_eval_sequences"] == len(split["sequence_ids"])).all()
    for (_, _, kind, _), row in own.iterrows():  # identity: nothing trained; affine_ln: W, b and LN
        width = 0 if kind == "identity" else f.d_model * g.d_model + g.d_model
        assert row["n_parameters"] >= width and (kind != "identity" or row["n_parameters"] == 0)
    for row in table.itertuples():
        for seed, penalty in zip(json.loads(row.phi_seeds), json.loads(row.penalty_seeds)):
            phi_config, phi_state = unpack_stitch(state, config, row.layer_f, row.layer_g, row.stitch, seed)
            again = evaluate_saved(
                phi_config,
                phi_state,
                f,
                g,
                row.layer_f,
                row.layer_g,
                split["input_ids"],
                settings,
                eval_mask=split["attention_mask"],
                special_ids=config["excluded_target_ids"],
            )
            # measured: equal to the last bit on CPU (same batches in the same order)
            assert again.penalty == pytest.approx(penalty, abs=1e-6) and again.n_targets == row.n_targets
            if seed == 0:
                assert again.stitched_loss == pytest.approx(row.loss, abs=1e-6)
                assert again.g_loss == pytest.approx(row.g_loss, abs=1e-6)
                assert again.penalty == pytest.approx(row.penalty, abs=1e-6)
                assert (again.penalty_ci_low, again.penalty_ci_high) == pytest.approx(
                    (row.ci_low, row.ci_high), abs=1e-6
                )


def test_learning_curves_and_plotly_figures_are_saved_and_curves_logged(stitched, tiny_project):
    project, _ = tiny_project
    folder = max((project / "data/08_reporting").glob("stitching_curves_figures/*/stitching_curves_figures"))
    assert {path.name for path in folder.iterdir()} == {f"{f}__{g}.png" for f in PAIR for g in PAIR}
    figure = stitched.load("stitching_figure_plotly")
    assert {trace.name for trace in figure.data} >= {f"{PAIR[0]} → {PAIR[1]} (affine_ln)"}
    from tests.pipelines.test_run_timings import mlflow_runs

    client, runs = mlflow_runs(project)
    run = runs[-1].info.run_id  # the stitching run of the fixture, the latest
    with tempfile.TemporaryDirectory() as folder:
        curves = pd.read_csv(client.download_artifacts(run, "tables/stitching_curves.csv", folder))
    one = curves[
        (curves["f"] == PAIR[0]) & (curves["g"] == PAIR[1]) & (curves["kind"] == "affine_ln") & (curves["layer_f"] == 1)
    ]
    one = one[(one["layer_g"] == 1) & (one["phi_seed"] == one["phi_seed"].min())].sort_values("step")
    steps = one.dropna(subset=["train_loss"])["step"].tolist()
    heldout = one.dropna(subset=["heldout_loss"])["step"].tolist()
    assert steps == [1, 2, 3, 4] and heldout == [0, 2, 4]  # conf/test: 4 steps, held-out every 2
