"""Round-off as a replicate (issue 38 §4): the tiny project run again with the same seeds but other float kernels —
torch's vector kernels for another CPU capability and MKL's portable GEMM path, what a run on another x86 CPU gets —
moves the numbers at round-off, and the claims that hold by a clear margin hold in both runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.pipelines.conftest import make_project_copy
from thinkalike.findings_cli import project_findings
from thinkalike.pipelines.specs import report_outline
from thinkalike.replicates import other_kernels
from thinkalike.reports.findings import claims_of, roundoff_comparison

OUTLINE = report_outline()  # the project's report sections

#: A claim "stable enough to test": its margin in the reference run is at least this far from 0.
STABLE_MARGIN = 0.05


@pytest.mark.slow  # a second tiny run (~30 s): round-off is an optional comparison now, not part of the findings
def test_other_kernels_move_the_numbers_but_not_the_claims_that_hold_clearly(tiny_project_as_run, tmp_path):
    reference = project_findings(tiny_project_as_run, "test")
    project = make_project_copy(tmp_path)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "KEDRO_DISABLE_TELEMETRY": "1", **other_kernels()}
    run = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--env", "test"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    other = project_findings(project, "test")
    comparison = roundoff_comparison(
        reference, other, " ".join(f"{k}={v}" for k, v in other_kernels().items()), OUTLINE
    )
    assert comparison["n_changed"] > 0, "other kernels left every number bit-identical: no round-off replicate"
    margins = {c.id: c.margin for c in claims_of(other, OUTLINE)}
    stable = [c for c in claims_of(reference, OUTLINE) if c.margin is not None and abs(c.margin) >= STABLE_MARGIN]
    assert len(stable) >= 10
    turned = [c.id for c in stable if (margins.get(c.id) is not None and margins[c.id] > 0) != c.holds]
    assert not turned, f"round-off turned over claims with |margin| >= {STABLE_MARGIN}: {turned}"
    assert set(comparison["claims_changed"]) <= {c.id for c in claims_of(reference, OUTLINE)} - {c.id for c in stable}
