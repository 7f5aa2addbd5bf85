"""The project's parameters as seen when pipelines are *built* (not run).

Per-model pipelines are namespaced from the model lists in config, so the registry must read
parameters before the run. The project hook stores the run's parameters (with ``--env`` and
``--params`` applied) here after the context is created; elsewhere (``kedro viz``, a notebook)
they are read from ``conf/`` with the environment in ``KEDRO_ENV`` (default ``local``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_parameters: dict[str, Any] | None = None


def remember_parameters(parameters: dict[str, Any]) -> None:
    """Called by the project hook with the context's parameters."""
    global _parameters
    _parameters = dict(parameters)


def project_parameters() -> dict[str, Any]:
    """The parameters remembered for this run, or those of ``conf/`` under the current directory."""
    if _parameters is not None:
        return _parameters
    from kedro.config import OmegaConfigLoader
    from kedro.framework.project import settings

    loader = OmegaConfigLoader(conf_source=str(Path.cwd() / settings.CONF_SOURCE),
                               env=os.environ.get("KEDRO_ENV"), base_env="base", default_run_env="local")
    try:
        return dict(loader["parameters"])
    except Exception:  # noqa: BLE001 - no conf/ here (e.g. an import from elsewhere): build with no models
        return {}


def section(parameters: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """``parameters[name]`` from the given dict or the project's, ``{}`` when absent."""
    source = project_parameters() if parameters is None else parameters
    return dict(source.get(name) or {})
