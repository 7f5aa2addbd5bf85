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

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        """Bad configuration fails here, before any compute."""
        validate_parameters(project_parameters())


class FigureHooks:
    """Logs every saved matplotlib figure to the active MLflow run (``figures/<dataset>.png``), then closes it."""

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data, node) -> None:
        if isinstance(data, Figure):
            if mlflow.active_run() is not None:
                mlflow.log_figure(data, f"figures/{dataset_name}.png")
            plt.close(data)
