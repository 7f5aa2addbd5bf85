"""``findings_cli --replicates``: the findings of several replicates merged into claims, without running (the tiny
project's saved outputs stand in for replicates)."""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.pipelines.conftest import PROJECT_ROOT as ROOT
from thinkalike.reports.findings_cli import replicate_folders, write_replicate_findings


def test_replicates_findings_merge_each_replicates_claims(tiny_project_as_run, tmp_path):
    workdir = tmp_path / "replicates"
    for replicate in range(2):  # the same saved run twice: every claim holds in both or in neither, by the same margin
        shutil.copytree(tiny_project_as_run, workdir / f"replicate-{replicate}")
        (workdir / f"replicate-{replicate}" / "replicate.json").write_text(json.dumps({"seconds": 60.0}))
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "code.py").write_text("x = 1\n")
    shutil.copytree(ROOT / "conf" / "base", repo / "conf" / "base")
    # no docs/findings.md yet: --write makes the page (a title and the markers)
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "src/code.py"], check=True)
    (repo / "conf" / "base" / "mlflow.yml").write_text("mlflow: {enabled: false}\n")
    folders = replicate_folders(workdir)
    assert [f.name for f in folders] == ["replicate-0", "replicate-1"]
    assert write_replicate_findings(folders, "test", repo, write=True) == 0
    document = json.loads((repo / "docs" / "findings.json").read_text())
    assert [r["replicate"] for r in document["replicates"]] == [0, 1]
    # the same margin twice carries no size (no new draw): every proposition is unresolved, none a finding
    assert document["claims"] and all(
        c["status"] == "unresolved" and len(c["margin"]) == 2 and c["margin"][0] == c["margin"][1] and c["noise"] == 0
        for c in document["claims"]
    )
    # two equal replicates: every measured part is a fact, its intervals one point, its verdict by its sign
    measured = [p for row in document["scorecard"] for p in row["parts"].values() if p.get("ci95")]
    assert measured and all(p["fact"] and p["ci95"] == [p["mean"], p["mean"]] for p in measured)
    assert all(
        p["verdict"] == ("reproduced" if p["mean"] > 0 else "opposite" if p["mean"] < 0 else "absent")
        for p in measured
        if not p.get("gate")  # behind a gate that failed or is undecided: not testable or inconclusive
    )
    page = (repo / "docs" / "findings.md").read_text()
    assert page.startswith("# Findings\n\n<!-- findings:start -->\n") and page.endswith("<!-- findings:end -->\n")
    text = page.replace("\n", " ")
    assert "**Where these findings come from.** 2 independent replicates of the default run" in text
    assert "Unresolved — these hold in every replicate" in text
    assert "each replicate's `kedro run` took 1 min 0 s, 2 min 0 s in all" in text  # one number when they agree
