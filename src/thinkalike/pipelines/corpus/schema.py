"""The ``corpus`` section's check (its pydantic model: :class:`thinkalike.pipelines.schema.CorpusParameters`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkalike.language.natural_text import read_natural_text
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.schema import validate_corpus


def check_corpus(parameters: Mapping[str, Any]) -> None:
    """``corpus``: its keys and grammar, and that ``corpus.natural_text.path`` (when set) can be read."""
    corpus = validate_corpus(parameters.get("corpus"))
    if corpus.natural_text.path:
        try:
            read_natural_text(corpus.natural_text.path, corpus.natural_text.mode)
        except (OSError, ValueError) as error:
            raise ParameterError(f"corpus.natural_text.path: {error}") from None
