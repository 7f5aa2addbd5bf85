"""The claims tests' input (conftest): the fixture file is a real run's findings dict (no claims, no replicates),
and :func:`findings_of` reads the findings of a document in either format."""

from __future__ import annotations

import json

from tests.reports.claims.conftest import DEFAULT_RUN, default_run_findings, findings_of

SECTIONS = {"cka", "stitching", "mlem", "embedding", "nli", "scaling", "measures", "literature"}


def test_the_fixture_file_holds_the_findings_of_a_run():
    document = json.loads(DEFAULT_RUN.read_text(encoding="utf-8"))
    assert "replicates" not in document and "claims" not in document
    findings = default_run_findings()
    assert SECTIONS <= set(findings)
    assert not any("error" in findings[s] or "missing" in findings[s] for s in SECTIONS - {"literature"})


def test_each_call_is_a_fresh_copy():
    first = default_run_findings()
    first["stitching"]["identity_between"] = None
    assert default_run_findings()["stitching"]["identity_between"] is not None


def test_findings_of_reads_both_formats():
    old = default_run_findings()
    assert findings_of(old) == old
    other = {**old, "stitching": {"empty": True}}
    document = {
        "claims": [],
        "replicates": [{"replicate": 0, "run": {}, "findings": old}, {"replicate": 1, "run": {}, "findings": other}],
        "roundoff": None,
        "git_commit": "0" * 40,
    }
    assert findings_of(document) == old
