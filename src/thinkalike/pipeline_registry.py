"""Project pipelines, built from the parameters of the configuration in use.

The zoo, activations and cka pipelines have one namespace per configured model or pair, so what
they contain depends on the environment (``--env``) and ``--params``. Kedro calls
``register_pipelines()`` without arguments, lazily, whenever something first reads
``kedro.framework.project.pipelines``; it cannot know the session's environment. Hence:

* :class:`ProjectContext` (``CONTEXT_CLASS`` in ``settings.py``) builds the pipelines from its own
  configuration as soon as it is created and installs them in Kedro's ``pipelines``. Every
  session creates one — ``kedro run``, ``kedro viz run --env``, ``kedro viz build``, notebooks —
  and project hooks are not involved (kedro-viz does not run them).
* :func:`register_pipelines` serves the lazy loading when no context was created (``kedro
  registry``): it reads ``conf/`` with ``KEDRO_ENV``, as ``KedroSession.create`` would.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kedro.framework.context import KedroContext
from kedro.framework.project import pipelines
from kedro.pipeline import Pipeline
from kedro.utils import find_kedro_project

from thinkalike.pipelines.builders import build_pipelines
from thinkalike.pipelines.parameters import configured_parameters, loader_parameters

__all__ = ["ProjectContext", "build_pipelines", "install_pipelines", "register_pipelines"]


def register_pipelines() -> dict[str, Pipeline]:
    """Kedro's entry point when no context exists: the pipelines of ``conf/`` in ``KEDRO_ENV`` (default ``local``)."""
    project_path = find_kedro_project(Path.cwd())
    if project_path is None:
        raise RuntimeError(
            f"no Kedro project at or above {Path.cwd()}: cannot read the parameters that the "
            "thinkalike pipelines are built from"
        )
    return build_pipelines(configured_parameters(project_path, os.environ.get("KEDRO_ENV")))


def install_pipelines(built: Mapping[str, Pipeline]) -> None:
    """Make ``built`` the content of Kedro's ``pipelines``, replacing any registry loaded before.

    ``configure(None)`` drops the lazy registry (without a module, Kedro's ``pipelines`` loads
    nothing and keeps what it is given); the next ``configure_project`` restores it.
    """
    pipelines.configure(None)
    pipelines.update(built)


class ProjectContext(KedroContext):
    """A ``KedroContext`` whose creation builds the project's pipelines from its own parameters.

    The parameters are the session's: its environment and runtime ``--params``, read raw from
    the config loader (Kedro's validated ``params`` would need the pipelines first).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        install_pipelines(build_pipelines(loader_parameters(self.config_loader)))
