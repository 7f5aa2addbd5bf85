"""What every pipeline's parameter schema shares: the strict base model, the device type, and the checks that
name a bad setting by its full key.

Each top-level section of ``parameters_<pipeline>.yml`` has its model in its pipeline's folder
(``thinkalike/pipelines/<name>/schema.py``: :class:`~thinkalike.pipelines.corpus.schema.CorpusParameters`,
:class:`~thinkalike.pipelines.zoo.schema.ZooParameters`,
:class:`~thinkalike.pipelines.activations.schema.ActivationParameters`,
:class:`~thinkalike.pipelines.stitching.schema.StitchingParameters`, …): a pydantic model of :class:`_Section`
(strict types: ``"64"`` is not an int; unknown keys are errors), where each setting's default is written. Settings
that have a model in the library (``TrainingConfig``, ``GrammarConfig``, ``CKASettings``, ``MLEMSettings``,
``FinetuneConfig``, ``PairsConfig``: strict pydantic models too) are fields of that type, nested as the YAML nests
them, so their own checks run when the section is parsed. Every error names the parameter's full key, e.g.
``activations.batch_size``, ``zoo.models.gelu_2l.training.lr`` or ``cka.pooling``.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from thinkalike.pipelines.errors import ParameterError

__all__ = ["Device", "ParameterError", "check_device", "dataclass_default", "validate_section"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def check_device(device: str) -> str:
    """``device`` unchanged; ``ValueError`` for a device string torch cannot parse or a device this machine lacks."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{device!r} is not a torch device (e.g. 'cpu', 'cuda', 'cuda:1')") from error
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{device!r} was asked for but this machine has no CUDA device; use null (CUDA when "
                "present, else CPU) or 'cpu'"
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(f"{device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{device!r} was asked for but MPS is not available here")
    return device


Device = typing.Annotated[str, AfterValidator(check_device)]
"""A torch device string this machine has (``cpu``, ``cuda``, ``cuda:1``…)."""


def _key(prefix: str, location: tuple[Any, ...]) -> str:
    return ".".join([prefix, *(str(part) for part in location if part != "__root__")])


def _message(error: Mapping[str, Any]) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return "unknown parameter"
    if "input" in error and error["type"] not in ("missing",) and not isinstance(error["input"], Mapping):
        return f"{message} (got {error['input']!r})"
    return message  # a whole settings model's check: its message names the field and the value


#: A settings model's own check names its field as ``<Model>.<field> <what is wrong>``.
_MODEL_FIELD = re.compile(r"^[A-Z]\w*\.(\w+) (.*)$", re.DOTALL)


def _problem(prefix: str, error: Mapping[str, Any]) -> str:
    """``<full key>: <message>``; a model check's ``<Model>.<field> …`` reads ``<full key>.<field> …``."""
    key, message = _key(prefix, error["loc"]), _message(error)
    named = _MODEL_FIELD.match(message)
    if named is None:
        return f"{key}: {message}"
    field, what = named.groups()
    return f"{key} {what}" if error["loc"] and error["loc"][-1] == field else f"{key}.{field} {what}"


def _raise_from(error: ValidationError, prefix: str) -> None:
    raise ParameterError("; ".join(_problem(prefix, e) for e in error.errors())) from None


def validate_section(model: type[BaseModel], values: Any, key: str) -> Any:
    """``model`` built from ``values``; a :class:`ParameterError` naming ``key.<field>`` otherwise."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ParameterError(f"{key}: must be a mapping of settings, got {values!r}")
    try:
        return model.model_validate(dict(values))
    except ValidationError as error:
        _raise_from(error, key)


def dataclass_default(cls: type, name: str) -> Any:
    """The default of dataclass ``cls``'s field ``name`` (its factory's value when it has one): what a section's typed
    field takes, so that the default is written once, in the library's settings."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default
