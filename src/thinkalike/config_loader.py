"""The project's config loader: Kedro's ``OmegaConfigLoader`` whose ``parameters`` are those of the run's replicate.

One place applies :func:`thinkalike.replicate_seeds.replicate_parameters` — after the environment and the runtime
``--params`` are merged — so the pipelines' construction, their validation, the catalog's ``params:`` inputs and the
parameters logged to MLflow all see the same seeds: ``kedro run --params replicate=2`` is replicate 2 everywhere.
"""

from __future__ import annotations

from typing import Any

from kedro.config import OmegaConfigLoader

from thinkalike.replicate_seeds import replicate_parameters


class ReplicateConfigLoader(OmegaConfigLoader):
    """``OmegaConfigLoader`` with the replicate's seeds in ``parameters`` (module docstring)."""

    def __getitem__(self, key: str) -> dict[str, Any]:
        config = super().__getitem__(key)
        if key != "parameters":
            return config
        try:
            return replicate_parameters(config)
        except ValueError as error:  # a bad `replicate` value: one line naming the parameter
            from click import BadParameter

            raise BadParameter(str(error)) from None
