"""``findings_cli --replicates``: the scorecard of several replicates, without running (the tiny
project's saved outputs stand in for replicates)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

from tests.pipelines.conftest import PROJECT_ROOT as ROOT
from thinkalike.findings_cli import replicate_folders, write_replicate_findings


def test_replicates_findings_decide_the_scorecard_over_replicates(tiny_project_as_run, tmp_path):
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
    assert "claims" not in document  # the replicates' document: the scorecard, no claims
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
    assert "## Each question's parts" in text and "Unresolved" not in text
    assert "each replicate's `kedro run` took 1 min 0 s, 2 min 0 s in all" in text  # one number when they agree

    # collected again over a document that holds a real-model column: that column's replicates are kept, and the
    # plan they ran under (at their run's commit, here one whose plan differs) is named as earlier
    plan = repo / "conf" / "base" / "analysis_plan.yml"
    now = plan.read_text()
    plan.write_text(now + "# an earlier wording\n")
    subprocess.run(["git", "-C", str(repo), "add", "conf/base/analysis_plan.yml"], check=True)
    git_user = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(repo), *git_user, "commit", "-q", "-m", "plan then"], check=True)
    then = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    plan.write_text(now)
    real = [{"replicate": 10, "run": {"git_commit": then}, "findings": document["replicates"][0]["findings"]}]
    (repo / "docs" / "findings.json").write_text(json.dumps({**document, "real_replicates": real}))
    # these replicates ran at that commit too: its plan is named once, for them and the kept column alike
    runs = [{"seconds": 60.0, "replicate": r, "git_commit": then} for r in range(2)]
    assert write_replicate_findings(folders, "test", repo, write=False, records=runs) == 0
    again = json.loads((repo / "docs" / "findings.json").read_text())
    assert again["real_replicates"] == real
    assert again["analysis_plan"]["earlier"] == [
        {"git_commit": then, "sha256": hashlib.sha256((now + "# an earlier wording\n").encode()).hexdigest()}
    ]
