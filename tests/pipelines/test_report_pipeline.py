"""The ``report`` pipeline: after the suite's default run it holds the findings and the figures, and opens in a
real headless browser (Chromium, as the kedro-viz tests) with no console error, every figure drawn and the numbers
the saved tables give; run alone in a project where nothing was saved, it still writes a report that names every
missing input."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from tests.pipelines.conftest import make_project_copy, run_project
from tests.pipelines.test_viz import browser  # noqa: F401 - the headless Chromium of the kedro-viz tests
from thinkalike.pipelines.report.pipeline import NOT_READ
from thinkalike.reports.findings import collect_findings, render_findings
from thinkalike.reports.findings_cli import load_tables, open_catalog

#: A number as the findings print it, not a digit inside a name (``gelu_1l``, ``neox_xs``, ``fig. 9`` is one).
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d+(?:[.,]\d+)*")
#: The text of the report's findings section, as the browser renders it (the elements between its two headings).
FINDINGS_TEXT = """() => {
  const heading = [...document.querySelectorAll('h2')].find(h => h.textContent === 'Findings');
  const texts = [];
  for (let node = heading.nextElementSibling; node && node.tagName !== 'H2'; node = node.nextElementSibling)
    texts.push(node.innerText);
  return texts.join('\\n');
}"""


def _latest_path(project: Path) -> Path:
    versions = sorted((project / "data" / "08_reporting" / "report.html").iterdir())
    return versions[-1] / "report.html"


def _latest(project: Path) -> str:
    return _latest_path(project).read_text(encoding="utf-8")


def _index(html: str) -> dict[str, tuple[str, str]]:
    """The report's index of the run's other outputs: dataset → (pipeline, what it holds)."""
    section = html[html.index("<h2>Every other output of the run</h2>"):]
    rows = re.findall(r"<tr><td[^>]*><code>(.*?)</code></td><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td></tr>", section)
    return {name: (pipeline, holds) for name, pipeline, holds in rows}


def test_the_default_run_writes_the_report_of_every_experiment(tiny_project):
    project, _ = tiny_project
    html = _latest(project)
    assert html.count("data:image/png;base64,") >= 5  # figures embedded, the file stands alone
    assert "<strong>One run</strong>" in html and "<strong>MLEM.</strong>" in html  # the claims that hold in this run
    assert "Scaling family (Brown et al. §5): not in these outputs" in html  # conf/test has no GPT-NeoX family
    assert "Missing inputs" not in html  # every pipeline that could run did
    # the index: every summary output the findings do not quote, with what it holds (the summaries are read inside
    # the models box, so kedro-viz's first view is the corpus, the models box and the report)
    index = _index(html)
    assert index["cka_heatmaps"][0] == "cka" and index["cka_heatmaps"][1].startswith("folder of ")
    assert index["stitching_curves"][0] == "stitching" and index["stitching_curves"][1].startswith("table, ")
    assert "never saved" not in {holds for _, holds in index.values()}


def test_the_report_alone_lists_what_was_never_saved(tmp_path):
    project = make_project_copy(tmp_path)
    run_project(project, pipeline_names=["report"])
    html = _latest(project)
    for name, pipeline in (("cka_distances", "cka"), ("stitching_penalties", "stitching"),
                           ("models.nli.groups", "nli"), ("models.nli.accuracy_figure", "nli")):
        assert f"<code>{name}</code> (pipeline <code>{pipeline}</code>)" in html
    assert "data:image/png" not in html
    assert _index(html)["mlem_mds_plotly"] == ("mlem", "never saved")


def test_the_report_opens_in_a_browser_with_every_figure_and_the_numbers_of_the_saved_tables(
        browser, tiny_project_as_run):  # noqa: F811 - the fixture imported above
    project = tiny_project_as_run  # as the run left it: no later test re-ran a pipeline whose tables it quotes
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(_latest_path(project).as_uri())  # a file: nothing to fetch, offline
    expect(page.locator("h1")).to_have_text("ThinkAlike: every experiment of the run")
    images = page.locator("figure img")
    assert images.count() >= 5
    for index in range(images.count()):
        expect(images.nth(index)).to_be_visible()
        assert images.nth(index).evaluate("image => image.complete && image.naturalWidth > 100"), index
    shown = page.evaluate(FINDINGS_TEXT)
    assert not errors, errors

    # the numbers of the findings, computed again from the tables saved on disk (not the report node's inputs)
    catalog, parameters = open_catalog(project, "test")
    tables = {name: table for name, table in load_tables(catalog, parameters).items() if name not in NOT_READ}
    expected = render_findings(collect_findings(tables))
    numbers = NUMBER.findall(shown)
    assert len(numbers) > 20  # the sentences do quote numbers
    assert numbers == NUMBER.findall(expected)
