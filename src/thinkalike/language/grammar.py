"""A small probabilistic grammar of English-like sentences with labelled features.

The grammar is the offline world's language: every zoo model is trained on it and every
method is evaluated on it. Each sentence carries labels (subject/object number, tense,
relative-clause type, attractor number, sentence type) and per-word labels (part of speech,
syntactic role, position), so representations can be related to linguistic features.

Sentence shape (square brackets are optional, one of RC / PP at most)::

    [AUX] NP [ that VERB NP | that NP VERB | PREP NP ] VERB [NP] ( . | ? )
    NP = DET [ADJ] NOUN

* Subject–verb agreement: in the present tense the main verb (declaratives) or the auxiliary
  ``does``/``do`` (questions) agrees with the number of the subject's head noun, whatever
  nouns of the other number stand in between (the PP "attractor" or the relative-clause noun).
* Relative clauses: a subject RC ("the dog that sees the cats runs") has a verb that agrees
  with the head noun; an object RC ("the dog that the cats see runs") has a verb that agrees
  with the RC's own subject. A relative clause and a prepositional attractor are mutually
  exclusive (this avoids attachment ambiguity); the attractor is drawn only when there is no RC.
* Past tense: regular and irregular past forms carry no number; questions use ``did``.
* Yes/no questions invert the auxiliary: "does the dog see the cats ?"; the main verb is then
  in its base form (the plural present form).

Two more constructions are defined for the NLI pairs of :mod:`thinkalike.language.nli` and are
never drawn by :func:`generate_sentences` (whose output they leave unchanged): the passive
(:func:`passive_verb_group`: "was/were" or "is/are" agreeing with the passive subject, then the
participle, :attr:`Verb.participle`; the agent follows "by") and coordinated noun phrases
(:func:`coordinate`; a coordinated subject takes a plural verb, :func:`coordinated_number`).

Generation is deterministic: the same seed and :class:`GrammarConfig` give the same table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, TypeVar

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

SINGULAR = "sg"
PLURAL = "pl"
NUMBERS: tuple[str, str] = (SINGULAR, PLURAL)
PRESENT = "present"
PAST = "past"
NONE = "none"
RELATIVE_PRONOUN = "that"
VOWELS = frozenset("aeiou")
T = TypeVar("T")


@dataclass(frozen=True)
class Noun:
    """A noun with its singular and plural forms; only animate nouns head subjects."""

    singular: str
    plural: str
    animate: bool = True

    def form(self, number: str) -> str:
        """The form of the noun for ``number`` ("sg" or "pl")."""
        return self.singular if number == SINGULAR else self.plural


@dataclass(frozen=True)
class Verb:
    """A verb with its present 3rd-person singular, present plural (= base) and past forms."""

    singular: str
    plural: str
    past: str

    @property
    def base(self) -> str:
        """The bare infinitive, used after an inverted auxiliary."""
        return self.plural

    def form(self, number: str, tense: str) -> str:
        """The finite form agreeing with a subject of ``number`` in ``tense``."""
        if tense == PAST:
            return self.past
        return self.singular if number == SINGULAR else self.plural

    @property
    def participle(self) -> str:
        """The past participle (passive voice): the past form, except for :data:`IRREGULAR_PARTICIPLES`."""
        return IRREGULAR_PARTICIPLES.get(self.base, self.past)


def _nouns(spec: str, animate: bool) -> tuple[Noun, ...]:
    """Parse ``"dog/dogs cat/cats ..."`` into nouns."""
    return tuple(
        Noun(singular, plural, animate=animate) for singular, plural in (pair.split("/") for pair in spec.split())
    )


def _verbs(spec: str) -> tuple[Verb, ...]:
    """Parse ``"sees/see/saw ..."`` into verbs."""
    return tuple(Verb(*triple.split("/")) for triple in spec.split())


NOUNS: tuple[Noun, ...] = _nouns(
    "dog/dogs cat/cats bird/birds horse/horses teacher/teachers student/students "
    "doctor/doctors farmer/farmers child/children man/men woman/women king/kings "
    "queen/queens pilot/pilots author/authors officer/officers baker/bakers singer/singers "
    "neighbor/neighbors friend/friends boy/boys girl/girls",
    animate=True,
) + _nouns(
    "key/keys cabinet/cabinets book/books table/tables garden/gardens house/houses car/cars picture/pictures",
    animate=False,
)
ANIMATE_NOUNS: tuple[Noun, ...] = tuple(n for n in NOUNS if n.animate)

TRANSITIVE_VERBS: tuple[Verb, ...] = _verbs(
    "sees/see/saw likes/like/liked knows/know/knew helps/help/helped "
    "follows/follow/followed finds/find/found loves/love/loved watches/watch/watched "
    "visits/visit/visited calls/call/called hears/hear/heard meets/meet/met "
    "admires/admire/admired pushes/push/pushed chases/chase/chased "
    "remembers/remember/remembered greets/greet/greeted thanks/thank/thanked "
    "carries/carry/carried trusts/trust/trusted"
)
INTRANSITIVE_VERBS: tuple[Verb, ...] = _verbs(
    "runs/run/ran sleeps/sleep/slept smiles/smile/smiled laughs/laugh/laughed "
    "swims/swim/swam arrives/arrive/arrived waits/wait/waited falls/fall/fell "
    "sings/sing/sang dances/dance/danced"
)
ADJECTIVES: tuple[str, ...] = (
    "big",
    "small",
    "old",
    "young",
    "happy",
    "tall",
    "quiet",
    "clever",
    "brave",
    "angry",
    "little",
    "kind",
)
#: Determiners other than "the", by number ("a" becomes "an" before a vowel).
DETERMINERS: dict[str, tuple[str, ...]] = {
    SINGULAR: ("a", "this", "every"),
    PLURAL: ("some", "many", "these", "those"),
}
PREPOSITIONS: tuple[str, ...] = ("near", "behind", "beside", "with", "of", "from", "under", "above")
#: Auxiliary for yes/no questions, by (tense, subject number).
AUXILIARIES: dict[tuple[str, str], str] = {
    (PRESENT, SINGULAR): "does",
    (PRESENT, PLURAL): "do",
    (PAST, SINGULAR): "did",
    (PAST, PLURAL): "did",
}
PUNCTUATION: dict[str, str] = {"declarative": ".", "question": "?"}

# -- Constructions used by the NLI pairs (thinkalike.language.nli), not by generate_sentences: passive
# voice and coordination. generate_sentences never draws them, so the corpus is unchanged.
#: Past participles that differ from the past form, by base form ("the cat was seen by the dog").
IRREGULAR_PARTICIPLES: dict[str, str] = {"see": "seen", "know": "known"}
#: Passive auxiliary "be", by (tense, subject number): it agrees with the passive subject.
PASSIVE_AUXILIARIES: dict[tuple[str, str], str] = {
    (PRESENT, SINGULAR): "is",
    (PRESENT, PLURAL): "are",
    (PAST, SINGULAR): "was",
    (PAST, PLURAL): "were",
}
#: The word introducing the agent of a passive clause.
AGENT_MARKER = "by"
#: The coordinating conjunction of noun phrases.
CONJUNCTION = "and"

#: Categorical sentence features and every value they take.
FEATURE_VALUES: dict[str, tuple[str, ...]] = {
    "subject_number": NUMBERS,
    "object_number": (SINGULAR, PLURAL, NONE),
    "tense": (PRESENT, PAST),
    "relative_clause": (NONE, "subject", "object"),
    "attractor_number": (NONE, SINGULAR, PLURAL),
    "rc_noun_number": (NONE, SINGULAR, PLURAL),
    "sentence_type": ("declarative", "question"),
}
#: Per-word list columns.
WORD_COLUMNS: tuple[str, ...] = ("words", "pos", "word_position", "word_role")
#: Every column of a sentence table, in order.
SENTENCE_COLUMNS: tuple[str, ...] = (
    ("sentence_id", "text")
    + WORD_COLUMNS
    + tuple(FEATURE_VALUES)
    + ("n_words", "main_verb_index", "subject_index", "source")
)


def lexicon_words() -> frozenset[str]:
    """Every word form the grammar can produce (punctuation included)."""
    words: set[str] = {RELATIVE_PRONOUN, "the", "an", *ADJECTIVES, *PREPOSITIONS}
    words.update(PUNCTUATION.values(), AUXILIARIES.values())
    for dets in DETERMINERS.values():
        words.update(dets)
    for noun in NOUNS:
        words.update((noun.singular, noun.plural))
    for verb in TRANSITIVE_VERBS + INTRANSITIVE_VERBS:
        words.update((verb.singular, verb.plural, verb.past))
    words.update(verb.participle for verb in TRANSITIVE_VERBS)
    words.update(PASSIVE_AUXILIARIES.values())
    words.update((AGENT_MARKER, CONJUNCTION))
    return frozenset(words)


def passive_verb_group(verb: Verb, subject_number: str, tense: str) -> list[str]:
    """``[be, participle]`` of a passive clause; "be" agrees with the passive subject:
    "is/are seen" (present, sg/pl), "was/were seen" (past)."""
    if verb not in TRANSITIVE_VERBS:
        raise ValueError(f"only transitive verbs have a passive; {verb.base!r} is not one")
    return [PASSIVE_AUXILIARIES[(tense, subject_number)], verb.participle]


def coordinated_number(numbers: Sequence[str]) -> str:
    """The number a verb agrees with for a subject of coordinated noun phrases: plural for two or more
    conjuncts ("the dog and the cat see"), the conjunct's own number for one."""
    if not numbers:
        raise ValueError("a coordination needs at least one noun phrase")
    return numbers[0] if len(numbers) == 1 else PLURAL


def coordinate(phrases: Sequence[Sequence[str]]) -> list[str]:
    """Noun phrases joined by "and": ``[a]`` → a, ``[a, b]`` → a and b, ``[a, b, c]`` → a and b and c."""
    if not phrases:
        raise ValueError("a coordination needs at least one noun phrase")
    words: list[str] = list(phrases[0])
    for phrase in phrases[1:]:
        words.append(CONJUNCTION)
        words.extend(phrase)
    return words


Probability = Annotated[float, Field(ge=0.0, le=1.0)]


class GrammarConfig(BaseModel):
    """Probabilities of the grammar's choices (all in [0, 1]).

    ``p_attractor`` applies only to subjects without a relative clause; ``p_object_rc`` is the
    share of relative clauses that are object RCs; ``p_the`` the chance of "the" as determiner.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    p_question: Probability = 0.25
    p_relative_clause: Probability = 0.3
    p_object_rc: Probability = 0.5
    p_attractor: Probability = 0.45
    p_adjective: Probability = 0.25
    p_transitive: Probability = 0.7
    p_past: Probability = 0.3
    p_plural: Probability = 0.5
    p_the: Probability = 0.5


class _Draws:
    """Uniform draws from a seeded numpy Generator, buffered for speed."""

    def __init__(self, seed: int, block: int = 8192) -> None:
        self._rng = np.random.default_rng(seed)
        self._block = block
        self._buffer = self._rng.random(block)
        self._next = 0

    def uniform(self) -> float:
        """The next uniform draw in [0, 1)."""
        if self._next == self._block:
            self._buffer = self._rng.random(self._block)
            self._next = 0
        value = float(self._buffer[self._next])
        self._next += 1
        return value

    def chance(self, p: float) -> bool:
        """True with probability ``p``."""
        return self.uniform() < p

    def choice(self, options: Sequence[T], exclude: T | None = None) -> T:
        """A uniform choice from ``options``, never ``exclude`` (when given and present)."""
        pool = options if exclude is None else [o for o in options if o != exclude]
        return pool[int(self.uniform() * len(pool))]

    def number(self, p_plural: float) -> str:
        """ "pl" with probability ``p_plural``, else "sg"."""
        return PLURAL if self.chance(p_plural) else SINGULAR


class _Sentence:
    """Words with their part of speech and role, appended left to right."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.pos: list[str] = []
        self.roles: list[str] = []

    def add(self, word: str, pos: str, role: str = "other") -> int:
        """Append a word; return its index."""
        self.words.append(word)
        self.pos.append(pos)
        self.roles.append(role)
        return len(self.words) - 1


def _noun_phrase(s: _Sentence, draws: _Draws, config: GrammarConfig, noun: Noun, number: str, role: str) -> int:
    """Append ``DET [ADJ] NOUN``; return the index of the head noun."""
    adjective = draws.choice(ADJECTIVES) if draws.chance(config.p_adjective) else None
    determiner = "the" if draws.chance(config.p_the) else draws.choice(DETERMINERS[number])
    following = adjective if adjective is not None else noun.form(number)
    if determiner == "a" and following[0] in VOWELS:
        determiner = "an"
    s.add(determiner, "DET")
    if adjective is not None:
        s.add(adjective, "ADJ")
    return s.add(noun.form(number), "NOUN", role)


def _generate_one(sentence_id: int, draws: _Draws, config: GrammarConfig) -> dict:
    """Draw one sentence and its features."""
    subject_number = draws.number(config.p_plural)
    tense = PAST if draws.chance(config.p_past) else PRESENT
    sentence_type = "question" if draws.chance(config.p_question) else "declarative"
    transitive = draws.chance(config.p_transitive)
    relative_clause = NONE
    if draws.chance(config.p_relative_clause):
        relative_clause = "object" if draws.chance(config.p_object_rc) else "subject"
    has_attractor = relative_clause == NONE and draws.chance(config.p_attractor)

    s = _Sentence()
    main_verb_index = -1
    if sentence_type == "question":
        main_verb_index = s.add(AUXILIARIES[(tense, subject_number)], "AUX", "aux")
    subject = draws.choice(ANIMATE_NOUNS)
    subject_index = _noun_phrase(s, draws, config, subject, subject_number, "subject")

    attractor_number = rc_noun_number = NONE
    if relative_clause != NONE:
        rc_noun_number = draws.number(config.p_plural)
        rc_verb = draws.choice(TRANSITIVE_VERBS)
        s.add(RELATIVE_PRONOUN, "REL")
        if relative_clause == "subject":
            s.add(rc_verb.form(subject_number, tense), "VERB", "rc_verb")
            _noun_phrase(s, draws, config, draws.choice(NOUNS, subject), rc_noun_number, "rc_noun")
        else:
            rc_subject = draws.choice(ANIMATE_NOUNS, subject)
            _noun_phrase(s, draws, config, rc_subject, rc_noun_number, "rc_noun")
            s.add(rc_verb.form(rc_noun_number, tense), "VERB", "rc_verb")
    elif has_attractor:
        attractor_number = draws.number(config.p_plural)
        s.add(draws.choice(PREPOSITIONS), "PREP")
        _noun_phrase(s, draws, config, draws.choice(NOUNS, subject), attractor_number, "attractor")

    verb = draws.choice(TRANSITIVE_VERBS if transitive else INTRANSITIVE_VERBS)
    if sentence_type == "question":
        s.add(verb.base, "VERB", "main_verb")
    else:
        main_verb_index = s.add(verb.form(subject_number, tense), "VERB", "main_verb")

    object_number = NONE
    if transitive:
        object_number = draws.number(config.p_plural)
        _noun_phrase(s, draws, config, draws.choice(NOUNS, subject), object_number, "object")
    s.add(PUNCTUATION[sentence_type], "PUNCT")

    return {
        "sentence_id": sentence_id,
        "text": " ".join(s.words),
        "words": s.words,
        "pos": s.pos,
        "word_position": list(range(len(s.words))),
        "word_role": s.roles,
        "subject_number": subject_number,
        "object_number": object_number,
        "tense": tense,
        "relative_clause": relative_clause,
        "attractor_number": attractor_number,
        "rc_noun_number": rc_noun_number,
        "sentence_type": sentence_type,
        "n_words": len(s.words),
        "main_verb_index": main_verb_index,
        "subject_index": subject_index,
        "source": "grammar",
    }


def generate_sentences(n_sentences: int, seed: int, config: GrammarConfig | None = None) -> pd.DataFrame:
    """Generate ``n_sentences`` labelled sentences, deterministically from ``seed``.

    Returns one row per sentence with the columns of :data:`SENTENCE_COLUMNS`:

    * ``sentence_id`` (0..n-1), ``text`` (words joined by single spaces, ending with "." or "?");
    * per word: ``words``, ``pos`` (DET, ADJ, NOUN, VERB, AUX, PREP, REL, PUNCT),
      ``word_position`` (0..), ``word_role`` ("subject", "main_verb", "aux", "object",
      "attractor", "rc_noun", "rc_verb", "other"; roles mark head nouns and verbs only);
    * features (values in :data:`FEATURE_VALUES`): ``subject_number``, ``object_number``,
      ``tense``, ``relative_clause``, ``attractor_number``, ``rc_noun_number`` (number of the
      noun inside the relative clause), ``sentence_type``;
    * ``n_words``; ``main_verb_index`` (the main verb in declaratives, the agreeing auxiliary
      in questions); ``subject_index`` (the subject's head noun); ``source`` ("grammar").
    """
    if n_sentences < 1:
        raise ValueError(f"n_sentences must be >= 1, got {n_sentences}")
    config = GrammarConfig() if config is None else config
    draws = _Draws(seed)
    rows = [_generate_one(i, draws, config) for i in range(n_sentences)]
    return pd.DataFrame(rows, columns=list(SENTENCE_COLUMNS))


# -- Controlled stimuli (MLEM; Jalouzot et al. 2024): a small lexicon, the chosen sentence features fully
# crossed, one template per condition. Never drawn by generate_sentences (whose output they leave unchanged).
#: Sentence features a controlled set can cross, with the values each may take.
CONTROLLED_FACTORS: dict[str, tuple[str, ...]] = {
    "subject_number": NUMBERS,
    "object_number": (NONE, SINGULAR, PLURAL),
    "tense": (PRESENT, PAST),
    "sentence_type": ("declarative", "question"),
    "relative_clause": (NONE, "subject", "object"),
    "rc_noun_number": (NONE, SINGULAR, PLURAL),
    "attractor_number": (NONE, SINGULAR, PLURAL),
}
#: The value of a feature that is not crossed (``rc_noun_number``: "sg" when the sentence has a relative clause).
CONTROLLED_FIXED: dict[str, str] = {
    "subject_number": SINGULAR,
    "object_number": NONE,
    "tense": PRESENT,
    "sentence_type": "declarative",
    "relative_clause": NONE,
    "rc_noun_number": NONE,
    "attractor_number": NONE,
}
#: The default crossing: 2 × 3 × 2 × 2 × 3 = 72 conditions.
CONTROLLED_DEFAULT_FACTORS: dict[str, tuple[str, ...]] = {
    "subject_number": NUMBERS,
    "object_number": (NONE, SINGULAR, PLURAL),
    "tense": (PRESENT, PAST),
    "sentence_type": ("declarative", "question"),
    "relative_clause": (NONE, "subject", "object"),
}


@dataclass(frozen=True)
class ControlledConfig:
    """A controlled stimulus set (:func:`controlled_sentences`).

    ``factors`` maps each crossed sentence feature (:data:`CONTROLLED_FACTORS`) to the values it
    takes (None: :data:`CONTROLLED_DEFAULT_FACTORS`); every other feature keeps its
    :data:`CONTROLLED_FIXED` value. The lexicon is the first ``nouns`` animate nouns and the first
    ``verbs`` transitive and intransitive verbs of the grammar's lexicon.
    """

    factors: dict[str, tuple[str, ...]] | None = None
    nouns: int = 2
    verbs: int = 2

    def crossed(self) -> dict[str, tuple[str, ...]]:
        """The crossed features and their values (defaults filled in)."""
        if self.factors is None:
            return dict(CONTROLLED_DEFAULT_FACTORS)
        return {name: tuple(values) for name, values in self.factors.items()}

    def __post_init__(self) -> None:
        limits = {"nouns": (2, len(ANIMATE_NOUNS)), "verbs": (1, min(len(TRANSITIVE_VERBS), len(INTRANSITIVE_VERBS)))}
        for name, (low, high) in limits.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"ControlledConfig.{name} must be an integer in [{low}, {high}], got {value!r}")
        factors = self.crossed()
        if not factors:
            raise ValueError("ControlledConfig.factors: give at least one feature to cross (or null for the defaults)")
        for name, values in factors.items():
            if name not in CONTROLLED_FACTORS:
                raise ValueError(
                    f"ControlledConfig.factors: unknown feature {name!r}; known: {sorted(CONTROLLED_FACTORS)}"
                )
            bad = [value for value in values if value not in CONTROLLED_FACTORS[name]]
            if bad or len(values) < 2 or len(set(values)) < len(values):
                raise ValueError(
                    f"ControlledConfig.factors.{name}: two or more distinct values of "
                    f"{list(CONTROLLED_FACTORS[name])}, got {list(values)}"
                )
        for condition in self.conditions():
            problem = _controlled_conflict(condition)
            if problem:
                raise ValueError(f"ControlledConfig.factors: {problem} (condition {condition})")

    def conditions(self) -> list[dict[str, str]]:
        """Every combination of the crossed values (in the order of ``factors`` and of each value list), completed
        with the fixed values."""
        factors = self.crossed()
        rows = []
        for values in np.ndindex(*(len(v) for v in factors.values())):
            condition = {**CONTROLLED_FIXED, **{name: factors[name][i] for name, i in zip(factors, values)}}
            if "rc_noun_number" not in factors and condition["relative_clause"] != NONE:
                condition["rc_noun_number"] = SINGULAR
            rows.append(condition)
        return rows


def _controlled_conflict(condition: dict[str, str]) -> str | None:
    """Why a combination cannot be a grammar sentence, or None."""
    has_rc = condition["relative_clause"] != NONE
    if has_rc != (condition["rc_noun_number"] != NONE):
        return (
            "rc_noun_number is defined exactly when there is a relative clause: cross rc_noun_number over "
            "[sg, pl] with relative_clause over [subject, object]"
        )
    if has_rc and condition["attractor_number"] != NONE:
        return "a sentence has a relative clause or a prepositional attractor, not both"
    return None


def controlled_sentences(config: ControlledConfig | None = None, first_id: int = 0) -> pd.DataFrame:
    """The controlled stimulus set: one sentence per condition (:meth:`ControlledConfig.conditions`) and lexical
    cell, with the columns of :data:`SENTENCE_COLUMNS` (``source`` is ``"controlled"``) and ids from ``first_id``.

    One template per condition: ``[AUX] the N [that V the N | that the N V | PREP the N] V [the N] (. | ?)`` —
    determiner "the", no adjective, preposition "near". Within a condition only the words vary, fully crossed
    too: the subject is each of the ``nouns`` animate nouns in turn, the main verb each of the first ``verbs``
    verbs (transitive when there is an object, else intransitive); the other nouns are the next nouns of the
    list after the subject (object: the first, relative-clause or attractor noun: the second, skipping the
    subject), the relative clause's verb the next transitive verb. Deterministic (no random draw), and every
    combination of the crossed values appears ``nouns × verbs`` times.
    """
    config = ControlledConfig() if config is None else config
    nouns = ANIMATE_NOUNS[: config.nouns]
    rows: list[dict] = []
    for condition in config.conditions():
        for subject_index in range(config.nouns):
            for verb_index in range(config.verbs):
                others = [nouns[(subject_index + k) % len(nouns)] for k in range(1, len(nouns))]
                rows.append(
                    _controlled_one(
                        first_id + len(rows),
                        condition,
                        nouns[subject_index],
                        others[0],
                        others[1 % len(others)],
                        verb_index,
                        config.verbs,
                    )
                )
    return pd.DataFrame(rows, columns=list(SENTENCE_COLUMNS))


def _controlled_one(
    sentence_id: int,
    condition: dict[str, str],
    subject: Noun,
    object_noun: Noun,
    inner_noun: Noun,
    verb_index: int,
    n_verbs: int,
) -> dict:
    """One controlled sentence (:func:`controlled_sentences`) with the labels :func:`generate_sentences` gives."""
    subject_number, tense = condition["subject_number"], condition["tense"]
    sentence_type, relative_clause = condition["sentence_type"], condition["relative_clause"]
    object_number, rc_noun_number = condition["object_number"], condition["rc_noun_number"]
    attractor_number = condition["attractor_number"]
    s = _Sentence()
    main_verb_index = -1
    if sentence_type == "question":
        main_verb_index = s.add(AUXILIARIES[(tense, subject_number)], "AUX", "aux")
    s.add("the", "DET")
    subject_index = s.add(subject.form(subject_number), "NOUN", "subject")
    if relative_clause != NONE:
        rc_verb = TRANSITIVE_VERBS[(verb_index + 1) % max(n_verbs, 2)]
        s.add(RELATIVE_PRONOUN, "REL")
        if relative_clause == "subject":
            s.add(rc_verb.form(subject_number, tense), "VERB", "rc_verb")
            s.add("the", "DET")
            s.add(inner_noun.form(rc_noun_number), "NOUN", "rc_noun")
        else:
            s.add("the", "DET")
            s.add(inner_noun.form(rc_noun_number), "NOUN", "rc_noun")
            s.add(rc_verb.form(rc_noun_number, tense), "VERB", "rc_verb")
    elif attractor_number != NONE:
        s.add(PREPOSITIONS[0], "PREP")
        s.add("the", "DET")
        s.add(inner_noun.form(attractor_number), "NOUN", "attractor")
    verb = (TRANSITIVE_VERBS if object_number != NONE else INTRANSITIVE_VERBS)[verb_index]
    if sentence_type == "question":
        s.add(verb.base, "VERB", "main_verb")
    else:
        main_verb_index = s.add(verb.form(subject_number, tense), "VERB", "main_verb")
    if object_number != NONE:
        s.add("the", "DET")
        s.add(object_noun.form(object_number), "NOUN", "object")
    s.add(PUNCTUATION[sentence_type], "PUNCT")
    return {
        "sentence_id": sentence_id,
        "text": " ".join(s.words),
        "words": s.words,
        "pos": s.pos,
        "word_position": list(range(len(s.words))),
        "word_role": s.roles,
        "subject_number": subject_number,
        "object_number": object_number,
        "tense": tense,
        "relative_clause": relative_clause,
        "attractor_number": attractor_number,
        "rc_noun_number": rc_noun_number,
        "sentence_type": sentence_type,
        "n_words": len(s.words),
        "main_verb_index": main_verb_index,
        "subject_index": subject_index,
        "source": "controlled",
    }
