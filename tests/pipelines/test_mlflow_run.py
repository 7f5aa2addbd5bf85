"""The tiny run's MLflow record (the suite's shared run, ``tiny_project``): few metrics, each in a named group within
its budget (:data:`thinkalike.output_rules.GROUP_BUDGETS`, :data:`~thinkalike.output_rules.METRIC_BUDGET`), one per
claim of the run; and nothing lost: every number a rule computed besides them is in a logged table."""

from __future__ import annotations

import json
import tempfile
from collections import Counter

import pandas as pd

from tests.pipelines.test_run_timings import mlflow_runs
from thinkalike.output_rules import DETAILS_ARTIFACT, GROUP_BUDGETS, METRIC_BUDGET, metric_group


def _first_run(project):
    client, runs = mlflow_runs(project)
    return client, runs[0]  # the shared run came first


def test_the_tiny_run_logs_few_metrics_in_named_groups_within_their_budgets(tiny_project_as_run):
    client, run = _first_run(tiny_project_as_run)
    metrics = run.data.metrics
    groups = Counter(metric_group(name) for name in metrics)
    print(f"the tiny run logs {len(metrics)} metrics: {dict(sorted(groups.items()))}")
    assert "" not in groups, sorted(name for name in metrics if not metric_group(name))
    assert set(groups) <= set(GROUP_BUDGETS), groups
    assert all(count <= GROUP_BUDGETS[group] for group, count in groups.items()), groups
    assert len(metrics) <= METRIC_BUDGET
    assert {"scorecard", "cost", "zoo", "corpus", "cka", "measures", "stitching", "mlem", "embedding", "nli"} <= set(
        groups
    )
    # no claim is a metric (descriptive: no verdict rests on them), and no scorecard verdict (one run has none)
    assert not any(name.startswith("claims/") for name in metrics)
    assert all(
        name.count("/") == 1 and name.rsplit(".", 1)[1].isdigit() for name in metrics if name.startswith("scorecard/")
    )
    # the run's cost: per pipeline and for the run
    assert {"cost/total.wall_s", "cost/total.cpu_s", "cost/total.peak_rss_mb", "cost/cka.wall_s"} <= set(metrics)
    # the run's description is its scorecard in a few lines: estimates, no verdict
    description = run.data.tags["mlflow.note.content"]
    assert description.startswith("**Scorecard of this run**") and "no verdict" in description
    assert 2 <= len(description.splitlines()) <= 20
    assert not any(word in description for word in ("reproduced", "not testable", "inconclusive"))


def test_every_number_besides_the_metrics_is_in_a_logged_table(tiny_project_as_run):
    client, run = _first_run(tiny_project_as_run)
    tables = {artifact.path for artifact in client.list_artifacts(run.info.run_id, "tables")}
    # the per-cell tables, named after their catalog datasets: every layer pair, stitch, MLEM feature × layer
    assert {
        "tables/cka.gelu_1l__neox_xs.cka_table.csv",
        "tables/cka_distances.csv",
        "tables/stitching.gelu_1l__neox_xs.stitch_table.csv",
        "tables/stitching_penalties.csv",
        "tables/stitching_curves.csv",
        "tables/mlem.gelu_1l.mlem_profile.csv",
        "tables/mlem_profiles.csv",
        "tables/nli.copy_00.accuracy.csv",
        "tables/nli.copy_00.training_curve.csv",
        "tables/run_timings.csv",
        DETAILS_ARTIFACT,
    } <= tables, tables
    with tempfile.TemporaryDirectory() as folder:
        details = pd.read_csv(client.download_artifacts(run.info.run_id, DETAILS_ARTIFACT, folder))
    assert list(details.columns) == ["dataset", "name", "value"] and not details["name"].duplicated().any()
    names = set(details["name"])
    # the metric names of the runs before the groups, each with its number
    for name in (
        "cka.gelu_1l__neox_xs.mean_matched_cka",
        "cka.gelu_1l__neox_xs.procrustes.model_distance",
        "stitching.gelu_1l__neox_xs.affine_ln.penalty_1_1",
        "mlem.gelu_1l.spearman_heldout_layer_0",
        "nli.copy_00.test_all_all",
        "nli.heuristic_baseline.test_all_all",
        "embedding.gelu_1l.condition_number",
        "timing.total.seconds",
        "timing.zoo.nodes",
    ):
        assert name in names, name
    assert not names & set(run.data.metrics)  # a number is a metric or a detail, never both


def test_the_runs_params_are_what_it_changed_and_every_setting_is_an_artifact(tiny_project_as_run):
    """Params: the settings that differ from conf/base (the tiny run's conf/test overrides) and how many did not;
    every setting, flattened once, in ``settings/parameters.json``."""
    from thinkalike.pipelines.parameters import configured_parameters
    from thinkalike.run_record.tracking import SETTINGS_ARTIFACT, flatten_parameters

    client, run = _first_run(tiny_project_as_run)
    params = dict(run.data.params)
    used = flatten_parameters(configured_parameters(tiny_project_as_run, "test"))
    base = flatten_parameters(configured_parameters(tiny_project_as_run, "base"))
    changed = {key: value for key, value in used.items() if base.get(key) != value}
    assert changed and {key: value for key, value in params.items() if key != "settings.unchanged"} == changed
    assert int(params["settings.unchanged"]) == len(used) - len(changed) > 0
    local = client.download_artifacts(run.info.run_id, SETTINGS_ARTIFACT, tempfile.mkdtemp())
    with open(local, encoding="utf-8") as saved:
        assert json.load(saved) == used
