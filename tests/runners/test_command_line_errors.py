"""A DaskRunner setting or cluster it refuses is one ``Error: …`` line of ``kedro run``, not a traceback: its errors
are click exceptions (the way the project's hooks' parameter errors are)."""

import os
import subprocess
import sys

import pytest
from click import ClickException

from tests.pipelines.conftest import make_project_copy
from thinkalike.runners.dask_runner import ClusterError
from thinkalike.runners.settings import ClusterSettings, ClusterSettingsError


@pytest.mark.parametrize(("error", "base"), [(ClusterSettingsError, ValueError), (ClusterError, RuntimeError)])
def test_the_runners_errors_are_click_exceptions_and_keep_their_base(error, base):
    raised = error("--runner-params: DaskRunner workers: expected a positive integer, got -1")
    assert isinstance(raised, ClickException) and isinstance(raised, base)
    assert str(raised) == raised.message == "--runner-params: DaskRunner workers: expected a positive integer, got -1"
    assert raised.exit_code == 1


def test_a_bad_setting_raises_a_click_exception_that_names_it_and_its_source():
    with pytest.raises(ClickException, match="^--runner-params: DaskRunner workers: expected a positive integer"):
        ClusterSettings.resolve({}, {"workers": -1})


def test_a_bad_runner_param_is_one_error_line_of_kedro_run(tmp_path):
    project = make_project_copy(tmp_path)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "KEDRO_DISABLE_TELEMETRY": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kedro",
            "run",
            "--runner",
            "thinkalike.runners.DaskRunner",
            "--runner-params",
            "workers=-1",
            "--pipelines",
            "corpus",
        ],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    errors = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "workers" in errors[0] and "-1" in errors[0], output
    assert "Traceback" not in output, output
    assert not (project / "data").exists()  # refused before anything ran
