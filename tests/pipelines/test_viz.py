"""kedro-viz, checked in a real headless browser (Chromium driven by Playwright).

* ``kedro viz run --env test`` draws the test environment's pipelines (not the base ones), in
  the catalog's layers, and previews tables with list columns (the API answered HTTP 500).
* ``kedro viz build --include-previews`` succeeds (it aborted on list columns) and the built
  site, served on 127.0.0.1, shows the previews; datasets not saved yet say so.
* Slow: after a full run of the test configuration, every dataset of ``__default__`` previews.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.io.previews import cell_text

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TEST_MODELS = {"gelu_1l", "neox_xs"}  # conf/test/parameters_zoo.yml
BASE_ONLY_MODELS = {"solu_2l", "gelu_2l", "neox_l"}  # conf/base/parameters_zoo.yml only
# "models": the zoo weights, read by the stitching pairs outside the models' boxes
LAYERS_SHOWN = ["raw", "intermediate", "feature", "model_input", "models", "model_output", "reporting"]
DOTTED_NAME_WARNING = "dataset names contain '.'"
SERVER_START_LIMIT_S = 240  # how long a kedro-viz server may take to answer before the test gives up
PREVIEW_SELECTORS = {  # what each preview kind renders in the side panel
    "TablePreview": ".pipeline-metadata .preview-table",
    "JSONPreview": ".pipeline-metadata__preview-json",
    "ImagePreview": ".pipeline-metadata img.pipeline-metadata__plot-image[src^='data:image/png;base64,']",
    "PlotlyPreview": ".pipeline-metadata .pipeline-plotly-chart",
}


def chromium_executable() -> str:
    """The system Chromium (Debian: ``apt-get install chromium``); skips the test when there is none."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium on this machine (Debian: apt-get install -y chromium; .ci/run installs it): "
                "the kedro-viz tests need a real browser")


def subprocess_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``KEDRO_ENV`` (the tests choose the environment), plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if key != "KEDRO_ENV"}
    env.update(HF_HUB_OFFLINE="1", KEDRO_DISABLE_TELEMETRY="1", DO_NOT_TRACK="1", **extra)
    return env


def free_port() -> int:
    """A free TCP port on 127.0.0.1 below 49152 (kedro viz refuses the ephemeral range)."""
    for port in random.Random().sample(range(20000, 49000), 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port between 20000 and 49000 on 127.0.0.1")


def wait_until_served(url: str, process: subprocess.Popen, log: Path) -> None:
    """Returns once ``url`` answers 200; fails with the server's log if it exits or never answers."""
    deadline = time.monotonic() + SERVER_START_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"kedro viz exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"kedro viz did not answer {url} within {SERVER_START_LIMIT_S} s:\n{log.read_text()}")


@contextmanager
def viz_server(project: Path, *options: str) -> Iterator[tuple[str, Path]]:
    """``kedro viz run <options>`` on 127.0.0.1 in ``project``: yields its URL and its log file."""
    port = free_port()
    log = project / f"viz-{port}.log"
    with log.open("w") as output:
        process = subprocess.Popen([sys.executable, "-m", "kedro", "viz", "run", "--no-browser", "--host", "127.0.0.1",
                                    "--port", str(port), *options], cwd=project, env=subprocess_env(),
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_until_served(url + "api/main", process, log)
        yield url, log
    finally:
        stop_group(process)


def stop_group(process: subprocess.Popen) -> None:
    """Ends ``process`` and its children (kedro viz serves from a child process), started in their own group."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            continue


def build_viz(project: Path, env: str) -> str:
    """``kedro viz build --include-previews`` in ``project`` with ``KEDRO_ENV=env``; returns its output."""
    shutil.rmtree(project / "build", ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "kedro", "viz", "build", "--include-previews"], cwd=project,
                          env=subprocess_env(KEDRO_ENV=env), capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Success!" in output and "Failed" not in output, output  # kedro viz build exits 0 when it fails
    assert (project / "build" / "api" / "main").is_file(), output
    assert DOTTED_NAME_WARNING not in output
    return output


@contextmanager
def static_server(directory: Path) -> Iterator[str]:
    """A static HTTP server for ``directory`` on 127.0.0.1 (in a thread); yields its URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's signature
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium (the system's), for the module."""
    executable = chromium_executable()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def corpus_project(tmp_path_factory) -> Path:
    """A project copy in which the corpus pipeline ran with conf/test (zoo, activations, cka not run)."""
    project = make_project_copy(tmp_path_factory.mktemp("viz_project"))
    previous = Path.cwd()
    os.chdir(project)
    try:
        run_project(project, pipeline_names=["corpus"])
    finally:
        os.chdir(previous)
    return project


def open_graph(browser: Browser, url: str, *, expand_all: bool = False) -> Page:
    """A new page showing kedro-viz at ``url``, once the flowchart is drawn; namespaces collapsed
    unless ``expand_all``, onboarding hints off."""
    settings = json.dumps({"showFeatureHints": False, "expandAllPipelines": expand_all})
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.add_init_script(f"localStorage.setItem('KedroViz', JSON.stringify({settings}))")
    page = context.new_page()
    page.goto(url)
    expect(page.locator(".pipeline-node").first).to_be_visible(timeout=60_000)
    return page


def graph_node(page: Page, name: str):
    return page.locator(f'.pipeline-node[data-node-fullname="{name}"]')


def open_dataset(page: Page, name: str) -> None:
    """Clicks dataset ``name`` in the flowchart and waits for its side panel."""
    graph_node(page, name).dispatch_event("click")
    expect(page.locator(".pipeline-metadata__title")).to_have_text(name)


def first_words(project: Path, dataset: str) -> str:
    """The ``words`` cell of the first row of a saved corpus table, as the preview shows it."""
    saved = sorted((project / "data" / "02_intermediate" / f"{dataset}.parquet").glob(f"*/{dataset}.parquet"))[-1]
    return cell_text(pd.read_parquet(saved)["words"].iloc[0])


def test_viz_run_draws_the_environment_in_use_with_layers_and_previews(browser, corpus_project):
    with viz_server(corpus_project, "--env", "test") as (url, log):
        page = open_graph(browser, url)
        for model in TEST_MODELS:  # each model's training and extraction: one box
            expect(graph_node(page, model)).to_have_attribute("data-node-type", "modularPipeline")
            expect(graph_node(page, f"{model}.model_weights")).to_have_count(1)  # read by the stitching pairs
            expect(graph_node(page, f"{model}.activations")).to_have_count(1)  # read by the CKA pairs
        for model in BASE_ONLY_MODELS:
            expect(graph_node(page, model)).to_have_count(0)
        expect(page.locator(".pipeline-layer-name")).to_have_text(LAYERS_SHOWN)

        open_dataset(page, "train_sentences")  # list columns: HTTP 500 before
        table = page.locator(PREVIEW_SELECTORS["TablePreview"])
        expect(table.locator(".preview-table__header").nth(2)).to_have_text("words")
        expect(table.locator(".preview-table__row").first).to_contain_text(first_words(corpus_project,
                                                                                        "train_sentences"))
        open_dataset(page, "tokenizer")
        expect(page.locator(PREVIEW_SELECTORS["JSONPreview"])).to_contain_text('"vocab_size":200')
        open_dataset(page, "gelu_1l.activations")  # the zoo has not run
        expect(page.locator(PREVIEW_SELECTORS["JSONPreview"])).to_contain_text("Not saved yet")
    assert DOTTED_NAME_WARNING not in log.read_text()


def test_viz_build_with_previews_serves_them(browser, corpus_project):
    build_viz(corpus_project, "test")
    with static_server(corpus_project / "build") as url:
        page = open_graph(browser, url)
        for model in TEST_MODELS:
            expect(graph_node(page, model)).to_have_attribute("data-node-type", "modularPipeline")
        open_dataset(page, "heldout_sentences")
        expect(page.locator(PREVIEW_SELECTORS["TablePreview"]).locator(".preview-table__row").first).to_contain_text(
            first_words(corpus_project, "heldout_sentences"))
        open_dataset(page, "train_sequences")
        expect(page.locator(PREVIEW_SELECTORS["TablePreview"])).to_contain_text("input_ids")
        open_dataset(page, "zoo_summary")
        expect(page.locator(PREVIEW_SELECTORS["TablePreview"])).to_contain_text("Not saved yet")


@pytest.mark.slow
def test_every_dataset_previews_after_a_full_run(browser, tiny_project):
    project, _ = tiny_project
    build_viz(project, "test")
    main = json.loads((project / "build" / "api" / "main").read_text())
    datasets = sorted(node["name"] for node in main["nodes"] if node["type"] == "data")
    assert {"sentences", "tokenizer", "gelu_1l.activations", "neox_xs.model_weights",
            "cka_gelu_1l__neox_xs.cka_heatmap_plotly", "cka_distance_figure"} <= set(datasets)
    with static_server(project / "build") as url:
        page = open_graph(browser, url, expand_all=True)
        for name in datasets:
            open_dataset(page, name)
            kind = json.loads((project / "build" / "api" / "nodes" / graph_node(page, name).get_attribute(
                "data-id")).read_text())["preview_type"]
            expect(page.locator(PREVIEW_SELECTORS[kind]).first).to_be_visible()
            expect(page.locator(".pipeline-metadata")).not_to_contain_text("preview unavailable")
            expect(page.locator(".pipeline-metadata")).not_to_contain_text("Not saved yet")
