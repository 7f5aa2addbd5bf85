"""Pipelines are built from the parameters of the environment in use, by the context, without hooks or globals."""

import warnings

import pytest
from kedro.framework.project import pipelines
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.pipeline import Node

from tests.pipelines.conftest import make_project_copy
from thinkalike.pipeline_registry import build_pipelines, register_pipelines
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.zoo.pipeline import create_pipeline as zoo_pipeline

TEST_MODELS = {"gelu_1l", "neox_xs"}


def zoo_models(built) -> set[str]:
    return {node.namespace for node in built["zoo"].nodes if node.namespace}


@pytest.fixture
def project(tmp_path):
    copy = make_project_copy(tmp_path)
    bootstrap_project(copy)
    return copy


def context_pipelines(project, env, runtime_params=None, include_hooks=False):
    """The project pipelines once a session of ``env`` created its context (hooks off unless asked, as in kedro-viz)."""
    with KedroSession.create(project_path=project, env=env, runtime_params=runtime_params) as session:
        if not include_hooks:
            from kedro_viz.integrations.utils import _VizNullPluginManager

            session._hook_manager = _VizNullPluginManager()  # what kedro viz does without --include-hooks
        session.load_context()
        return dict(pipelines)


def test_the_context_builds_the_pipelines_of_its_environment_and_params(project):
    base_models = set(configured_parameters(project, None)["zoo"]["models"])
    assert TEST_MODELS.isdisjoint(base_models)

    assert zoo_models(context_pipelines(project, "test")) == TEST_MODELS
    assert zoo_models(context_pipelines(project, None)) == base_models  # nothing kept from the previous session
    streamed = context_pipelines(project, "test", {"cka": {"mode": "streaming"}})
    pair = next(node for node in streamed["cka"].nodes if node.namespace == "cka_gelu_1l__neox_xs")
    assert "gelu_1l.activations" not in pair.inputs and "evaluation_sequences" in pair.inputs
    stored = context_pipelines(project, "test", include_hooks=True)
    assert "gelu_1l.activations" in next(node for node in stored["cka"].nodes
                                         if node.namespace == "cka_gelu_1l__neox_xs").inputs


def test_without_a_context_kedro_env_is_read(project, monkeypatch):
    monkeypatch.chdir(project / "conf")  # the project is found above the current directory
    monkeypatch.setenv("KEDRO_ENV", "test")
    assert zoo_models(register_pipelines()) == TEST_MODELS
    monkeypatch.delenv("KEDRO_ENV")
    assert "solu_2l" in zoo_models(register_pipelines())


def test_without_a_project_the_error_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="no Kedro project at or above"):
        register_pipelines()


def test_default_is_the_sum_and_dotted_names_do_not_warn(project, monkeypatch):
    parameters = configured_parameters(project, None)
    monkeypatch.setattr(Node, "__dotted_dataset_name_warned__", False, raising=False)  # Kedro warns once a process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = build_pipelines(parameters)
    assert not [warning for warning in caught if "contain '.'" in str(warning.message)]
    assert set(built) == {"corpus", "zoo", "activations", "cka", "stitching", "__default__"}
    assert set(built["__default__"].nodes) == {node for name in ("corpus", "zoo", "activations", "cka", "stitching")
                                                for node in built[name].nodes}

    monkeypatch.setattr(Node, "__dotted_dataset_name_warned__", False, raising=False)
    with pytest.warns(UserWarning, match="contain '.'"):  # what building the summaries alone would print
        zoo_pipeline(parameters)
