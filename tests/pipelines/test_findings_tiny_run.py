"""The findings (docs/findings.md) from a real run's outputs: the suite's shared tiny run (``tiny_project``),
loaded through the catalog as ``python -m thinkalike.findings_cli`` loads them (tests/reports/test_findings.py:
the rest)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pandas as pd
import pytest

from thinkalike.findings_cli import load_tables, main, open_catalog
from thinkalike.pipelines.specs import report_outline
from thinkalike.reports.findings import (
    END_MARKER,
    START_MARKER,
    claims_of,
    collect_errors,
    collect_findings,
    missing_tables,
    readme_region,
    render_document,
    render_findings,
)
from thinkalike.reports.findings.scorecard import scorecard
from thinkalike.run_record.clock import format_seconds

OUTLINE = report_outline()  # the project's report sections


@pytest.fixture(scope="module")
def tables(tiny_project):
    """The latest outputs, but the timing table of the shared run itself (the first version): other tests run
    single pipelines on the same project, and each run saves its own ``run_timings``."""
    project, _ = tiny_project
    catalog, parameters = open_catalog(project, "test")
    loaded = load_tables(catalog, parameters)
    first = min((project / "data" / "08_reporting" / "run_timings.parquet").iterdir())
    loaded["run_timings"] = pd.read_parquet(first / "run_timings.parquet")
    return loaded


def _finite(*values):
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def test_the_tiny_run_gives_finite_numbers_that_the_text_quotes(tables):
    assert {
        "zoo_summary",
        "cka_distances",
        "stitching_penalties",
        "mlem_profiles",
        "embedding_keep_k",
        "models.nli.groups",
        "run_timings",
    } <= set(tables)
    assert set(tables["model_configs"]) == {"gelu_1l", "neox_xs"}
    findings = collect_findings(tables, OUTLINE)
    assert missing_tables(findings) == ["scaling_summary"]  # conf/test has no GPT-NeoX family to scale
    assert collect_errors(findings) == []
    assert render_findings(findings, OUTLINE) == render_findings(
        json.loads(json.dumps(findings, sort_keys=True)), OUTLINE
    )
    text = render_findings(findings, OUTLINE).replace("\n", " ")  # the words, whatever the wrapping

    timing = findings["timing"]
    assert _finite(timing["total_seconds"], timing["peak_rss_mb"]) and timing["total_seconds"] > 0
    assert set(timing["pipelines"]) == {
        "corpus",
        "zoo",
        "activations",
        "stitching",
        "cka",
        "mlem",
        "embedding",
        "nli",
        "report",
    }
    assert f"— {format_seconds(timing['total_seconds'])} in all (measured {timing['date']}" in text
    assert f"zoo of 2 models {format_seconds(timing['pipelines']['zoo']['seconds'])}" in text
    # every claim's sentence is in the text exactly when it holds in this run (one run: no "varies" list)
    claims = claims_of(findings, OUTLINE)
    assert claims and len({c.id for c in claims}) == len(claims)
    for claim in claims:
        if claim.group is None:
            assert (claim.text.rstrip(".")[1:] in text) == claim.holds, claim.id

    cka = findings["cka"]
    assert cka["n_pairs"] == 3 and _finite(*cka["n_tokens"])

    stitching = findings["stitching"]
    assert stitching["grid"] == "diagonal" and stitching["n_stitches"] == 18 and stitching["n_trained"] == 9
    assert _finite(*stitching["self"]["span"]) and stitching["self"]["identity_max_abs"] == 0
    assert not any(c.id.startswith("stitching.asymmetry.") for c in claims)  # the tiny zoo has no SoLU/GeLU pair

    mlem = findings["mlem"]
    assert mlem["n_models"] == 2 and _finite(*mlem["spearman"])

    keep = findings["embedding"]["keep_k"]
    assert keep["V"] == tables["corpus_statistics"]["vocab_size"] and _finite(*keep["small_transpose"])

    nli = findings["nli"]
    assert nli["n_copies"] == 4 and _finite(*nli["test"], *nli["ood_non_entailed"])
    assert [c.id for c in claims if c.id.startswith("nli.test_")] == ["nli.test_below_rule", "nli.test_above_rule"]
    assert nli["stitching"]["layers"] == [0, 1, 2] and all(
        _finite(*values) for values in nli["stitching"]["curves"].values()
    )


def test_a_pipeline_that_did_not_run_is_said_so(tables):
    partial = {
        name: value
        for name, value in tables.items()
        if name not in ("stitching_penalties", "stitching_phis", "models.nli.groups")
    }
    findings = collect_findings(partial, OUTLINE)
    assert missing_tables(findings) == ["models.nli.groups", "scaling_summary", "stitching_penalties"]
    text = render_findings(findings, OUTLINE).replace("\n", " ")
    assert "Stitching: not in these outputs (no `stitching_penalties`: the pipeline was not run)." in text
    assert (
        "NLI (Brown et al. §4, offline): not in these outputs (no `models.nli.groups`: the pipeline was not run)."
        in text
    )
    assert "## MLEM " in text  # the others are unaffected
    assert {c.id.split(".")[0] for c in claims_of(findings, OUTLINE)} >= {"mlem", "embedding"}


def test_the_command_writes_the_json_and_the_findings_page_region(tiny_project, tmp_path, capsys):
    project, _ = tiny_project
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "code.py").write_text("x = 1\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "findings.md").write_text(f"# Findings\n\n{START_MARKER}\nold\n{END_MARKER}\n\n## After\n")
    (repo / "README.md").write_text("# Project\n")
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "src/code.py", "README.md", "docs/findings.md"], check=True)
    assert main(["--project", str(project), "--env", "test", "--repo", str(repo), "--write"]) == 0
    document = json.loads((repo / "docs" / "findings.json").read_text())
    assert len(document["source_digest"]) == 64 and "generated_at" in document
    assert len(document["replicates"]) == 1 and "claims" not in document  # one run: estimates, no verdict
    assert all(row["verdict_word"] in ("one run", "not testable") for row in document["scorecard"])
    page = (repo / "docs" / "findings.md").read_text()
    assert readme_region(page) == render_document(document, OUTLINE)
    assert page.startswith("# Findings\n\n") and page.endswith(f"{END_MARKER}\n\n## After\n")
    assert (repo / "README.md").read_text() == "# Project\n"  # the README is not written any more
    assert "wrote " in capsys.readouterr().out


def test_the_claims_command_prints_the_latest_runs_claims_and_checks_them(tiny_project, tmp_path, capsys):
    """``findings_cli --claims``: every claim of the run with its margin, in the shape docs/findings.json lists them;
    ``--check`` compares them with a committed document (here: made from this very run, so every claim holds)."""
    project, _ = tiny_project
    assert main(["--project", str(project), "--env", "test", "--claims"]) == 0
    printed = json.loads(capsys.readouterr().out)
    claims = printed["claims"]
    assert set(printed) == {"claims"} and claims
    assert {"id", "text", "template", "margin", "values"} <= set(claims[0])
    again = [
        c.as_json() for c in claims_of(collect_findings(load_tables(*open_catalog(project, "test")), OUTLINE), OUTLINE)
    ]
    assert [c["id"] for c in claims] == [c["id"] for c in again]  # stable ids: the same run, the same claims
    # --check: each scorecard estimate of this run against the committed replicates' prediction intervals; here
    # three replicates equal to this very run (facts: the interval is the round-off), so nothing moved
    findings = collect_findings(load_tables(*open_catalog(project, "test")), OUTLINE)
    rows = scorecard([findings, findings, findings])
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "findings.json").write_text(json.dumps({"scorecard": rows}))
    assert main(["--project", str(project), "--env", "test", "--check", "--repo", str(repo)]) == 0
    assert ": 0 moved" in capsys.readouterr().out
    # one part's committed effects planted elsewhere: the check names that part, and only it, and fails
    row = next(r for r in rows if any(all(e is not None for e in p["effects"]) for p in r["parts"].values()))
    name, part = next((n, p) for n, p in row["parts"].items() if all(e is not None for e in p["effects"]))
    part["effects"] = [e + 10.0 for e in part["effects"]]
    (repo / "docs" / "findings.json").write_text(json.dumps({"scorecard": rows}))
    assert main(["--project", str(project), "--env", "test", "--check", "--repo", str(repo)]) == 1
    out = capsys.readouterr().out
    assert f"  {row['key']}/{name}: " in out and ": 1 moved" in out
    assert main(["--project", str(project), "--env", "test", "--check", "--json", "--repo", str(repo)]) == 1
    checked = json.loads(capsys.readouterr().out)["checked"]
    assert [r["name"] for r in checked if r["moved"]] == [f"{row['key']}/{name}"]


def test_the_claims_command_prints_pure_json_that_can_be_piped(tiny_project):
    """``findings_cli --claims | python -m json.tool``: stdout is the JSON alone, Kedro's log lines go to stderr."""
    project, _ = tiny_project
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "thinkalike.findings_cli",
            "--project",
            str(project),
            "--env",
            "test",
            "--claims",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "KEDRO_DISABLE_TELEMETRY": "1"},
    )
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert json.loads(printed.stdout)["claims"]
    tool = subprocess.run([sys.executable, "-m", "json.tool"], input=printed.stdout, capture_output=True, text=True)
    assert tool.returncode == 0


def test_each_pipeline_saves_its_sections_numbers_and_the_findings_read_them(tiny_project, tables):
    """Issue 56 item 8: every section a pipeline declares is saved by that pipeline's ``collect_<section>_findings``
    node as ``<section>_findings``; the saved numbers are the section collected from the saved tables, and the
    findings command takes them as saved (the run timings alone are collected at report time)."""
    from thinkalike.findings_cli import project_findings, saved_sections
    from thinkalike.reports.findings import collect_section

    project, _ = tiny_project
    catalog, _ = open_catalog(project, "test")
    saved = saved_sections(catalog)
    expected = {section.section for section in OUTLINE.saved_sections}
    # conf/test scales no family: nothing makes the scaling section's tables, so nothing saves its numbers
    assert set(saved) == expected - {"scaling"} and "timing" not in expected and {"stitching", "nli"} <= expected
    for section in OUTLINE.saved_sections:
        if section.section in saved:
            assert saved[section.section] == collect_section(section, tables), section.section
    findings = project_findings(project, "test")
    assert {name: findings[name] for name in saved} == saved
    assert missing_tables(findings["scaling"]) == ["scaling_summary"]


def test_each_method_pipeline_saves_the_estimates_its_numbers_measure(tiny_project):
    """Issue 56 item 8: beside its numbers each pipeline saves ``<section>_estimates`` (question, part, estimate,
    within-run interval); over the run's sections they are the run's estimates made from its findings, each part
    made by one section."""
    from thinkalike.findings_cli import project_findings, saved_estimates
    from thinkalike.reports.experiments import estimates_dataset
    from thinkalike.reports.findings.scorecard import run_estimates

    project, _ = tiny_project
    catalog, _ = open_catalog(project, "test")
    per_section = {
        s.section: catalog.load(estimates_dataset(s.section)) for s in OUTLINE.saved_sections if s.section != "scaling"
    }
    keys = [f"{row['question']}/{row['part']}" for rows in per_section.values() for row in rows]
    assert len(keys) == len(set(keys))  # each part from one section
    estimates = saved_estimates(catalog)
    assert estimates and estimates == run_estimates(project_findings(project, "test"))
    assert {row["question"] for row in per_section["nli"]} == {"brown_nli_groups"}
    assert {row["question"] for row in per_section["cka"]} <= {"brown_blocks"}  # conf/test scales no family


def test_a_saved_section_is_taken_as_saved_and_never_collected_again():
    """``collect_findings`` with saved sections collects none of them (their tables are absent here, so collecting
    would say they are missing); a section never saved (``None``) is collected from the tables, which says so."""
    names = [section.section for section in OUTLINE.saved_sections]
    saved = {name: {"saved_marker": index} for index, name in enumerate(names)}
    saved[names[0]] = None
    findings = collect_findings({"parameters": {}}, OUTLINE, saved)
    assert all(findings[name] == {"saved_marker": index} for index, name in enumerate(names) if index)
    assert missing_tables(findings[names[0]]) and "saved_marker" not in findings[names[0]]
    assert missing_tables(findings["timing"]) == ["run_timings"]  # the run timings are still collected
