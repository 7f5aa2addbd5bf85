"""The run's parameters with each section parsed once (no Kedro import).

A :class:`RunSettings` is made once where the pipelines are built (:func:`thinkalike.pipelines.builders.build_pipelines`)
and once where a run's settings are checked before its first node
(:func:`thinkalike.pipelines.validation.validate_parameters`), and handed to every builder and check
(:attr:`thinkalike.pipelines.specs.PipelineSpec.build`, ``check``). A builder or check asks for a section by its
parser — ``settings.parsed(corpus_section)`` — and gets the typed section: parsed on first use, kept for the next
reader. A parser is a function of the settings (so a section that needs another's, as ``nli`` needs the corpus's
context length, asks for it the same way) whose errors name the key; an error is not kept, so each reader of a
broken section gets it (the builder's pipeline becomes a configuration-error node, the check stops the run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

Parsed = TypeVar("Parsed")


class RunSettings:
    """The run's ``parameters`` (as Kedro gives them) and the sections parsed from them so far."""

    def __init__(self, parameters: Mapping[str, Any]) -> None:
        self.parameters = parameters
        self._parsed: dict[Callable[[RunSettings], Any], Any] = {}

    def raw(self, section: str) -> Any:
        """Section ``section`` as written (None when absent)."""
        return self.parameters.get(section)

    def parsed(self, parse: Callable[[RunSettings], Parsed]) -> Parsed:
        """``parse(self)``, computed on first use and kept: every reader of a section shares one parse."""
        if parse not in self._parsed:
            self._parsed[parse] = parse(self)
        return self._parsed[parse]
