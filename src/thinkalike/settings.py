"""Kedro project settings. MLflow tracking: :mod:`thinkalike.tracking` via the project hooks (conf/<env>/mlflow.yml)."""

from kedro.config import OmegaConfigLoader

from thinkalike.hooks import MlflowTrackingHooks, ParameterHooks

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "config_patterns": {"mlflow": ["mlflow*", "mlflow*/**"]},
}

HOOKS = (ParameterHooks(), MlflowTrackingHooks())

# The project records runs itself (thinkalike.tracking); kedro-mlflow, if installed, must not
# open a second run.
DISABLE_HOOKS_FOR_PLUGINS = ("kedro-mlflow",)
