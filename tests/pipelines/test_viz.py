"""kedro-viz: its graph of the project, and the site checked in a real headless browser (Chromium, Playwright).

* kedro-viz's own data builder (no browser): the top-level graph is small — the corpus, one
  ``models`` box and the datasets no node reads (the methods' summaries) — and each model's and
  pair's datasets sit in its box.
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
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from kedro.pipeline import Node
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.io.previews import cell_text
from thinkalike.pipelines.cka.pairs import pair_dataset
from thinkalike.pipelines.namespaces import CORPUS, MODELS, model_dataset, model_namespace

#: Headless Chromium (Playwright) or a UI server: the browser step of CI (`-m "real or browser"`), not the suite.
pytestmark = pytest.mark.browser

# kedro-viz loads a dataset's preview on its server when the panel opens; on a loaded 2-core machine that took longer
# than Playwright's 5-s default (a CI run of 2026-11-27 missed the tokenizer's JSON preview): every expectation here
# waits up to 30 s, and still fails when what it waits for never comes
expect.set_options(timeout=30_000)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TEST_MODELS = {"gelu_1l", "neox_xs"}  # conf/test/parameters_zoo.yml
BASE_ONLY_MODELS = {"solu_2l", "gelu_2l", "neox_8l"}  # conf/base/parameters_zoo.yml only
MODEL_DATASETS = ("model_weights", "model_config", "training_curve", "activations", "activation_index")
LAYERS = ["raw", "intermediate", "feature", "model_input", "models", "model_output", "reporting"]
# the layers of the top-level datasets (kedro-viz draws only those with every box collapsed): every models and
# model_output dataset is inside the models box, read there
TOP_LEVEL_LAYERS = ["intermediate", "feature", "model_input", "reporting"]
DOTTED_NAME_WARNING = "dataset names contain '.'"
# kedro-viz's top level, parameters hidden (kedro-viz's default), in conf/test as in conf/base: 12 elements — the
# corpus box, the 9 corpus datasets the models read (kedro-viz draws a dataset that leaves a box one level up), the
# models box, the report and the run's claims (the two things of a run a user opens first). 47 when the corpus's 7 nodes and 10 datasets were at the top and the summaries' 28
# outputs no node read climbed out of the models box (the report now lists them in its index); 68 before the NLI
# summaries were read; 87 (conf/base: 257) when each pair's and model's figures and unread tables climbed out of
# their boxes, 83 when every model and pair was its own top-level namespace
# … and the committed replicates' findings the report reads (docs/findings.json: an input no node makes, so kedro-viz
# draws it beside the box that reads it)
TOP_LEVEL_LIMIT = 14
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
    pytest.skip(
        "no Chromium on this machine (Debian: apt-get install -y chromium; .ci/run installs it): "
        "the kedro-viz tests need a real browser"
    )


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
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kedro",
                "viz",
                "run",
                "--no-browser",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *options,
            ],
            cwd=project,
            env=subprocess_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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
    done = subprocess.run(
        [sys.executable, "-m", "kedro", "viz", "build", "--include-previews"],
        cwd=project,
        env=subprocess_env(KEDRO_ENV=env),
        capture_output=True,
        text=True,
        timeout=600,
    )
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
    def log_message(self, format, *args) -> None:
        pass


def viz_graph(project: Path, env: str):
    """kedro-viz's graph of ``__default__`` built by its own loader and repositories (what its API serves).

    Returns ``(top_level, tree, names, layers)``: the names of the elements drawn with every box
    collapsed (the root's children but parameters, which kedro-viz hides by default), the
    modular-pipeline tree by id, the name of every node id, and the layers in kedro-viz's order
    (none when they make a cycle through the boxes).
    """
    from kedro_viz.data_access.managers import DataAccessManager
    from kedro_viz.integrations.kedro.data_loader import load_data
    from kedro_viz.server import populate_data

    catalog, pipelines, extras = load_data(project, env)
    manager = DataAccessManager()
    populate_data(manager, catalog, pipelines, extras)
    tree = manager.create_modular_pipelines_tree_for_registered_pipeline("__default__")
    nodes = {node.id: node for node in manager.get_nodes_for_registered_pipeline("__default__")}
    names = {
        node_id: node.kedro_obj.name if isinstance(node.kedro_obj, Node) else node.name  # tasks: full name
        for node_id, node in nodes.items()
    } | {box: box for box in tree}
    top_level = {names[child.id] for child in tree["__root__"].children if child.type != "parameters"}
    return top_level, tree, names, manager.get_sorted_layers_for_registered_pipeline("__default__")


def test_the_top_level_graph_is_small_and_each_model_is_one_box(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.setattr(Node, "__dotted_dataset_name_warned__", False, raising=False)  # Kedro warns once a process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        top_level, tree, names, layers = viz_graph(project, "test")
    assert not [warning for warning in caught if DOTTED_NAME_WARNING in str(warning.message)]
    assert layers == LAYERS

    assert len(top_level) <= TOP_LEVEL_LIMIT, sorted(top_level)
    # exactly: the corpus box, the corpus datasets the models read, the models box and what no node reads (the report
    # and the run's claims)
    pipeline = run_pipelines(project, "test")["__default__"]
    corpus = [node for node in pipeline.nodes if node.namespace == CORPUS]
    assert corpus and not [node for node in pipeline.nodes if not node.namespace]
    read = {name for node in pipeline.nodes for name in node.inputs}
    unread = {name for node in pipeline.nodes for name in node.outputs} - read
    assert unread == {
        "report",
        "run_claims",
    }  # the summaries read every pair's and model's outputs, the report the rest
    read_by_models = {name for node in pipeline.nodes if node.namespace != CORPUS for name in node.inputs}
    made = {name for node in pipeline.nodes for name in node.outputs}
    read_only = {name for name in read if name not in made and not name.startswith("params:") and name != "parameters"}
    assert read_only == {"models.report.committed_findings"}  # the one input no node makes: docs/findings.json
    assert top_level == (
        {CORPUS, MODELS}
        | unread
        | read_only
        | {name for node in corpus for name in node.outputs if name in read_by_models}
    )

    def children(box: str) -> set[str]:
        return {names[child.id] for child in tree[box].children}

    assert {f"{CORPUS}.generate_corpus", "sentences"} <= children(CORPUS)

    for model in TEST_MODELS:
        box = model_namespace(model)
        assert {f"{box}.train_model", f"{box}.extract_activations"} <= children(box)
        for dataset in MODEL_DATASETS:  # in the model's box, or beside it in models when another box reads it
            assert model_dataset(model, dataset) in children(box) | children(MODELS)
        assert model_dataset(model, "activations") not in top_level
    assert pair_dataset("gelu_1l", "neox_xs", "cka_table") in children(f"{MODELS}.cka")  # read by the summary


def run_pipelines(project: Path, env: str):
    """The project's pipelines as a session of ``env`` builds them (the context installs them)."""
    from kedro.framework.project import pipelines
    from kedro.framework.session import KedroSession

    with KedroSession.create(project_path=project, env=env) as session:
        session.load_context()
        return dict(pipelines)


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
    run_project(project, pipeline_names=["corpus"])
    return project


def open_graph(browser: Browser, url: str, *, expand_all: bool = False) -> Page:
    """A new page showing kedro-viz at ``url``, once the flowchart is drawn; namespaces collapsed
    unless ``expand_all``, onboarding hints off."""
    settings = json.dumps({"showFeatureHints": False, "expandAllPipelines": expand_all})
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.add_init_script(f"localStorage.setItem('KedroViz', JSON.stringify({settings}))")
    page = context.new_page()
    page.goto(url)
    # expanded, the graph has more elements than kedro-viz draws without asking (224 in conf/test)
    render_anyway = page.get_by_role("button", name="Render it anyway")
    expect(page.locator(".pipeline-node").first.or_(render_anyway)).to_be_visible(timeout=60_000)
    if render_anyway.is_visible():
        render_anyway.click()
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
        page = open_graph(browser, url)  # collapsed: the models' work is one box
        expect(graph_node(page, MODELS)).to_have_attribute("data-node-type", "modularPipeline")
        for model in TEST_MODELS:
            expect(graph_node(page, model_dataset(model, "activations"))).to_have_count(0)
        expect(page.locator(".pipeline-layer-name")).to_have_text(TOP_LEVEL_LAYERS)
        page = open_graph(browser, url, expand_all=True)  # kedro-viz draws no layer bands around open boxes
        for model in TEST_MODELS:
            expect(graph_node(page, model_dataset(model, "model_weights"))).to_have_count(1)
            expect(graph_node(page, model_dataset(model, "activations"))).to_have_count(1)
        for model in BASE_ONLY_MODELS:
            expect(graph_node(page, model_dataset(model, "model_weights"))).to_have_count(0)

        open_dataset(page, "train_sentences")  # list columns: HTTP 500 before
        table = page.locator(PREVIEW_SELECTORS["TablePreview"])
        expect(table.locator(".preview-table__header").nth(2)).to_have_text("words")
        expect(table.locator(".preview-table__row").first).to_contain_text(
            first_words(corpus_project, "train_sentences")
        )
        open_dataset(page, "tokenizer")
        expect(page.locator(PREVIEW_SELECTORS["JSONPreview"])).to_contain_text('"vocab_size":200')
        open_dataset(page, model_dataset("gelu_1l", "activations"))  # the zoo has not run
        expect(page.locator(PREVIEW_SELECTORS["JSONPreview"])).to_contain_text("Not saved yet")
    assert DOTTED_NAME_WARNING not in log.read_text()


def test_viz_build_with_previews_serves_them(browser, corpus_project):
    build_viz(corpus_project, "test")
    with static_server(corpus_project / "build") as url:
        page = open_graph(browser, url)
        expect(graph_node(page, MODELS)).to_have_attribute("data-node-type", "modularPipeline")
        open_dataset(page, "heldout_sentences")
        expect(page.locator(PREVIEW_SELECTORS["TablePreview"]).locator(".preview-table__row").first).to_contain_text(
            first_words(corpus_project, "heldout_sentences")
        )
        open_dataset(page, "train_sequences")
        expect(page.locator(PREVIEW_SELECTORS["TablePreview"])).to_contain_text("input_ids")
        open_dataset(page, "report")  # at the top level, not saved: only the corpus ran
        expect(page.locator(PREVIEW_SELECTORS["JSONPreview"])).to_contain_text("Not saved yet")


@pytest.mark.slow
def test_every_dataset_previews_after_a_full_run(browser, tiny_project):
    project, _ = tiny_project
    build_viz(project, "test")
    main = json.loads((project / "build" / "api" / "main").read_text())
    datasets = sorted(node["name"] for node in main["nodes"] if node["type"] == "data")
    assert {
        "sentences",
        "tokenizer",
        model_dataset("gelu_1l", "activations"),
        model_dataset("neox_xs", "model_weights"),
        "cka_heatmaps",
        "cka_heatmaps_plotly",
        "cka_distance_figure",
    } <= set(datasets)
    with static_server(project / "build") as url:
        page = open_graph(browser, url, expand_all=True)
        for name in datasets:
            if name == "models.report.committed_findings":
                # read only, docs/findings.json, absent from a test project's copy: its preview says so
                open_dataset(page, name)
                expect(page.locator(PREVIEW_SELECTORS["JSONPreview"])).to_contain_text("Not saved yet")
                continue
            open_dataset(page, name)
            kind = json.loads(
                (project / "build" / "api" / "nodes" / graph_node(page, name).get_attribute("data-id")).read_text()
            )["preview_type"]
            expect(page.locator(PREVIEW_SELECTORS[kind]).first).to_be_visible()
            expect(page.locator(".pipeline-metadata")).not_to_contain_text("preview unavailable")
            expect(page.locator(".pipeline-metadata")).not_to_contain_text("Not saved yet")
