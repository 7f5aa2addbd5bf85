"""The report of the suite's default run in a real headless browser (Chromium, Playwright, as the kedro-viz tests):
it opens offline from the file with no console error and one copy of plotly.js, every figure — embedded PNG or
interactive plotly — is drawn, visible and not empty, an interactive figure's hover reads the value of the saved
table, and every link of the table of contents lands on its section."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import expect

from tests.pipelines.test_report_pipeline import latest_report_path
from tests.pipelines.test_viz import browser  # noqa: F401 - the headless Chromium of the kedro-viz tests

#: Headless Chromium (Playwright) or a UI server: the browser step of CI (`-m "real or browser"`), not the suite.
pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1400, "height": 900}
#: The interactive figures of conf/test's default run (no scaling family; every other experiment runs).
INTERACTIVE = {
    "figure-cka_distance",
    "figure-cka_heatmaps",
    "figure-measure_matrices",
    "figure-mlem_similarity",
    "figure-timeline",
}
DRAWN = """() => [...document.querySelectorAll('.plotly-graph-div')]
  .every(div => div._fullLayout && div._fullData.length > 0 && div.querySelector('svg.main-svg'))"""
PLOTLY_COPIES = "() => [...document.scripts].filter(script => script.text.includes('* plotly.js v')).length"
HOVER = """([id, row, column]) => {
  const div = document.getElementById(id);
  Plotly.Fx.hover(div, [{curveNumber: 0, pointNumber: [row, column]}]);
  return div.querySelector('.hoverlayer').textContent;
}"""

LANDED = """id => [document.getElementById(id).getBoundingClientRect().top,
  window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 1]"""


def _saved_distances(project: Path) -> pd.DataFrame:
    """The run's ``cka_distances`` table as saved on disk."""
    folder = project / "data" / "08_reporting" / "cka_distances.parquet"
    return pd.read_parquet(max(folder.glob("*/cka_distances.parquet")))


def test_the_report_opens_offline_with_every_figure_drawn_and_every_contents_link_landing(browser, tiny_project_as_run):  # noqa: F811 - the fixture imported above
    project = tiny_project_as_run  # as the run left it: no later test re-ran a pipeline whose tables it shows
    path = latest_report_path(project)
    page = browser.new_context(viewport=VIEWPORT).new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    expect(page.locator("h1")).to_have_text("ThinkAlike: every experiment of the run")
    page.wait_for_function(DRAWN)

    # offline: the file is the only thing loaded, and it brings exactly one plotly.js
    assert [url for url in requests if not url.startswith("data:")] == [path.as_uri()]
    assert page.evaluate(PLOTLY_COPIES) == 1

    images = page.locator("figure img")
    assert images.count() >= 8  # conf/test: every PNG of every experiment but the scaling family's
    for index in range(images.count()):
        image = images.nth(index)
        image.scroll_into_view_if_needed()
        expect(image).to_be_visible()
        assert image.evaluate("img => img.complete && img.naturalWidth > 100 && img.naturalHeight > 100"), index
        box = image.bounding_box()
        assert box["width"] > 100 and box["height"] > 100, index
    plots = page.locator(".plotly-graph-div")
    assert {plots.nth(i).get_attribute("id") for i in range(plots.count())} == INTERACTIVE
    for index in range(plots.count()):
        plot = plots.nth(index)
        plot.scroll_into_view_if_needed()
        expect(plot).to_be_visible()
        box = plot.bounding_box()
        assert box["width"] > 300 and box["height"] > 250, plot.get_attribute("id")
        assert plot.locator("svg.main-svg").first.bounding_box()["width"] > 300

    # the distance matrix's hover reads the saved table: the two models of the pair of different models
    pair = _saved_distances(project).query("model_a != model_b").iloc[0]
    axes = page.evaluate(
        "() => { const d = document.getElementById('figure-cka_distance').data[0]; return [d.x, d.y]; }"
    )
    hovered = page.evaluate(
        HOVER, ["figure-cka_distance", axes[1].index(pair["model_a"]), axes[0].index(pair["model_b"])]
    )
    assert f"arccos CKA distance {pair['arccos_distance']:.3f}" in hovered
    assert f"mean matched-layer CKA {pair['mean_matched_cka']:.3f}" in hovered

    # the table of contents: a link to every section, each landing on it
    links = page.locator("nav.contents a")
    targets = [links.nth(i).get_attribute("href") for i in range(links.count())]
    sections = page.evaluate("() => [...document.querySelectorAll('body > section')].map(section => section.id)")
    assert targets == [f"#{section}" for section in sections] and len(targets) >= 10
    for index, target in enumerate(targets):
        page.evaluate("() => window.scrollTo(0, 0)")
        links.nth(index).click()
        expect(page).to_have_url(re.compile(re.escape(target) + "$"))
        assert page.evaluate("() => location.hash") == target
        heading = page.locator(f"{target} > h2")
        expect(heading).to_be_in_viewport()
        top, at_bottom = page.evaluate(LANDED, target[1:])
        # scrolled to it (its top at the window's top, but for its 1rem scroll margin), or as far as the page goes
        assert 0 <= top <= 20 or (at_bottom and 0 <= top < VIEWPORT["height"]), (target, top)
    assert not errors, errors


def test_the_docs_screenshot_is_a_reports_first_screen_made_by_its_script(tiny_project_as_run, tmp_path):
    """docs/img/report.png (on docs/index.md) is what scripts/report_screenshot.py makes of a report: its first
    screen in headless Chromium, 1280 × 800, a small palette PNG; the script makes one of the suite's run here."""
    import importlib.util

    from PIL import Image

    from tests.pipelines.test_viz import chromium_executable

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("report_screenshot", root / "scripts" / "report_screenshot.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    chromium = chromium_executable()
    made = tmp_path / "report.png"
    # in a process of its own: Playwright's sync API cannot start where another test's browser fixture already runs it
    report = tiny_project_as_run / "data/08_reporting/latest/report.html"
    made_by = subprocess.run(
        [
            sys.executable,
            str(root / "scripts" / "report_screenshot.py"),
            str(report),
            str(made),
            "--chromium",
            chromium,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made_by.returncode == 0, made_by.stderr[-2000:]
    for png in (made, root / "docs" / "img" / "report.png"):
        image = Image.open(png)
        assert image.format == "PNG" and image.size == (script.WIDTH, script.HEIGHT), png
        assert png.stat().st_size < 300_000, png
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or ()) > 8, f"{png}: a blank screen"
