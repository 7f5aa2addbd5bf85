"""What MLflow gets from saved outputs: each pipeline registers its rules (thinkalike.output_rules), and on every
dataset the configured pipelines write no two pipelines' rules claim the same output."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest
from matplotlib.figure import Figure

from tests.pipelines.conftest import PROJECT_ROOT
from thinkalike.hooks import record_saved_output
from thinkalike.output_rules import (
    GENERIC_RULES,
    GROUP_BUDGETS,
    OutputRule,
    SavedOutput,
    apply_rules,
    matching_rules,
    metric_group,
    named,
)
from thinkalike.pipelines.builders import all_output_rules, build_pipelines
from thinkalike.pipelines.namespaces import MODELS
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.specs import pipeline_specs


class Collected:
    """A recorder that keeps what it was asked to log."""

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.histories: dict[str, tuple[list[float], list[int]]] = {}
        self.artifacts: list[str] = []
        self.details: dict[str, float] = {}

    def log_metrics(self, metrics, step=0, what="metrics"):
        self.metrics.update(metrics)

    def log_metric_history(self, histories, what):
        self.histories.update(histories)

    def log_figure(self, figure, artifact_file):
        self.artifacts.append(artifact_file)

    def log_table(self, table, artifact_file):
        self.artifacts.append(artifact_file)

    def set_description(self, text):
        self.description = text

    def log_text(self, text, artifact_file):
        self.artifacts.append(artifact_file)

    def log_details(self, metrics, dataset):
        self.details.update(metrics)


def _written(env: str | None) -> set[str]:
    """Every dataset the pipelines of ``env`` write, and the run's timing table (saved by a hook)."""
    built = build_pipelines(configured_parameters(PROJECT_ROOT, env))
    return {name for pipeline in built.values() for name in pipeline.all_outputs()} | {"run_timings"}


@pytest.mark.parametrize("env", [None, "test"])
def test_no_output_is_claimed_by_two_pipelines(env):
    owners = {rule: name for name, spec in pipeline_specs().items() for rule in spec.rules}
    claimed = 0
    for name in sorted(_written(env)):
        for data in (pd.DataFrame({"model_a": ["a"], "model_b": ["a"]}), {"x": 1}, "text"):
            output = SavedOutput(name.removeprefix(f"{MODELS}."), data)
            pipelines = {owners[rule] for rule in matching_rules(all_output_rules(), output) if rule in owners}
            assert len(pipelines) <= 1, (name, pipelines)
            claimed += bool(pipelines)
    assert claimed > 20  # the rules do match the configured outputs (a table of each pipeline at least)


def test_every_pipeline_but_the_plain_ones_registers_rules():
    assert {name for name, spec in pipeline_specs().items() if not spec.rules} == {"activations"}  # stores, indexes


def test_figures_first_then_the_first_matching_rule_only():
    collected = Collected()
    figure = Figure()
    record_saved_output(collected, "models.cka.a__b.stitch_table", figure)  # a figure, whatever its name
    assert collected.artifacts == ["figures/cka.a__b.stitch_table.png"]
    first = named(["x"], lambda recorder, output: recorder.log_text("first", "first.txt"))
    second = named(["x"], lambda recorder, output: recorder.log_text("second", "second.txt"))
    collected = Collected()
    assert apply_rules((first, second), collected, "x", None) and collected.artifacts == ["first.txt"]
    assert not apply_rules((first, second), collected, "y", None)


def test_each_pipelines_outputs_give_grouped_metrics_and_the_rest_as_tables_and_details():
    """The zoo's curves are ``zoo/`` histories, the NLI copies' only tables; per-cell numbers are tables and details
    under the metric names they had before the groups (nothing lost)."""
    collected = Collected()
    curve = pd.DataFrame({"step": [0, 50], "train_loss": [5.0, 3.0], "heldout_loss": [float("nan"), 3.2]})
    record_saved_output(collected, "models.gelu_2l.training_curve", curve)
    record_saved_output(collected, "models.nli.copy_03.training_curve", curve)
    record_saved_output(collected, "models.nli.encoder.training_curve", curve)
    assert collected.histories["zoo/gelu_2l.train_loss"] == ([5.0, 3.0], [0, 50])
    assert collected.histories["zoo/gelu_2l.heldout_loss"] == ([3.2], [50])
    assert "nli/encoder.train_loss" in collected.histories and len(collected.histories) == 4  # no copy's curve
    assert "tables/nli.copy_03.training_curve.csv" in collected.artifacts
    record_saved_output(collected, "corpus_statistics", {"n_sentences": 8, "name": "x"})
    assert collected.metrics == {"corpus/n_sentences": 8.0}
    penalties = pd.DataFrame({"stitch": ["affine"], "layer_f": [1], "layer_g": [1], "penalty": [0.25]})
    record_saved_output(collected, "models.stitching.a__b.stitch_table", penalties)
    assert collected.details["stitching.a__b.affine.penalty_1_1"] == 0.25
    assert "tables/stitching.a__b.stitch_table.csv" in collected.artifacts
    summary = pd.DataFrame(
        {"model_f": ["a", "a", "a"], "model_g": ["b", "b", "a"], "stitch": ["affine"] * 3, "penalty": [0.2, 0.4, 0.1]}
    )
    record_saved_output(collected, "stitching_penalties", summary)
    assert collected.metrics["stitching/affine.penalty_between"] == pytest.approx(0.3)
    assert collected.metrics["stitching/affine.penalty_self"] == pytest.approx(0.1)
    accuracy = pd.DataFrame(
        {"model": ["copy_00"], "split": ["ood"], "subcase": ["all"], "label": ["non_entailed"], "accuracy": [0.5]}
    )
    record_saved_output(collected, "models.nli.copy_00.accuracy", accuracy)
    assert collected.details["nli.copy_00.ood_all_non_entailed"] == 0.5
    assert "tables/nli.copy_00.accuracy.csv" in collected.artifacts
    for name in ("models.nli.copy_00.predictions", "evaluation_index", "models.gelu_2l.model_config"):
        before = (dict(collected.metrics), list(collected.artifacts), dict(collected.details))
        record_saved_output(collected, name, pd.DataFrame({"a": [1]}))  # kept in the catalog only
        assert (collected.metrics, collected.artifacts, collected.details) == before, name
    record_saved_output(collected, "scaling_members", pd.DataFrame({"a": [1]}))
    record_saved_output(collected, "report", "<html></html>")
    record_saved_output(collected, "models.nli.report", "# nli")
    assert collected.artifacts[-3:] == ["tables/scaling_members.csv", "reports/report.html", "reports/nli_report.md"]
    assert all(metric_group(name) in GROUP_BUDGETS for name in [*collected.metrics, *collected.histories])


def test_the_run_timings_give_the_cost_metrics_and_every_other_total_as_details():
    from tests.test_run_record_clock import FakeMachine, scripted_run
    from thinkalike.run_record.clock import cost_metrics, timing_metrics

    table = scripted_run(FakeMachine()).table()
    collected = Collected()
    record_saved_output(collected, "run_timings", table)
    assert collected.metrics == cost_metrics(table) and {metric_group(name) for name in collected.metrics} == {"cost"}
    assert collected.details == timing_metrics(table)  # every total, under its old name
    assert collected.artifacts == ["tables/run_timings.csv"]


def test_a_rule_says_what_it_matches():
    rules = all_output_rules()
    assert all(isinstance(rule, OutputRule) and rule.description for rule in rules)
    assert rules[: len(GENERIC_RULES)] == GENERIC_RULES


def test_a_runs_claims_reach_mlflow_as_an_artifact_not_as_metrics():
    """The report's ``run_claims`` reach MLflow as ``reports/claims.json`` only: they are descriptive (no verdict
    rests on them), and a run's metrics are its estimates."""
    from thinkalike.run_record.tracking import DeferredRecorder

    recorder = DeferredRecorder()
    claims = {
        "claims": [
            {"id": "cka.solu_gelu_below_replicas", "margin": 0.021},
            {"id": "nli.stitching_groups_diverge", "margin": -0.3},
            {"id": "mlem.runner_up.x", "margin": None},
        ]
    }
    record_saved_output(recorder, "run_claims", claims)
    metrics = [args[0] for name, args in recorder.calls if name == "log_metrics"]
    assert metrics == []
    assert [args[1] for name, args in recorder.calls if name == "log_text"] == ["reports/claims.json"]


def test_a_run_is_named_and_tagged_for_what_ran_and_where(monkeypatch, tmp_path):
    from thinkalike.hooks import run_name, run_tags
    from thinkalike.run_record.tracking import REPLICATE_GROUP_TAG, REPLICATE_GROUP_VARIABLE, short_commit

    replicate = {"pipeline_names": None, "env": "replicates", "runtime_params": {"replicate": 1}, "runner": None}
    assert run_name(replicate, "8d02eac") == "default · replicates · replicate 1 · 8d02eac"
    assert run_name({"pipeline_names": ["cka", "stitching"], "env": "test"}, "abc1234+dirty") == (
        "cka+stitching · test · abc1234+dirty"
    )
    monkeypatch.setenv(REPLICATE_GROUP_VARIABLE, "/work/data/replicates")
    tags = run_tags(replicate, tmp_path)  # not a repository: the installed package's commit
    assert tags["replicate"] == "1" and tags[REPLICATE_GROUP_TAG] == "/work/data/replicates"
    assert tags["kedro_env"] == "replicates" and tags["runner"] == "SequentialRunner"
    assert {"machine.cpu", "machine.cores", "machine.gpu", "git_commit", "git_dirty"} <= set(tags)
    assert short_commit({"git_commit": "8d02eacee89a", "git_dirty": "false"}) == "8d02eac"
    monkeypatch.delenv(REPLICATE_GROUP_VARIABLE)
    assert REPLICATE_GROUP_TAG not in run_tags({"env": "test"}, tmp_path)
