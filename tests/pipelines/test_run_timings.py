"""Every kedro run saves its run_timings table through the catalog and logs it to its MLflow run.

The default run is the suite's shared one (``tiny_project``); the partial and failed runs use a
fresh project copy (corpus only, seconds). Nothing here asserts how long anything takes.
"""

import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from mlflow import MlflowClient

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.output_rules import DETAILS_ARTIFACT
from thinkalike.pipeline_registry import build_pipelines
from thinkalike.pipelines.corpus import nodes as corpus_nodes
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.specs import pipeline_specs
from thinkalike.run_record.clock import COLUMNS, START_ROW, pipeline_totals
from thinkalike.run_record.timing_hooks import pipeline_membership

TIMINGS = Path("data/08_reporting/run_timings.parquet")


def mlflow_runs(project: Path):
    """The project's MLflow runs, oldest first."""
    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("thinkalike")
    return client, client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])


def logged_numbers(client: MlflowClient, run) -> dict[str, float]:
    """A run's metrics and the numbers of its details table (``tables/metric_details.csv``: every number a rule
    computed that is not a run metric, by the name it had as a metric before the metrics were grouped)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        try:
            path = client.download_artifacts(run.info.run_id, DETAILS_ARTIFACT, folder)
        except OSError:  # a run without details
            return dict(run.data.metrics)
        details = pd.read_csv(path)
    return {**run.data.metrics, **dict(zip(details["name"], details["value"].astype(float)))}


def saved_versions(project: Path) -> list[str]:
    """The saved run_timings versions, oldest first (a version is its run's Kedro session id, a timestamp)."""
    return sorted(path.parent.name for path in (project / TIMINGS).glob("*/run_timings.parquet"))


def saved_table(project: Path, version: str) -> pd.DataFrame:
    return pd.read_parquet(project / TIMINGS / version / "run_timings.parquet")


def node_rows(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["node"] != START_ROW]


def test_the_default_run_saves_a_row_per_node_and_its_totals_go_to_mlflow(tiny_project):
    project, _ = tiny_project
    client, runs = mlflow_runs(project)
    run, session = runs[0], saved_versions(project)[0]  # the shared run came first; other tests add runs later
    assert re.fullmatch(r"default · test · [0-9a-f]{7}(\+dirty)?", run.info.run_name), run.info.run_name
    table = saved_table(project, session)
    assert tuple(table.columns) == COLUMNS

    default = build_pipelines(configured_parameters(project, "test"))
    nodes = node_rows(table)
    assert sorted(nodes["node"]) == sorted(node.name for node in default["__default__"].nodes)  # once each
    membership = pipeline_membership(default)
    assert dict(zip(nodes["node"], nodes["pipeline"])) == {name: membership[name] for name in nodes["node"]}
    # every registered pipeline with nodes ran and is named (conf/test has no GPT-NeoX family: scaling is empty)
    assert set(nodes["pipeline"]) == {name for name in pipeline_specs() if default[name].nodes}
    assert not default["scaling"].nodes
    assert set(table["status"]) == {"completed"}
    assert (table[["seconds", "cpu_seconds", "load_seconds", "save_seconds", "other_seconds"]] >= 0).all().all()
    assert (nodes["peak_rss_mb"] > 0).all() and (nodes["peak_rss_growth_mb"] >= 0).all()
    assert nodes["load_seconds"].sum() > 0 and nodes["save_seconds"].sum() > 0

    # the rows account for the whole run ...
    run_seconds = table["run_seconds"].iloc[0]
    assert table["span_seconds"].sum() == pytest.approx(run_seconds, rel=1e-9)
    # ... and the run's wall time agrees with clocks outside the hooks: Kedro's session id (a timestamp
    # taken when the session was created) to the end MLflow recorded, which spans a little more than the
    # run itself (the context's creation before it, the table's save and logging after it)
    session_start = datetime.strptime(session, "%Y-%m-%dT%H.%M.%S.%fZ").replace(tzinfo=UTC).timestamp()
    outside = run.info.end_time / 1000 - session_start
    # the part outside the run is fixed work (building and validating the pipelines, saving the table), not a
    # share of the run: on the tiny run it measured 1.4–2.1 s of ~40 s, so the slack is absolute as well
    assert outside - max(0.05 * outside, 5.0) <= run_seconds <= outside
    # MLflow's run opens inside the run's clock; after the clock stops, MLflow's run still records the table's save
    # and the report's timings section (rewritten from the saved table and logged again): fixed work, the same 5 s
    assert run_seconds >= (run.info.end_time - run.info.start_time) / 1000 - 5.0

    metrics = logged_numbers(client, run)
    assert metrics["cost/total.wall_s"] == pytest.approx(run_seconds)
    totals = pipeline_totals(table).set_index("pipeline")
    ran = [pipeline for pipeline in pipeline_specs() if default[pipeline].nodes]
    for pipeline in ran:
        assert metrics[f"timing.{pipeline}.seconds"] == pytest.approx(totals.loc[pipeline, "seconds"])
        assert metrics[f"timing.{pipeline}.nodes"] == (nodes["pipeline"] == pipeline).sum()
    assert metrics["timing.total.seconds"] == pytest.approx(run_seconds)
    assert sum(metrics[f"timing.{pipeline}.seconds"] for pipeline in ran) + metrics[
        "timing.start.seconds"
    ] == pytest.approx(run_seconds)
    assert "tables/run_timings.csv" in {artifact.path for artifact in client.list_artifacts(run.info.run_id, "tables")}


def test_partial_and_failed_runs_record_what_ran(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    run_project(project, pipeline_names=["corpus"])
    run_project(project, pipeline_names=["corpus"], only_missing_outputs=True)  # complete: no node runs

    def broken(*args, **kwargs):
        raise RuntimeError("tokenizer broke")

    monkeypatch.setattr(corpus_nodes, "fit_tokenizer", broken)  # the pipelines are built when the session starts
    with pytest.raises(RuntimeError, match="tokenizer broke"):
        run_project(project, pipeline_names=["corpus"])

    client, runs = mlflow_runs(project)
    partial, resumed, failed = (
        SimpleNamespace(info=run.info, data=SimpleNamespace(metrics=logged_numbers(client, run))) for run in runs
    )
    corpus = build_pipelines(configured_parameters(project, "test"))["corpus"]
    order = [node.name for node in corpus.nodes]

    assert len(saved_versions(project)) == 2
    table = saved_table(project, saved_versions(project)[0])
    assert list(node_rows(table)["node"]) == order  # only the corpus, in the order it ran
    assert set(table["pipeline"]) == {"(run)", "corpus"} and set(table["status"]) == {"completed"}
    assert partial.data.metrics["timing.corpus.nodes"] == len(order)
    assert not any(name.startswith(("timing.zoo", "timing.cka")) for name in partial.data.metrics)

    # a run in which nothing ran saves no version; MLflow still gets its (start) and total
    assert {"timing.start.seconds", "timing.total.seconds"} <= set(resumed.data.metrics)
    assert not any(name.startswith("timing.corpus") for name in resumed.data.metrics)

    assert failed.info.status == "FAILED"
    table = saved_table(project, saved_versions(project)[1])
    ran = list(node_rows(table)["node"])
    assert ran == order[: order.index("corpus.fit_tokenizer") + 1]  # nothing after the failed node
    assert dict(zip(table["node"], table["status"]))["corpus.fit_tokenizer"] == "failed"
    assert (node_rows(table)["status"] == "failed").sum() == 1
    assert table["span_seconds"].sum() == pytest.approx(table["run_seconds"].iloc[0], rel=1e-9)
    assert failed.data.metrics["timing.corpus.failed"] == 1
    assert "tables/run_timings.csv" in {
        artifact.path for artifact in client.list_artifacts(failed.info.run_id, "tables")
    }
