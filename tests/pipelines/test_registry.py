"""Pipelines are built from the parameters of the environment in use, by the context, without hooks or globals."""

import warnings

import pytest
from kedro.framework.project import pipelines
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.pipeline import Node

from tests.pipelines.conftest import make_project_copy
from thinkalike.pipeline_registry import build_pipelines, register_pipelines
from thinkalike.pipelines.builders import has_configuration_error
from thinkalike.pipelines.cka.pairs import pair_namespace
from thinkalike.pipelines.namespaces import model_dataset
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import ParameterError
from thinkalike.pipelines.specs import pipeline_specs
from thinkalike.pipelines.validation import validate_parameters

TEST_MODELS = {"gelu_1l", "neox_xs"}


def zoo_models(built) -> set[str]:
    """The models trained: ``train_model`` runs in namespace ``models.<model>``."""
    return {node.namespace.removeprefix("models.") for node in built["zoo"].nodes if node.name.endswith(".train_model")}


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
    pair = next(node for node in streamed["cka"].nodes if node.namespace == pair_namespace("gelu_1l", "neox_xs"))
    assert model_dataset("gelu_1l", "activations") not in pair.inputs and "evaluation_sequences" in pair.inputs
    stored = context_pipelines(project, "test", include_hooks=True)
    assert (
        "models.gelu_1l.activations"
        in next(node for node in stored["cka"].nodes if node.namespace == "models.cka.gelu_1l__neox_xs").inputs
    )


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
    assert set(built) == {"corpus", "zoo", "activations", "cka", "stitching", "__default__"} | set(pipeline_specs())
    assert set(built["__default__"].nodes) == {node for name in pipeline_specs() for node in built[name].nodes}
    assert built["nli"].nodes

    for name, spec in pipeline_specs().items():  # each alone too (the warning is printed once a process)
        monkeypatch.setattr(Node, "__dotted_dataset_name_warned__", False, raising=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            spec.build(RunSettings(parameters))
        assert not [warning for warning in caught if "contain '.'" in str(warning.message)], name


@pytest.mark.parametrize(("section", "name"), [("zoo", "cka"), ("zoo", "a.b"), ("activations", "stitching")])
def test_a_model_name_that_cannot_be_a_namespace_is_refused(project, section, name):
    parameters = configured_parameters(project, "test")
    model = parameters["zoo"]["models"]["gelu_1l"] if section == "zoo" else "zoo:gelu_1l"
    parameters[section]["models"] = {**parameters[section]["models"], name: model}
    built = build_pipelines(parameters)  # building never fails: the pipelines that need the name say why
    assert has_configuration_error(built[section]) and len(built[section].nodes) == 1
    with pytest.raises(ParameterError, match=rf"^{section}\.models\.{name.replace('.', '[.]')}: a model name"):
        validate_parameters(parameters)  # and the run that uses them stops before any node, naming the key
