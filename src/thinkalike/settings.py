"""Kedro project settings. MLflow tracking comes from the kedro-mlflow plugin (conf/base/mlflow.yml)."""

from kedro.config import OmegaConfigLoader

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
}

from thinkalike.hooks import FigureHooks, MlflowRunClosingHooks, ParameterHooks  # noqa: E402

HOOKS = (ParameterHooks(), FigureHooks(), MlflowRunClosingHooks())
