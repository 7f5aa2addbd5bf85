"""The ``report`` pipeline: after the suite's default run it holds the findings and the figures; run alone in a
project where nothing was saved, it still writes a report that names every missing input."""

from __future__ import annotations

from pathlib import Path

from tests.pipelines.conftest import make_project_copy, run_project


def _latest(project: Path) -> str:
    versions = sorted((project / "data" / "08_reporting" / "report.html").iterdir())
    return (versions[-1] / "report.html").read_text(encoding="utf-8")


def test_the_default_run_writes_the_report_of_every_experiment(tiny_project):
    project, _ = tiny_project
    html = _latest(project)
    assert html.count("data:image/png;base64,") >= 5  # figures embedded, the file stands alone
    assert "What the default run finds" in html and "Stitching (diagonal layers" in html
    assert "Scaling family (Brown et al. §5): not in these outputs" in html  # conf/test has no GPT-NeoX family
    assert "Missing inputs" not in html  # every pipeline that could run did
    # the index: every summary output the findings do not quote, with what it holds (the summaries are read inside
    # the models box, so kedro-viz's first view is the corpus, the models box and the report)
    index = html[html.index("<h2>Every other output of the run</h2>"):]
    assert "<code>cka_heatmaps</code></td><td style='text-align:left'>cka</td><td style='text-align:left'>folder of" in index
    assert "<code>stitching_curves</code></td><td style='text-align:left'>stitching</td><td style='text-align:left'>table, " in index
    assert "never saved" not in index


def test_the_report_alone_lists_what_was_never_saved(tmp_path):
    project = make_project_copy(tmp_path)
    run_project(project, pipeline_names=["report"])
    html = _latest(project)
    for name, pipeline in (("cka_distances", "cka"), ("stitching_penalties", "stitching"),
                           ("models.nli.groups", "nli"), ("models.nli.accuracy_figure", "nli")):
        assert f"<code>{name}</code> (pipeline <code>{pipeline}</code>)" in html
    assert "data:image/png" not in html
    index = html[html.index("<h2>Every other output of the run</h2>"):]
    assert "<code>mlem_mds_plotly</code></td><td style='text-align:left'>mlem</td><td style='text-align:left'>never saved" in index
