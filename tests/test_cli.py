"""An unknown ``--pipelines`` name is one ``Error: …`` line of ``kedro run`` (thinkalike.cli), before anything runs."""

import os
import subprocess
import sys

import pytest
from click import ClickException
from kedro.framework.cli.project import run as kedro_run
from kedro.framework.cli.utils import find_run_command

from tests.pipelines.conftest import make_project_copy
from thinkalike.cli import UnknownPipeline, check_pipeline_names, known_pipeline_names, run
from thinkalike.pipelines.specs import pipeline_specs


def test_the_known_names_are_every_project_pipeline_and_the_default():
    assert known_pipeline_names() == [*pipeline_specs(), "__default__"]


def test_known_names_pass():
    check_pipeline_names(["corpus", "cka", "__default__"])
    check_pipeline_names([])


def test_an_unknown_name_is_a_click_exception_naming_the_option_the_name_and_the_pipelines():
    with pytest.raises(UnknownPipeline) as raised:
        check_pipeline_names(["corpus", "nosuch"])
    assert isinstance(raised.value, ClickException) and isinstance(raised.value, ValueError)
    message = raised.value.message
    assert message.startswith("--pipelines: no pipeline named 'nosuch';"), message
    assert all(name in message for name in known_pipeline_names())
    assert "\n" not in message


def test_the_deprecated_option_is_named_as_given():
    with pytest.raises(UnknownPipeline, match="^--pipeline: no pipeline named 'cka2'"):
        check_pipeline_names(["cka2"], option="--pipeline")


def test_the_run_command_is_kedros_with_the_same_options_and_python_m_thinkalike_uses_it():
    assert [param.name for param in run.params] == [param.name for param in kedro_run.params]
    assert find_run_command("thinkalike") is run


def test_an_unknown_pipeline_is_one_error_line_of_kedro_run(tmp_path):
    project = make_project_copy(tmp_path)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "KEDRO_DISABLE_TELEMETRY": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--pipelines", "corpus,nosuch"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "--pipelines" in errors[0] and "'nosuch'" in errors[0], output
    assert all(name in errors[0] for name in known_pipeline_names()), output
    assert not (project / "data").exists()  # refused before anything ran
