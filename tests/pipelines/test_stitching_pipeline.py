"""The stitching pipeline: its plan (pairs, directions, layer grids) and its outputs on the tiny project."""

import numpy as np
import pytest

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.pipelines.schema import ParameterError, validate_stitching
from thinkalike.pipelines.stitching.plan import layer_grid, ordered_pairs

PAIR = ("gelu_1l", "neox_xs")


def test_ordered_pairs_add_reverse_and_self_baselines_once():
    assert ordered_pairs([("a", "b"), ("b", "c")]) == [("a", "b"), ("b", "a"), ("a", "a"), ("b", "b"), ("b", "c"),
                                                       ("c", "b"), ("c", "c")]
    assert ordered_pairs([("a", "b")], "forward", self_baselines=False) == [("a", "b")]


def test_layer_grids():
    assert layer_grid("diagonal", 2, 3) == [(0, 0), (1, 1), (2, 2)]
    assert layer_grid("relative", 2, 2) == layer_grid("diagonal", 2, 2)
    assert layer_grid("relative", 1, 3) == [(0, 0), (1, 3)]
    assert len(layer_grid("all", 1, 2)) == 6
    with pytest.raises(ValueError, match="stitching.layers"):
        layer_grid("diagonals", 1, 1)


@pytest.mark.parametrize(("values", "message"), [
    ({"kinds": ["rotation"]}, r"stitching\.kinds\.0"),
    ({"layers": "diag"}, r"stitching\.layers"),
    ({"directions": "back"}, r"stitching\.directions"),
    ({"settings": {"stepz": 3}}, r"stitching\.settings\.stepz: unknown parameter"),
    ({"pairs": {"explicit": [["a", "ghost"]]}}, r"stitching\.pairs: .*\['ghost'\] that are not zoo models"),
])
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
    assert set(zip(table["model_f"], table["model_g"])) == {PAIR, PAIR[::-1], (PAIR[0], PAIR[0]),
                                                           (PAIR[1], PAIR[1])}
    assert set(table["stitch"]) == {"identity", "affine_ln"}
    assert table[["loss", "g_loss", "penalty", "ci_low", "ci_high"]].notna().all().all()
    assert (table["train_tokens"] > 0).all() and (table["eval_tokens"] > 0).all()
    assert list(table.columns[:14]) == ["model_f", "layer_f", "model_g", "layer_g", "stitch", "loss", "ci_low",
                                        "ci_high", "g_loss", "f_loss", "penalty", "steps", "train_tokens",
                                        "eval_tokens"]
    own = stitched.load(f"stitch_{PAIR[0]}__{PAIR[1]}.stitch_table")
    assert set(own["model_f"]) == {PAIR[0]} and set(own["model_g"]) == {PAIR[1]}


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


def test_bad_stitch_setting_is_named(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError, match=r"stitching\.settings"):
        run_project(project, runtime_params={"stitching": {"settings": {"warmup_steps": 10, "steps": 5}}})
