"""The documentation quotes no run time, size or count it cannot source: every time, memory or disk size and count
of a run's output in README.md and docs/ is in a region that ``python scripts/doc_numbers.py --write``
renders from the saved results (and is what it renders), in the findings page's region rendered from
docs/findings.json, or in a dated lab-notebook page's History; a size or count that is a setting or a hardware fact
is allowed by name (:data:`ALLOWED`), with its reason."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from scripts import doc_numbers
from scripts.doc_numbers import COUNT, REGION, SIZE, TIME, latest_default_run, main, pages, stale_pages

ROOT = Path(__file__).resolve().parents[2]
FINDINGS_REGION = re.compile(r"<!-- findings:start -->.*?<!-- findings:end -->", re.DOTALL)
#: A dated lab-notebook page's results, below its current summary.
HISTORY = re.compile(r"^## History$", re.MULTILINE)
#: Pages whose times other work is sourcing now (issue 48's real checkpoints): left out, by name, until it has.
NOT_YET: set[str] = set()
#: Lab-notebook pages whose current summary is done: everything above their History is checked.
WITH_HISTORY = {"docs/benchmarks/default-run.md", "docs/benchmarks/runners.md"}
#: Sizes and counts that no run measures (settings, hardware, a model's fixed size): (page, the quoted text) → why.
ALLOWED: dict[tuple[str, str], str] = {
    ("docs/hub-models.md", "80 GB"): "hardware: the GPU memory the recipe is sized for",
    ("docs/hub-models.md", "14 GB"): "pythia-6.9b's float16 weights, 6.9·10⁹ parameters × 2 bytes: the model's size",
    ("docs/results.md", "300 metrics"): "a setting: thinkalike.output_rules.METRIC_BUDGET",
}


def _quoted_text(page: Path) -> str:
    """What a page says outside its generated regions and its History, lines joined (a time may break a line)."""
    text = REGION.sub("", FINDINGS_REGION.sub("", page.read_text(encoding="utf-8")))
    history = HISTORY.search(text)
    if history:
        text = text[: history.start()]
    return text.replace("\n", " ")


def _checked_pages() -> list[Path]:
    checked = []
    for page in pages(ROOT):
        name = page.relative_to(ROOT).as_posix()
        if name in NOT_YET:
            continue
        if name.startswith("docs/benchmarks/") and not HISTORY.search(page.read_text(encoding="utf-8")):
            continue  # a lab-notebook page without its current summary yet
        checked.append(page)
    return checked


def test_no_page_quotes_a_time_outside_a_generated_region():
    found = [
        f"{page.relative_to(ROOT)}: {match.group(0)!r} in …{text[max(0, match.start() - 60) : match.end() + 20]}…"
        for page in _checked_pages()
        for text in [_quoted_text(page)]
        for match in TIME.finditer(text)
    ]
    assert not found, (
        "a time typed by hand: put it in a `<!-- numbers:<name> -->` region rendered from the saved results "
        f"({doc_numbers.COMMAND}), or remove it:\n" + "\n".join(found)
    )


def _quoted(pattern: re.Pattern[str]) -> list[tuple[str, str, str]]:
    """Each (page, quoted text, its context) that ``pattern`` finds outside the regions and History."""
    return [
        (page.relative_to(ROOT).as_posix(), match.group(0), text[max(0, match.start() - 60) : match.end() + 20])
        for page in _checked_pages()
        for text in [_quoted_text(page)]
        for match in pattern.finditer(text)
    ]


@pytest.mark.parametrize("kind, pattern", [("size", SIZE), ("count of a run's output", COUNT)])
def test_no_page_quotes_a_size_or_a_count_outside_a_generated_region(kind, pattern):
    found = [
        f"{name}: {quoted!r} in …{context}…"
        for name, quoted, context in _quoted(pattern)
        if (name, quoted) not in ALLOWED
    ]
    assert not found, (
        f"a {kind} typed by hand: put it in a `<!-- numbers:<name> -->` region rendered from the saved results "
        f"({doc_numbers.COMMAND}), remove it, or, for a setting or a hardware fact, allow it in ALLOWED with its "
        "reason:\n" + "\n".join(found)
    )


def test_every_allowed_size_and_count_is_still_quoted():
    quoted = {(name, text) for pattern in (SIZE, COUNT) for name, text, _ in _quoted(pattern)}
    assert not set(ALLOWED) - quoted, f"stale entries of ALLOWED: {sorted(set(ALLOWED) - quoted)}"


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("peak memory 1.2 GB", SIZE),
        ("a 290 MB file", SIZE),
        ("644 MiB", SIZE),
        ("235 claims", COUNT),
        ("260 of them claims", COUNT),
        ("67 unresolved findings", COUNT),
        ("3 of 4 replicates", COUNT),
        ("57–60 of 61 model layers", COUNT),
        ("212 passed", COUNT),
        ("18 zoo models", COUNT),
        ("a zoo of 18 models", COUNT),
    ],
)
def test_the_patterns_find_what_a_run_measures(text, pattern):
    assert pattern.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "30 blocks",
        "d = 576",
        "the Williams et al. 2021 shape metric",
        "float32",
        "`max_bytes`",
        "layer 0 as the embeddings",
    ],
)
def test_the_patterns_leave_architecture_and_years_alone(text):
    assert not SIZE.search(text) and not COUNT.search(text)


def test_the_pages_that_quote_the_run_time_are_checked():
    checked = {page.relative_to(ROOT).as_posix() for page in _checked_pages()}
    assert {"README.md", "docs/findings.md", "docs/troubleshooting.md", *WITH_HISTORY} <= checked
    for name in WITH_HISTORY:
        text = (ROOT / name).read_text(encoding="utf-8")
        current, history = text.find("\n## Current\n"), HISTORY.search(text)
        assert 0 < current < (history.start() if history else -1), f"{name}: no ## Current summary above its History"
    assert "<!-- numbers:run-time -->" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_region_is_what_the_saved_results_render_to():
    stale = [page.relative_to(ROOT).as_posix() for page in stale_pages(ROOT)]
    assert not stale, f"regions differ from the saved results in {stale}: run `{doc_numbers.COMMAND}`"


def test_no_page_calls_a_time_the_readmes():
    phrase = re.compile(r"README.s timing", re.IGNORECASE)
    assert not [page.name for page in pages(ROOT) if phrase.search(page.read_text(encoding="utf-8"))]


def _result(seconds: float, command: list[str]) -> dict:
    row = {"pipeline": "total", "nodes": 3, "seconds": seconds, "cpu_seconds": 1.0, "peak_rss_mb": float("nan")}
    run = {"process_seconds": seconds, "probe_ms_before": 4.0, "probe_ms_after": 4.5}
    return {
        "command": command,
        "cpu_count": 2,
        "provenance": {
            "git_commit": "abcdef0123",
            "machine": {
                "system": "Linux",
                "architecture": "x86_64",
                "cpu_count": 2,
                "cpu_model": "Some CPU",
                "cpu_flags": ["avx2"],
            },
        },
        "runs": {"idle": run, "busy": {**run, "process_seconds": 2 * seconds}},
        "totals": {"idle": [row], "busy": [{**row, "seconds": 2 * seconds}]},
    }


def test_regions_follow_the_newest_result_of_the_default_run(tmp_path):
    """The newest ``default_run-<date>.json`` of the README's command is the source (a smoke run's is not); a page
    whose region is stale is listed, and ``--write`` rewrites it from the JSON alone."""
    results = tmp_path / "docs" / "benchmarks" / "results"
    results.mkdir(parents=True)
    command = ["kedro", "run", "--runner", "thinkalike.runners.DaskRunner"]
    (results / "default_run-2026-01-01.json").write_text(json.dumps(_result(500.0, command)))
    (results / "default_run-2026-02-01.json").write_text(json.dumps(_result(400.0, command)))
    (results / "default_run-2026-03-01.json").write_text(json.dumps(_result(10.0, [*command, "--env", "test"])))
    assert latest_default_run(tmp_path).name == "default_run-2026-02-01.json"
    page = tmp_path / "README.md"
    page.write_text("# Title\n\n<!-- numbers:run-time -->\nstale\n<!-- numbers:end -->\n")
    assert main(["--repo", str(tmp_path)]) == 1
    assert main(["--repo", str(tmp_path), "--write"]) == 0
    text = " ".join(page.read_text().split())
    assert "**6 min 40 s**" in text and "13 min 20 s" in text and "commit abcdef0" in text and "Some CPU, avx2" in text
    assert "docs/benchmarks/default-run.md" in text  # the link, relative to the README
    assert main(["--repo", str(tmp_path)]) == 0
    page.write_text("<!-- numbers:nosuch -->\n<!-- numbers:end -->\n")
    with pytest.raises(KeyError, match="nosuch"):
        main(["--repo", str(tmp_path)])


def test_the_outside_observations_and_replicates_widen_the_range(tmp_path):
    for name in ("docs/benchmarks/results", "docs"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    shutil.copy(latest_default_run(ROOT), tmp_path / "docs/benchmarks/results")
    shutil.copy(ROOT / doc_numbers.OUTSIDE_JSON, tmp_path / doc_numbers.OUTSIDE_JSON)
    numbers = doc_numbers.collect(tmp_path)  # no docs/findings.json: no range
    text = " ".join(doc_numbers.render_run_time(numbers, Path("README.md")).split())
    assert "saved runs" not in text and "Outside observation (issue 50)" in text and "AVX2-only" in text
    peak = max(row["peak_rss_mb"] for row in numbers["totals"]["idle"] if row["peak_rss_mb"] == row["peak_rss_mb"])
    assert f"peak memory {peak / 1024:.1f} GiB" in text  # the largest peak RSS of the saved run's pipelines
