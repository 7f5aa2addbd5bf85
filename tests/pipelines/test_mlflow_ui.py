"""The suite's tiny run in MLflow's own UI (``mlflow ui`` on 127.0.0.1, in a real headless Chromium, as the kedro-viz
tests): the run page draws one chart section per metric group — the claims' and the scorecard's among them —, no section holds more metrics than its budget (:data:`thinkalike.output_rules.GROUP_BUDGETS`),
the tables are listed under the run's artifacts, and comparing the run with a second one (the report alone, run
again on the same outputs) shows their claims side by side. The server is stopped at the end, whatever happens."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.pipelines.conftest import run_project
from tests.pipelines.test_run_timings import mlflow_runs
from tests.pipelines.test_viz import browser, free_port, stop_group, subprocess_env  # noqa: F401 - the fixture
from thinkalike.output_rules import GROUP_BUDGETS

#: Headless Chromium (Playwright) or a UI server: the browser step of CI (`-m "real or browser"`), not the suite.
pytestmark = pytest.mark.browser

SERVER_START_LIMIT_S = 180  # how long `mlflow ui` may take to answer (a loaded 2-core machine: ~15 s idle)
VIEWPORT = {"width": 1600, "height": 1200}
#: Tables the run lists under its artifacts (``tables/``): summaries, a per-pair table and the details.
TABLES = ("cka_distances.csv", "stitching_penalties.csv", "mlem_profiles.csv", "metric_details.csv")
#: The compare page's metrics: the names' grid and the values' grid (one column per run) of the "Metrics" section.
METRIC_ROWS = """prefix => {
  const header = [...document.querySelectorAll('.du-bois-light-collapse-header')]
    .find(h => h.textContent.trim() === 'Metrics');
  const section = header.closest('.du-bois-light-collapse-item');
  const [names, values] = section.querySelectorAll('.ReactVirtualized__Grid');
  const rows = [];
  for (const cell of names.querySelectorAll('a[title="Plot chart"]')) {
    if (!cell.textContent.startsWith(prefix)) continue;
    const top = cell.parentElement.style.top;
    const shown = [...values.querySelectorAll('div[style]')]
      .filter(value => value.style.top === top && value.parentElement.getAttribute('role') === 'rowgroup')
      .map(value => value.textContent.trim());
    rows.push({name: cell.textContent.trim(), href: cell.getAttribute('href'), values: shown});
  }
  return rows;
}"""
#: Scrolls the compare page's metrics grid down by one screen; false at its end.
SCROLL_METRICS = """() => {
  const header = [...document.querySelectorAll('.du-bois-light-collapse-header')]
    .find(h => h.textContent.trim() === 'Metrics');
  const grids = header.closest('.du-bois-light-collapse-item').querySelectorAll('.ReactVirtualized__Grid');
  const values = grids[grids.length - 1];
  const before = values.scrollTop;
  values.scrollTop = before + values.clientHeight;
  return values.scrollTop > before;
}"""


@contextmanager
def mlflow_ui(database: Path, log: Path) -> Iterator[str]:
    """``mlflow ui`` over the SQLite store ``database`` on a free port of 127.0.0.1, in its own process group: yields
    its URL; stopped (the group, SIGTERM then SIGKILL, bounded waits) when the block ends."""
    port = free_port()
    with log.open("w") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "ui",
                "--backend-store-uri",
                f"sqlite:///{database}",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=database.parent,
            env=subprocess_env(MLFLOW_DISABLE_TELEMETRY="true"),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + SERVER_START_LIMIT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow ui exited with {process.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(url + "health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow ui did not answer {url} within {SERVER_START_LIMIT_S} s:\n{log.read_text()}")
            time.sleep(0.5)
        yield url
    finally:
        stop_group(process)
        assert process.poll() is not None, "mlflow ui still runs"


def metric_sections(page: Page) -> dict[str, int]:
    """``{section: number of charts}`` of the run page's "Model metrics" tab, as its headers say (``claims (260)``)."""
    headers = page.get_by_test_id("experiment-view-compare-runs-section-header")
    expect(headers.first).to_be_visible()
    sections = {}
    for index in range(headers.count()):
        found = re.match(r"\s*(.+?)\s*\((\d+)\)", headers.nth(index).inner_text().replace("\n", " "))
        assert found, headers.nth(index).inner_text()
        sections[found.group(1)] = int(found.group(2))
    return sections


def compared_rows(page: Page, prefix: str) -> list[dict]:
    """The compare page's metric rows whose name starts with ``prefix`` (scrolling its grid until one is drawn)."""
    header = page.locator(".du-bois-light-collapse-header", has_text=re.compile(r"^Metrics$"))
    header.scroll_into_view_if_needed()
    page.locator('a[title="Plot chart"]').first.wait_for()
    while True:
        rows = page.evaluate(METRIC_ROWS, prefix)
        if rows or not page.evaluate(SCROLL_METRICS):
            return rows
        page.wait_for_timeout(300)


@pytest.fixture(scope="module")
def two_runs(tiny_project_as_run, tmp_path_factory) -> tuple[Path, list]:
    """A copy of the tiny run's project in which the report ran again (a second MLflow run with the same claims):
    its MLflow database and its two runs, oldest first."""
    project = tmp_path_factory.mktemp("mlflow_ui") / "project"
    shutil.copytree(tiny_project_as_run, project)
    run_project(project, pipeline_names=["report"])
    _, runs = mlflow_runs(project)
    return project / "mlflow.db", runs


def test_the_run_page_groups_its_metrics_lists_its_tables_and_compares_runs(browser, two_runs, tmp_path):  # noqa: F811
    database, runs = two_runs
    assert len(runs) == 2
    default, report = runs
    experiment = default.info.experiment_id
    with mlflow_ui(database, tmp_path / "mlflow-ui.log") as url:
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.goto(f"{url}#/experiments/{experiment}/runs/{default.info.run_id}/model-metrics")
        expect(page.get_by_role("heading", name=default.info.run_name)).to_be_visible()
        sections = metric_sections(page)
        groups = {name: count for name, count in sections.items() if name != "Model metrics"}
        assert sections.get("Model metrics", 0) == 0, sections  # every metric is in a named group
        assert {"cost", "zoo", "cka", "stitching", "mlem", "nli"} <= set(groups), sections
        assert "scorecard" in groups, sections
        assert set(groups) <= set(GROUP_BUDGETS), sections
        assert all(count <= GROUP_BUDGETS[name] for name, count in groups.items()), sections
        assert sum(groups.values()) == len(default.data.metrics)

        # the tables are the run's artifacts
        page.goto(f"{url}#/experiments/{experiment}/runs/{default.info.run_id}/artifacts")
        folder = page.locator('[data-testid="artifact-tree-node"][artifact-name="tables"]')
        folder.click()
        for table in TABLES:
            expect(page.locator(f'[data-testid="artifact-tree-node"][artifact-name="{table}"]')).to_be_visible()

        # two runs side by side: each scorecard estimate in both (the same outputs: the same margins)
        ids = json.dumps([default.info.run_id, report.info.run_id], separators=(",", ":"))
        page.goto(f"{url}#/compare-runs?runs={ids}&experiments={json.dumps([experiment])}")
        expect(page.get_by_text("Comparing 2 Runs")).to_be_visible()
        for prefix in ("scorecard/",):
            rows = compared_rows(page, prefix)
            assert rows, prefix
            for row in rows:
                assert default.info.run_id in row["href"] and report.info.run_id in row["href"], row
                assert len(row["values"]) == 2 and all(value not in ("", "-", "NaN") for value in row["values"]), row
                name = row["name"]
                assert float(row["values"][0]) == pytest.approx(default.data.metrics[name], abs=1e-3, rel=1e-3), row
