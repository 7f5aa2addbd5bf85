"""The project's parameters as seen when pipelines are *built* (not run).

Per-model pipelines are namespaced from the model lists in config, so pipelines are built from
parameters, always passed explicitly. Who passes them:

* :class:`thinkalike.pipeline_registry.ProjectContext` (the project's ``CONTEXT_CLASS``) builds
  the pipelines from its own configuration — the ``--env`` and ``--params`` of the session in use —
  whenever a context is created: ``kedro run``, ``kedro viz``, notebooks, tests.
* ``register_pipelines()``, for Kedro's lazy loading when no context exists (``kedro registry``),
  reads :func:`configured_parameters` of ``KEDRO_ENV`` like ``KedroSession.create`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kedro.config import AbstractConfigLoader, MissingConfigException


def section(parameters: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``parameters[name]`` as a dict, ``{}`` when absent or empty."""
    return dict(parameters.get(name) or {})


def loader_parameters(config_loader: AbstractConfigLoader) -> dict[str, Any]:
    """The ``parameters`` of a config loader (runtime ``--params`` included); ``{}`` when there are none.

    Raw, as in the YAML files: Kedro's own validation of ``context.params`` looks at the built
    pipelines, so it cannot be used to build them.
    """
    try:
        return dict(config_loader["parameters"])
    except MissingConfigException:
        return {}


def configured_parameters(project_path: Path, env: str | None) -> dict[str, Any]:
    """The parameters of ``<project_path>/conf`` in environment ``env`` (``None``: the default, ``local``).

    Read with the project's ``CONFIG_LOADER_CLASS`` and ``CONFIG_LOADER_ARGS`` from ``settings.py``,
    as a session would; where nothing configured a Kedro project yet (a script, a test process), Kedro's settings
    are first read from this package's ``settings.py`` (as ``bootstrap_project`` would), not left at Kedro's
    defaults (whose loader would not merge environments as the project does).
    """
    from kedro.framework import project

    if project.PACKAGE_NAME is None:
        project.settings.configure(f"{__name__.split('.')[0]}.settings")
    settings = project.settings
    loader = settings.CONFIG_LOADER_CLASS(
        conf_source=str(Path(project_path) / settings.CONF_SOURCE), env=env, **settings.CONFIG_LOADER_ARGS
    )
    return loader_parameters(loader)


def run_parameters(catalog) -> dict[str, Any]:
    """The parameters of a run (``--env`` and ``--params`` applied), from the run's catalog.

    For hooks: Kedro adds them to every catalog a context builds as the ``parameters`` dataset
    (read from the dataset directly, so the catalog does not log a load).
    """
    return dict(catalog["parameters"].load())
