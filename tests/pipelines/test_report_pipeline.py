"""The ``report`` pipeline: after the suite's default run its report has a section per experiment and the run's own
timings, rendered into it from the saved ``run_timings`` table once the run ended (and logged to MLflow so); run alone
in a project where nothing was saved, it still writes a report that names every missing input; a later partial run,
or a run whose report node fails, leaves the report as it was. The page in a real browser:
tests/pipelines/test_report_browser.py."""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

import pandas as pd
import pytest
from kedro.io import DataCatalog

from tests.pipelines.conftest import make_project_copy, run_project
from tests.pipelines.test_run_timings import mlflow_runs
from tests.reports.test_report_page import planted_report, planted_timings
from thinkalike.pipelines.report import nodes as report_nodes
from thinkalike.pipelines.report.latest import LatestReportHooks, publish_latest
from thinkalike.pipelines.report.timings import add_run_timings
from thinkalike.pipelines.specs import report_outline
from thinkalike.reports.run_timings import (
    END_MARKER,
    START_MARKER,
    embedded_findings,
    pipeline_table,
)
from thinkalike.run_record.clock import TOTAL, pipeline_totals

REPORTS = Path("data/08_reporting/report.html")
LATEST = Path("data/08_reporting/latest/report.html")  # the newest report's stable path (README, docs/results.md)
TIMINGS = Path("data/08_reporting/run_timings.parquet")
PLOTLY_JS = re.compile(r"<script type='text/javascript'>/\*\*\n\* plotly\.js v.*?</script>", re.DOTALL)


def latest_report_path(project: Path) -> Path:
    """The latest saved version of the project's report."""
    versions = sorted((project / REPORTS).iterdir())
    return versions[-1] / "report.html"


def page_text(html: str) -> str:
    """The report without its copy of plotly.js (4.5 MB of code whose strings would match what the tests look for,
    and which pytest would diff when an assertion about the page fails)."""
    return PLOTLY_JS.sub("<script>plotly.js</script>", html)


def _latest(project: Path) -> str:
    return page_text(latest_report_path(project).read_text(encoding="utf-8"))


def _versions(project: Path, folder: Path) -> list[str]:
    return sorted(path.name for path in (project / folder).iterdir())


def _section(html: str, key: str) -> str:
    start = html.index(f"<section id='{key}'")
    return html[start : html.index("</section>", start)]


def _index(html: str) -> dict[str, tuple[str, str]]:
    """The report's index of the run's other outputs: dataset → (pipeline, what it holds)."""
    section = html[html.index("<h2>Every other output of the run</h2>") :]
    rows = re.findall(r"<tr><td[^>]*><code>(.*?)</code></td><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td></tr>", section)
    return {name: (pipeline, holds) for name, pipeline, holds in rows}


def test_the_default_run_writes_the_report_of_every_experiment(tiny_project_as_run):
    project = tiny_project_as_run
    html = _latest(project)
    assert html.count("data:image/png;base64,") >= 5  # figures embedded, the file stands alone
    assert "<strong>One run</strong>" in html
    for experiment in report_outline().experiments:
        assert html.count(f"<section id='{experiment.key}' class='experiment'>") == 1
        assert f"<a href='#{experiment.key}'>" in html  # in the table of contents
    assert "Scaling family: not in these outputs" in html  # conf/test has no GPT-NeoX family
    assert html.count("Missing inputs") == html.count("Not in these outputs: their pipelines") == 0  # all could run
    assert "<p><code>gelu_1l</code> layer 0 is the odd one out" in _section(html, "mlem")  # a claim of this run
    # the index: every summary output the findings do not quote, with what it holds
    index = _index(html)
    assert index["cka_heatmaps"][0] == "cka" and index["cka_heatmaps"][1].startswith("folder of ")
    assert index["stitching_curves"][0] == "stitching" and index["stitching_curves"][1].startswith("table, ")
    assert "never saved" not in {holds for _, holds in index.values()}
    # issue 39: conf/test draws 48 rows of 32-wide layers, so the CCA family compares the top 4 components
    assert "`mean_cca`, `svcca` and `pwcca` compared the top 4 principal components of 32 dimensions (48 rows".replace(
        "`", ""
    ) in re.sub(r"</?code>", "", _section(html, "measures"))


def test_the_run_timings_are_rendered_into_the_report_after_the_run_and_logged_again(tiny_project_as_run, tmp_path):
    project = tiny_project_as_run
    path = latest_report_path(project)
    html = path.read_text(encoding="utf-8")
    version = path.parent.name
    assert len(PLOTLY_JS.findall(html)) == 1
    assert version in _versions(project, TIMINGS)  # saved by the same run, at its version
    table = pd.read_parquet(project / TIMINGS / version / "run_timings.parquet")
    totals = pipeline_totals(table)
    timing = embedded_findings(html)["timing"]
    assert timing["total_seconds"] == pytest.approx(
        float(totals.loc[totals["pipeline"] == TOTAL, "seconds"].iloc[0]), abs=1e-3
    )
    assert set(timing["pipelines"]) == set(table["pipeline"]) - {"(run)"}
    assert "report" in timing["pipelines"]  # the report's own node is timed in its report
    region = html[html.index(START_MARKER) : html.index(END_MARKER)]
    assert "timings are added to this section when the run ends" not in region and "figure-timeline" in region
    for row in pipeline_table(table).to_dict("records"):
        assert f"<td>{row['pipeline']}</td><td>{row['nodes']}</td><td>{row['time']}</td>" in region
    # MLflow's copy of the report is the one with the timings
    client, runs = mlflow_runs(project)
    logged = Path(client.download_artifacts(runs[0].info.run_id, "reports/report.html", str(tmp_path)))
    assert hashlib.sha256(logged.read_bytes()).hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_run_leaves_its_report_at_the_stable_path_and_names_it_last(tiny_project_as_run):
    """data/08_reporting/latest/report.html: a copy of the newest versioned report, its run timings included."""
    project = tiny_project_as_run
    latest = project / LATEST
    assert latest.is_file() and not latest.is_symlink()
    assert latest.read_bytes() == latest_report_path(project).read_bytes()
    assert "figure-timeline" in latest.read_text(encoding="utf-8")  # copied after the timings were rendered in


def test_the_latest_report_hook_is_called_after_every_other_end_of_run_hook():
    """Its log line is the run's last: pluggy calls a hook's implementations from the end of its list."""
    from kedro.framework.hooks.manager import _create_hook_manager, _register_hooks

    from thinkalike import settings

    manager = _create_hook_manager()
    _register_hooks(manager, settings.HOOKS)
    for hook in (manager.hook.after_pipeline_run, manager.hook.on_pipeline_error):
        assert isinstance(hook.get_hookimpls()[0].plugin, LatestReportHooks)


def test_the_latest_report_is_the_one_this_run_saved_or_left_as_it_was(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {"report": {"type": "thinkalike.io.atomic.TextDataset", "filepath": "out/report.html", "versioned": True}}
    first, second, third = (
        DataCatalog.from_config(config, save_version=f"2026-01-0{day}T00.00.00.000Z") for day in (1, 2, 3)
    )
    first.save("report", "first")
    with caplog.at_level(logging.INFO, logger="thinkalike.pipelines.report.latest"):
        assert publish_latest(first).resolve() == (tmp_path / "out/latest/report.html").resolve()
    assert (tmp_path / "out/latest/report.html").read_text() == "first"
    assert caplog.records[-1].getMessage() == (
        "The report: out/latest/report.html (this run's: out/report.html/2026-01-01T00.00.00.000Z/report.html)"
    )
    assert publish_latest(second) is None  # a run that saved no report
    assert (tmp_path / "out/latest/report.html").read_text() == "first"
    third.save("report", "third")
    publish_latest(third)
    assert (tmp_path / "out/latest/report.html").read_text() == "third"
    assert sorted(p.name for p in (tmp_path / "out/latest").iterdir()) == ["report.html"]  # no temporary file left
    assert publish_latest(DataCatalog()) is None  # no report dataset at all


def test_the_report_alone_lists_what_was_never_saved_and_later_runs_leave_it_as_it_is(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    run_project(project, pipeline_names=["report"])
    path = latest_report_path(project)
    html = _latest(project)
    for name, pipeline, section in (
        ("cka_distances", "cka", "cka"),
        ("stitching_penalties", "stitching", "stitching"),
        ("models.nli.groups", "nli", "nli"),
        ("models.nli.accuracy_figure", "nli", "nli"),
        ("similarity_measures", "cka", "measures"),
        ("zoo_summary", "zoo", "zoo"),
    ):
        assert f"<code>{name}</code> (pipeline <code>{pipeline}</code>)" in _section(html, section), name
    assert "<code>models.cka.&lt;pair&gt;.measures_table</code> (pipeline <code>cka</code>), 3 pairs" in _section(
        html, "measures"
    )
    assert "<code>cka_heatmaps_plotly</code> (pipeline <code>cka</code>)" in _section(html, "cka")
    assert html.count("<img ") == html.count("figure-cka_distance") == 0
    assert _index(html)["mlem_mds_plotly"] == ("mlem", "never saved")
    assert "<td>report</td><td>1</td>" in _section(html, "timing")  # this run's timings: the report alone
    before = path.read_bytes()

    run_project(project, pipeline_names=["corpus"])  # a partial run without the report

    def broken(*args, **kwargs):
        raise RuntimeError("report broke")

    monkeypatch.setattr(report_nodes, "write_report", broken)  # the pipelines are built when the session starts
    with pytest.raises(RuntimeError, match="report broke"):  # the run's own error, not one of its report
        run_project(project, pipeline_names=["report"])
    assert len(_versions(project, TIMINGS)) == 3  # every run saved its timings, the failed one too
    assert _versions(project, REPORTS) == [path.parent.name] and path.read_bytes() == before
    assert (project / LATEST).read_bytes() == before  # neither later run had a report to put in its place


def test_timings_go_only_into_the_report_of_their_run_and_only_whole(tmp_path, caplog):
    config = {
        "report": {
            "type": "thinkalike.io.atomic.TextDataset",
            "filepath": str(tmp_path / "report.html"),
            "versioned": True,
        },
        "run_timings": {
            "type": "thinkalike.io.atomic.ParquetDataset",
            "filepath": str(tmp_path / "run_timings.parquet"),
            "versioned": True,
        },
    }
    runs = [DataCatalog.from_config(config, save_version=f"2026-01-0{day}T00.00.00.000Z") for day in (1, 2, 3)]
    first, second, third = runs
    first.save("report", planted_report())
    second.save("run_timings", planted_timings())
    assert add_run_timings(second, "run_timings") is None  # no report of that run: the first run's is not its own
    assert first.load("report").count("figure-timeline") == 0

    third.save("report", planted_report())
    third.save("run_timings", planted_timings())
    text = add_run_timings(third, "run_timings")
    assert text is not None and "figure-timeline" in text and third.load("report") == text
    assert sorted(p.name for p in (tmp_path / "report.html" / "2026-01-03T00.00.00.000Z").iterdir()) == ["report.html"]

    older = "<!DOCTYPE html><html>a report from before the timings region</html>"
    fourth = DataCatalog.from_config(config, save_version="2026-01-04T00.00.00.000Z")
    fourth.save("report", older)
    fourth.save("run_timings", planted_timings())
    with caplog.at_level(logging.WARNING):
        assert add_run_timings(fourth, "run_timings") is None  # left whole, with a warning; nothing raised
    assert fourth.load("report") == older and "could not be added to its report" in caplog.text
