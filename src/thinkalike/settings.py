"""Kedro project settings. MLflow tracking: :mod:`thinkalike.run_record.tracking` via the project hooks (conf/<env>/mlflow.yml)."""

import warnings

from thinkalike.config_loader import ReplicateConfigLoader
from thinkalike.hooks import ClusterSettingsHooks, MlflowTrackingHooks, ParameterHooks, ThreadPolicyHooks
from thinkalike.pipeline_registry import ProjectContext
from thinkalike.pipelines.report.hooks import MissingReportInputsHooks
from thinkalike.pipelines.report.latest import LatestReportHooks
from thinkalike.run_record.timing_hooks import RunTimingHooks

# Builds the pipelines from the session's own parameters (--env, --params) when it is created,
# for kedro run, kedro viz and notebooks alike (see thinkalike.pipeline_registry).
CONTEXT_CLASS = ProjectContext

# Parameters with the run's replicate seeds (`--params replicate=<r>`; thinkalike.replicate_seeds). An environment's
# parameter files merge into conf/base's key by key ("soft"), the collections a pipeline declares replaced_whole
# (zoo.models, cka.pairs …) excepted (thinkalike.config_loader); other files replace whole top-level keys.
CONFIG_LOADER_CLASS = ReplicateConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "merge_strategy": {"parameters": "soft"},
    "config_patterns": {"mlflow": ["mlflow*", "mlflow*/**"], "dask": ["dask*", "dask*/**"]},
}

# RunTimingHooks saves the run_timings table (thinkalike.run_record.timing_hooks) and hands it to the MLflow
# hooks, whose run is still open then (its tryfirst end-of-run hooks precede MLflow's trylast ones).
# LatestReportHooks comes last: of the trylast hooks, pluggy calls the last registered last, so the newest report is
# copied to data/08_reporting/latest/report.html after every other hook, and its log line is the run's last.
_TRACKING = MlflowTrackingHooks()
HOOKS = (
    ParameterHooks(),
    ThreadPolicyHooks(),
    ClusterSettingsHooks(),
    _TRACKING,
    RunTimingHooks(record=_TRACKING.record_output),
    MissingReportInputsHooks(),
    LatestReportHooks(),
)

# Kedro 1.7's own config loader calls an OmegaConf function that OmegaConf has deprecated; the
# warning says nothing about this project and would open every run (3 × 5 lines).
warnings.filterwarnings("ignore", message=r"register_new_resolver\(\) is deprecated", category=UserWarning)

# The project records runs itself (thinkalike.run_record.tracking); kedro-mlflow, if installed, must not
# open a second run.
DISABLE_HOOKS_FOR_PLUGINS = ("kedro-mlflow",)
