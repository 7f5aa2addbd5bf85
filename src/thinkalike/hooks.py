"""Project hooks."""

from kedro.framework.hooks import hook_impl

from thinkalike.pipelines.parameters import remember_parameters


class ParameterHooks:
    """Hands the run's parameters to the pipeline builders (namespaced per-model pipelines)."""

    @hook_impl
    def after_context_created(self, context) -> None:
        remember_parameters(context.params)
