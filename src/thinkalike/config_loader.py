"""The project's config loader: Kedro's ``OmegaConfigLoader`` whose ``parameters`` merge key by key and are those of
the run's replicate.

An environment's parameter files (``conf/<env>/parameters*.yml``) merge into ``conf/base``'s key by key when
``CONFIG_LOADER_ARGS`` asks for ``merge_strategy={"parameters": "soft"}`` (``settings.py`` does): a mapping in both
merges recursively, any other value (a list, a scalar, null, a mapping over a non-mapping) is the environment's,
so an environment holds only the keys it changes. The keys a pipeline declares ``replaced_whole``
(:attr:`thinkalike.pipelines.specs.PipelineSpec.replaced_whole`: ``zoo.models``, ``activations.models``,
``cka.pairs`` …, collections named by the user) take the environment's value whole when one of its files sets them:
``conf/base``'s models, pairs and groups do not survive beside the environment's own. A runtime ``--params`` key
merges key by key everywhere (Kedro merges it into both sides first), so ``--params zoo.models.gelu_2l.seed=5``
changes one model.

One place applies :func:`thinkalike.replicate_seeds.replicate_parameters` — after the environment and the runtime
``--params`` are merged — so the pipelines' construction, their validation, the catalog's ``params:`` inputs and the
parameters logged to MLflow all see the same seeds: ``kedro run --params replicate=2`` is replicate 2 everywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from kedro.config import OmegaConfigLoader
from omegaconf import DictConfig, OmegaConf

from thinkalike.replicate_seeds import replicate_parameters


def _as_mapping(container: object) -> Mapping[str, Any]:
    """A parameters file's top level: a mapping (an empty file reads as None)."""
    return container if isinstance(container, Mapping) else {}


def merge_parameters(
    base: Mapping[str, Any], environment: Mapping[str, Any], replaced_whole: Collection[str] = (), prefix: str = ""
) -> dict[str, Any]:
    """``base`` with ``environment``'s values, key by key: where both hold a mapping (and its full key, ``prefix``
    included, is not in ``replaced_whole``) the two merge recursively; elsewhere the environment's value replaces
    ``base``'s. Keys keep ``base``'s order, new ones follow in ``environment``'s."""
    merged = dict(base)
    for key, value in environment.items():
        full_key = f"{prefix}{key}"
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping) and full_key not in replaced_whole:
            merged[key] = merge_parameters(merged[key], value, replaced_whole, f"{full_key}.")
        else:
            merged[key] = value
    return merged


def key_paths(config: Mapping[str, Any], prefix: str = "") -> set[str]:
    """Every full key of ``config``, mappings' own included (``{"a": {"b": 1}}``: ``a`` and ``a.b``)."""
    paths = set()
    for key, value in config.items():
        paths.add(f"{prefix}{key}")
        if isinstance(value, Mapping):
            paths |= key_paths(value, f"{prefix}{key}.")
    return paths


class ReplicateConfigLoader(OmegaConfigLoader):
    """``OmegaConfigLoader`` whose soft-merged ``parameters`` replace the declared collections whole, with the
    replicate's seeds (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._environment_parameter_keys: set[str] = set()  # the keys the run environment's parameter files set
        super().__init__(*args, **kwargs)

    def __getitem__(self, key: str) -> dict[str, Any]:
        config = super().__getitem__(key)
        if key != "parameters":
            return config
        try:
            return replicate_parameters(config)
        except ValueError as error:  # a bad `replicate` value: one line naming the parameter
            from click import BadParameter

            raise BadParameter(str(error)) from None

    def _read_raw_config(self, key: str) -> tuple[dict[Path, DictConfig], dict[Path, DictConfig], str, str, set[Path]]:
        """Kedro's reading of the files, noting which parameter keys the environment's own files set (the merged
        environment config also holds the runtime ``--params``, which must not replace a collection whole)."""
        raw = super()._read_raw_config(key)
        if key == "parameters":
            environment_configs = raw[1]
            self._environment_parameter_keys = {
                path
                for config in environment_configs.values()
                for path in key_paths(_as_mapping(OmegaConf.to_container(config, resolve=False)))
            }
        return raw

    def _merge_configs(self, config: dict[str, Any], env_config: dict[str, Any], key: str, env_path: str) -> Any:
        """``parameters`` under the soft strategy: :func:`merge_parameters`, the environment's files replacing the
        keys declared ``replaced_whole`` that they set; anything else as Kedro merges it."""
        if key != "parameters" or self.merge_strategy.get(key) != "soft":
            return super()._merge_configs(config, env_config, key, env_path)
        from thinkalike.pipelines.specs import keys_replaced_whole

        return merge_parameters(config, env_config, keys_replaced_whole() & self._environment_parameter_keys)
