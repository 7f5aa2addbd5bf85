"""The ``corpus`` section: its model (:class:`CorpusParameters`, where each default is written), its parse
(:func:`validate_corpus`; of the run's settings :func:`corpus_section`, which the corpus pipeline's builder and
every other pipeline that needs the corpus's sizes call) and its check before a run (:func:`check_corpus`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from thinkalike.language.grammar import (
    ANIMATE_NOUNS,
    INTRANSITIVE_VERBS,
    TRANSITIVE_VERBS,
    ControlledConfig,
    GrammarConfig,
)
from thinkalike.language.natural_text import PATH_PARAMETER, read_natural_text
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import _Section, validate_section


class NaturalTextParameters(_Section):
    """``corpus.natural_text``: ``path`` (null: grammar sentences only), ``mode`` (``lines``: one document per
    line | ``plain``), ``use`` (``join`` adds the documents to the grammar sentences, ``replace`` uses them alone)."""

    path: str | None = None
    mode: Literal["lines", "plain"] = "lines"
    use: Literal["join", "replace"] = "join"


class ControlledStimuliParameters(_Section):
    """``corpus.controlled_stimuli``: the paper's kind of stimuli
    (:class:`~thinkalike.language.grammar.ControlledConfig`), added to the evaluation texts when ``enabled``;
    ``factors`` maps features to crossed values (null: defaults)."""

    enabled: bool = False
    factors: dict[str, list[str]] | None = None
    nouns: int = Field(2, ge=2, le=len(ANIMATE_NOUNS))
    verbs: int = Field(2, ge=1, le=min(len(TRANSITIVE_VERBS), len(INTRANSITIVE_VERBS)))

    @field_validator("factors")
    @classmethod
    def _crossable(cls, factors: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        if factors is not None:
            try:
                ControlledConfig(factors={name: tuple(values) for name, values in factors.items()})
            except ValueError as error:
                raise ValueError(str(error).removeprefix("ControlledConfig.factors").lstrip(":. ")) from None
        return factors

    def config(self) -> ControlledConfig:
        """The grammar's :class:`~thinkalike.language.grammar.ControlledConfig` of these settings."""
        factors = None if self.factors is None else {name: tuple(values) for name, values in self.factors.items()}
        return ControlledConfig(factors=factors, nouns=self.nouns, verbs=self.verbs)


class CorpusParameters(_Section):
    """``corpus``: the grammar language's size and seed, its split, the evaluation texts (``n_evaluation_sentences``
    held-out sentences and at most that many natural-text documents, and the controlled stimuli), the tokenizer's
    vocabulary and the rows' length ``n_ctx``; ``grammar`` is :class:`~thinkalike.language.grammar.GrammarConfig` (its
    probabilities, nested as the YAML nests them)."""

    seed: int = 0
    n_sentences: int = Field(8000, ge=10)
    heldout_fraction: float = Field(0.1, gt=0, lt=1)
    n_evaluation_sentences: int = Field(400, ge=1)
    vocab_size: int = Field(400, ge=32)
    n_ctx: int = Field(64, ge=4)
    grammar: GrammarConfig = Field(default_factory=GrammarConfig)
    natural_text: NaturalTextParameters = Field(default_factory=NaturalTextParameters)
    controlled_stimuli: ControlledStimuliParameters = Field(default_factory=ControlledStimuliParameters)

    def grammar_config(self) -> GrammarConfig:
        """The grammar's :class:`~thinkalike.language.grammar.GrammarConfig`: ``grammar``."""
        return self.grammar


def validate_corpus(values: Any) -> CorpusParameters:
    """The ``corpus`` section (absent: every default) and its grammar; a :class:`ParameterError` naming the key."""
    return validate_section(CorpusParameters, values, "corpus")


def corpus_section(run: RunSettings) -> CorpusParameters:
    """The run's ``corpus`` section parsed (:func:`validate_corpus`; absent: every default): read by every builder
    and check that needs the corpus's settings (``n_ctx``, ``vocab_size``, the natural text …) as
    ``run.parsed(corpus_section)``, so it is parsed once per :class:`~thinkalike.pipelines.run_settings.RunSettings`."""
    return validate_corpus(run.raw("corpus"))


def check_corpus(run: RunSettings) -> None:
    """``corpus``: its keys and grammar, and that ``corpus.natural_text.path`` (when set) can be read."""
    corpus = run.parsed(corpus_section)
    if corpus.natural_text.path:
        try:
            read_natural_text(corpus.natural_text.path, corpus.natural_text.mode)
        except (OSError, ValueError) as error:
            message = str(error)
            raise ParameterError(
                message if message.startswith(PATH_PARAMETER) else f"{PATH_PARAMETER}: {message}"
            ) from None
