"""Project hooks."""

import matplotlib.pyplot as plt
import mlflow
from kedro.framework.hooks import hook_impl
from kedro.framework.project import pipelines
from matplotlib.figure import Figure

from thinkalike.pipelines.parameters import project_parameters, remember_parameters
from thinkalike.pipelines.validation import validate_parameters

PIPELINE_REGISTRY = "thinkalike.pipeline_registry"


class ParameterHooks:
    """Hands the run's parameters (with ``--env`` and ``--params``) to the pipeline builders.

    Per-model pipelines are namespaced from the model lists in config; if the CLI built the
    pipelines before the context existed, they are rebuilt from the run's parameters.
    """

    @hook_impl
    def after_context_created(self, context) -> None:
        remember_parameters(context.params)
        pipelines.configure(PIPELINE_REGISTRY)

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        """Bad configuration fails here, before any compute (and before kedro-mlflow opens a run)."""
        validate_parameters(project_parameters())


class FigureHooks:
    """Logs every saved matplotlib figure to the active MLflow run (``figures/<dataset>.png``), then closes it."""

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data, node) -> None:
        if isinstance(data, Figure):
            if mlflow.active_run() is not None:
                mlflow.log_figure(data, f"figures/{dataset_name}.png")
            plt.close(data)


class MlflowRunClosingHooks:
    """Closes the MLflow run of a ``kedro run`` completely.

    kedro-mlflow 2.0.3 re-enters its run (``start_run(run_id, nested=True)``) before every node,
    and MLflow 3 stacks each re-entry, so its single ``end_run()`` leaves the run open in the
    process (a notebook, a test, a second session). A run that was open before ``kedro run`` is
    left alone, as kedro-mlflow does.
    """

    def __init__(self) -> None:
        self._preexisting_run_id: str | None = None
        self._run_id: str | None = None

    @hook_impl(tryfirst=True)
    def after_context_created(self, context) -> None:
        active = mlflow.active_run()
        self._preexisting_run_id = active.info.run_id if active else None

    @hook_impl(trylast=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        active = mlflow.active_run()
        self._run_id = active.info.run_id if active else None

    def _close(self, status: str) -> None:
        while (active := mlflow.active_run()) is not None and active.info.run_id == self._run_id \
                and self._run_id != self._preexisting_run_id:
            mlflow.end_run(status)

    @hook_impl(trylast=True)
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        self._close("FINISHED")

    @hook_impl(trylast=True)
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        self._close("FAILED")
