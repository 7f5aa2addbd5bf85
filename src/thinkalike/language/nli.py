"""HANS-style natural-language-inference pairs from the grammar (McCoy et al. 2019, lexical overlap).

Every pair is a premise and a hypothesis built from the grammar's lexicon
(:mod:`thinkalike.language.grammar`), labelled by construction. Meaning is a set of
(agent, verb, patient) *triples*: a premise asserts the triples of all its clauses, a hypothesis
is one simple active clause "the A V the B ." asserting one triple, and

    the hypothesis is entailed  ⇔  its triple is one of the premise's triples.

Nouns keep their number (a triple holds "doctors", not "doctor"); verbs are compared by base
form. All pairs are in the past tense, as HANS's: past forms carry no number, so the verb of a
hypothesis whose subject changed still occurs in its premise (and a passive premise's
participle is its past form: passives use only verbs whose participle equals the past).

Subcases (:data:`SUBCASES`, HANS's lexical-overlap subcases; premise → entailed / non-entailed):

* ``swap``: "the doctor saw the lawyer ." → "the doctor saw the lawyer ." /
  "the lawyer saw the doctor ." (subject/object swap);
* ``passive``: "the lawyer was seen by the doctor ." → "the doctor saw the lawyer ." /
  "the lawyer saw the doctor .";
* ``relative_clause`` (subject or object RC): "the doctor that the artist saw helped the lawyer ."
  → "the doctor helped the lawyer ." or "the artist saw the doctor ." / "the artist helped the lawyer .";
* ``preposition``: "the doctor near the artist saw the lawyer ." → "the doctor saw the lawyer ." /
  "the artist saw the lawyer .";
* ``conjunction`` (coordinated subject or object): "the doctor saw the lawyer and the artist ." →
  "the doctor saw the artist ." / "the lawyer saw the artist ."; "the doctor and the artist saw
  the lawyer ." → "the artist saw the lawyer ." / "the doctor saw the artist .".

Variants (:data:`VARIANTS`) of a premise's hypothesis: ``entailed`` (every hypothesis word occurs
in the premise: lexical overlap), ``overlap_non_entailed`` (lexical overlap too, but not
entailed: the heuristic's failure cases) and ``substituted`` (k of the agent, verb and patient of an
entailed hypothesis replaced by words that are not in the premise, k drawn uniformly from
1..``substituted_slots``: not entailed, no overlap). Premise nouns take an adjective with probability
``p_adjective``; hypotheses never do.

Splits (:class:`PairsConfig`):

* ``train`` and ``test`` (in distribution): half entailed pairs, half non-entailed; of the
  non-entailed, a fraction ``counterexample_fraction`` are ``overlap_non_entailed`` pairs of the
  ``counterexample_subcases`` (Tu et al. 2020's "minority examples"), the rest ``substituted``.
  Entailed and substituted pairs come from every subcase, as MNLI holds passives, relative
  clauses… whose entailments follow lexical overlap. With fraction 0, "entailed ⇔ lexical
  overlap" holds on every in-distribution pair.
* ``ood`` (the HANS-LO analogue): for every one of the ``ood_subcases``, ``n_ood_per_subcase``
  ``overlap_non_entailed`` pairs — a kind of pair never seen in training, since the OOD and
  counterexample subcases must be disjoint — and as many ``entailed`` controls.

No (premise, hypothesis) pair occurs twice in the table (so the splits share none). The
lexical-overlap heuristic (:func:`lexical_overlap`: "entailed" iff every hypothesis word is in
the premise) is right on every in-distribution pair but the counterexamples, and wrong on every
OOD non-entailed pair.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from thinkalike.language.grammar import (
    ADJECTIVES,
    AGENT_MARKER,
    ANIMATE_NOUNS,
    NUMBERS,
    PAST,
    RELATIVE_PRONOUN,
    TRANSITIVE_VERBS,
    Noun,
    Verb,
    coordinate,
    passive_verb_group,
)
from thinkalike.language.packing import text_wrapping

LABELS: tuple[str, str] = ("non_entailed", "entailed")
NON_ENTAILED, ENTAILED = LABELS
SUBCASES: tuple[str, ...] = ("swap", "passive", "relative_clause", "preposition", "conjunction")
VARIANTS: tuple[str, ...] = ("entailed", "overlap_non_entailed", "substituted")
SPLITS: tuple[str, ...] = ("train", "test", "ood")
#: Prepositions of the ``preposition`` subcase: locative ones, whose object does nothing in the clause
#: (not "with": "the doctor with the lawyer saw …" could be read as both seeing).
LOCATIVE_PREPOSITIONS: tuple[str, ...] = ("near", "behind", "beside")
#: Verbs whose passive participle is their past form ("helped"), so a passive premise contains the
#: hypothesis's verb.
PASSIVE_VERBS: tuple[Verb, ...] = tuple(v for v in TRANSITIVE_VERBS if v.participle == v.past)
PAIR_COLUMNS: tuple[str, ...] = (
    "pair_id",
    "split",
    "subcase",
    "variant",
    "form",
    "label",
    "label_id",
    "premise",
    "hypothesis",
    "lexical_overlap",
    "premise_triples",
    "hypothesis_triple",
)
ACCURACY_COLUMNS: tuple[str, ...] = ("model", "split", "subcase", "label", "n_pairs", "accuracy")
_MAX_ATTEMPTS = 1000

Triple = tuple[str, str, str]  # (agent noun form, verb base form, patient noun form)


class PairsConfig(BaseModel):
    """Sizes and make-up of the NLI pair sets (module docstring).

    ``n_train`` / ``n_test``: in-distribution pairs; ``n_ood_per_subcase``: non-entailed pairs per
    OOD subcase (and as many entailed controls); ``counterexample_fraction`` ∈ [0, 1): share of the
    in-distribution non-entailed pairs that are lexical-overlap counterexamples from
    ``counterexample_subcases``; ``ood_subcases``: the held-out subcases (disjoint from those);
    ``p_adjective``: chance of an adjective before a premise noun; ``substituted_slots`` ∈ {1, 2, 3}: a
    ``substituted`` pair replaces 1..``substituted_slots`` of its triple's (agent, verb, patient), the number
    drawn uniformly (1: exactly one word differs from an entailed hypothesis, so the non-entailed pairs are
    one word away from overlap; larger values make "a word not in the premise" a cue of varying strength);
    ``seed``: the whole table. Strict types (a subcase list may be a YAML list), unknown settings refused.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    n_train: int = 20000
    n_test: int = 400
    n_ood_per_subcase: int = 100
    counterexample_fraction: float = 0.1
    counterexample_subcases: tuple[str, ...] = Field(("swap",), strict=False)
    ood_subcases: tuple[str, ...] = Field(("passive", "relative_clause", "preposition", "conjunction"), strict=False)
    p_adjective: float = 0.2
    substituted_slots: int = 3
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> PairsConfig:
        name = type(self).__name__
        for key in ("counterexample_subcases", "ood_subcases"):
            unknown = [s for s in getattr(self, key) if s not in SUBCASES]
            if unknown:
                raise ValueError(f"{name}.{key} has unknown subcase(s) {unknown}; known: {list(SUBCASES)}")
            if len(set(getattr(self, key))) != len(getattr(self, key)):
                raise ValueError(f"{name}.{key} lists a subcase twice: {list(getattr(self, key))}")
        for key in ("n_train", "n_test", "n_ood_per_subcase"):
            if getattr(self, key) < 1:
                raise ValueError(f"{name}.{key} must be >= 1, got {getattr(self, key)}")
        if not 0.0 <= self.counterexample_fraction < 1.0:
            raise ValueError(f"{name}.counterexample_fraction must be in [0, 1), got {self.counterexample_fraction}")
        if self.counterexample_fraction > 0 and not self.counterexample_subcases:
            raise ValueError(
                f"{name}.counterexample_subcases is empty but counterexample_fraction is "
                f"{self.counterexample_fraction}; name the subcases the counterexamples come from"
            )
        if not self.ood_subcases:
            raise ValueError(
                f"{name}.ood_subcases is empty; name at least one held-out subcase (known: {list(SUBCASES)})"
            )
        shared = sorted(set(self.counterexample_subcases) & set(self.ood_subcases))
        if shared:
            raise ValueError(
                f"{name}.ood_subcases must be disjoint from counterexample_subcases (the OOD set holds "
                f"the subcases never seen as counterexamples in training); both have {shared}"
            )
        if not 0.0 <= self.p_adjective <= 1.0:
            raise ValueError(f"{name}.p_adjective must be in [0, 1], got {self.p_adjective}")
        if self.substituted_slots not in (1, 2, 3):
            raise ValueError(
                f"{name}.substituted_slots must be 1, 2 or 3 (of agent, verb, patient), got {self.substituted_slots}"
            )
        return self

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The settings' names (the keys of the ``nli.pairs`` parameters)."""
        return tuple(cls.model_fields)


# --------------------------------------------------------------------------- premises


@dataclass(frozen=True)
class _Entity:
    """A noun with its number; ``form`` is what triples hold."""

    noun: Noun
    number: str

    @property
    def form(self) -> str:
        return self.noun.form(self.number)


@dataclass(frozen=True)
class _Premise:
    """A premise's words, its triples, the hypotheses of its entailed and overlap-non-entailed variants
    (one is drawn) and its form ("active", "passive", "subject_rc", …)."""

    words: list[str]
    triples: tuple[Triple, ...]
    entailed: tuple[Triple, ...]
    non_entailed: tuple[Triple, ...]
    form: str
    verbs: tuple[Verb, ...]


class _Drawer:
    """Seeded draws of lexical items and noun phrases."""

    def __init__(self, rng: np.random.Generator, p_adjective: float) -> None:
        self.rng = rng
        self.p_adjective = p_adjective

    def pick(self, options: Sequence, k: int) -> list:
        return [options[i] for i in self.rng.choice(len(options), size=k, replace=False)]

    def entities(self, k: int) -> list[_Entity]:
        """``k`` distinct animate nouns, each with a random number."""
        return [_Entity(noun, NUMBERS[int(self.rng.integers(2))]) for noun in self.pick(ANIMATE_NOUNS, k)]

    def noun_phrase(self, entity: _Entity) -> list[str]:
        """ "the [ADJ] NOUN" (premises only carry adjectives)."""
        if self.rng.random() < self.p_adjective:
            return ["the", ADJECTIVES[int(self.rng.integers(len(ADJECTIVES)))], entity.form]
        return ["the", entity.form]

    def coin(self) -> bool:
        return bool(self.rng.random() < 0.5)


def _triple(agent: _Entity, verb: Verb, patient: _Entity) -> Triple:
    return (agent.form, verb.base, patient.form)


def _swap(d: _Drawer) -> _Premise:
    a, b = d.entities(2)
    (v,) = d.pick(TRANSITIVE_VERBS, 1)
    words = d.noun_phrase(a) + [v.past] + d.noun_phrase(b)
    return _Premise(words, (_triple(a, v, b),), (_triple(a, v, b),), (_triple(b, v, a),), "active", (v,))


def _passive(d: _Drawer) -> _Premise:
    a, b = d.entities(2)
    (v,) = d.pick(PASSIVE_VERBS, 1)
    words = d.noun_phrase(b) + passive_verb_group(v, b.number, PAST) + [AGENT_MARKER] + d.noun_phrase(a)
    return _Premise(words, (_triple(a, v, b),), (_triple(a, v, b),), (_triple(b, v, a),), "passive", (v,))


def _relative_clause(d: _Drawer) -> _Premise:
    a, b, c = d.entities(3)
    v, w = d.pick(TRANSITIVE_VERBS, 2)
    if d.coin():  # subject RC: "the A that W the C V the B"
        clause, rc_triple, form = [RELATIVE_PRONOUN, w.past] + d.noun_phrase(c), _triple(a, w, c), "subject_rc"
    else:  # object RC: "the A that the C W V the B"
        clause, rc_triple, form = [RELATIVE_PRONOUN] + d.noun_phrase(c) + [w.past], _triple(c, w, a), "object_rc"
    words = d.noun_phrase(a) + clause + [v.past] + d.noun_phrase(b)
    main = _triple(a, v, b)
    return _Premise(words, (main, rc_triple), (main, rc_triple), (_triple(c, v, b),), form, (v, w))


def _preposition(d: _Drawer) -> _Premise:
    a, b, c = d.entities(3)
    (v,) = d.pick(TRANSITIVE_VERBS, 1)
    (preposition,) = d.pick(LOCATIVE_PREPOSITIONS, 1)
    words = d.noun_phrase(a) + [preposition] + d.noun_phrase(c) + [v.past] + d.noun_phrase(b)
    return _Premise(words, (_triple(a, v, b),), (_triple(a, v, b),), (_triple(c, v, b),), "preposition", (v,))


def _conjunction(d: _Drawer) -> _Premise:
    a, b, c = d.entities(3)
    (v,) = d.pick(TRANSITIVE_VERBS, 1)
    if d.coin():  # coordinated subject: "the A and the C V the B"
        words = coordinate([d.noun_phrase(a), d.noun_phrase(c)]) + [v.past] + d.noun_phrase(b)
        triples = (_triple(a, v, b), _triple(c, v, b))
        return _Premise(words, triples, triples, (_triple(a, v, c),), "subject_coordination", (v,))
    # coordinated object: "the A V the B and the C"
    words = d.noun_phrase(a) + [v.past] + coordinate([d.noun_phrase(b), d.noun_phrase(c)])
    triples = (_triple(a, v, b), _triple(a, v, c))
    return _Premise(words, triples, triples, (_triple(b, v, c),), "object_coordination", (v,))


_PREMISES: dict[str, Callable[[_Drawer], _Premise]] = {
    "swap": _swap,
    "passive": _passive,
    "relative_clause": _relative_clause,
    "preposition": _preposition,
    "conjunction": _conjunction,
}
_VERBS_BY_BASE: dict[str, Verb] = {v.base: v for v in TRANSITIVE_VERBS}
_NOUNS_BY_FORM: dict[str, tuple[Noun, str]] = {n.form(k): (n, k) for n in ANIMATE_NOUNS for k in NUMBERS}


def hypothesis_text(triple: Triple) -> str:
    """The simple past active clause asserting ``triple``: "the A V the B ."."""
    agent, verb, patient = triple
    return f"the {agent} {_VERBS_BY_BASE[verb].past} the {patient} ."


def _substitute(d: _Drawer, premise: _Premise, triple: Triple, max_slots: int = 1) -> Triple:
    """``triple`` with k of its agent, verb and patient (k uniform in 1..``max_slots``, the slots drawn without
    replacement) replaced by nouns (same number, distinct from each other) or a verb absent from the premise, so
    the hypothesis is neither entailed nor covered by the premise's words. ``max_slots=1`` draws exactly as a
    single substitution always did (one slot, uniform)."""
    if max_slots == 1:
        slots = [int(d.rng.integers(3))]
    else:
        k = int(d.rng.integers(1, max_slots + 1))
        slots = sorted(int(s) for s in d.rng.choice(3, size=k, replace=False))
    replaced = list(triple)
    used_nouns = {_NOUNS_BY_FORM[w][0] for w in premise.words if w in _NOUNS_BY_FORM}
    for slot in slots:
        if slot == 1:
            used = {v.base for v in premise.verbs}
            (verb,) = d.pick([v for v in TRANSITIVE_VERBS if v.base not in used], 1)
            replaced[1] = verb.base
            continue
        _, number = _NOUNS_BY_FORM[triple[slot]]
        (noun,) = d.pick([n for n in ANIMATE_NOUNS if n not in used_nouns], 1)
        used_nouns.add(noun)
        replaced[slot] = noun.form(number)
    return (replaced[0], replaced[1], replaced[2])


def _pair(d: _Drawer, subcase: str, variant: str, substituted_slots: int = 1) -> dict:
    premise = _PREMISES[subcase](d)
    if variant == "overlap_non_entailed":
        options = premise.non_entailed
    else:
        options = premise.entailed
    triple = options[int(d.rng.integers(len(options)))]
    if variant == "substituted":
        triple = _substitute(d, premise, triple, substituted_slots)
    label = ENTAILED if variant == "entailed" else NON_ENTAILED
    text = " ".join(premise.words + ["."])
    hypothesis = hypothesis_text(triple)
    return {
        "subcase": subcase,
        "variant": variant,
        "form": premise.form,
        "label": label,
        "label_id": LABELS.index(label),
        "premise": text,
        "hypothesis": hypothesis,
        "lexical_overlap": lexical_overlap(text, hypothesis),
        "premise_triples": [" ".join(t) for t in premise.triples],
        "hypothesis_triple": " ".join(triple),
    }


# --------------------------------------------------------------------------- tables


def lexical_overlap(premise: str, hypothesis: str) -> bool:
    """The heuristic of McCoy et al. (2019): every (whitespace) word of the hypothesis occurs in the premise."""
    return set(hypothesis.split()) <= set(premise.split())


def heuristic_predictions(pairs: pd.DataFrame) -> np.ndarray:
    """The lexical-overlap baseline's ``label_id`` per pair: entailed (1) iff :func:`lexical_overlap`."""
    return np.array(
        [
            LABELS.index(ENTAILED) if lexical_overlap(p, h) else LABELS.index(NON_ENTAILED)
            for p, h in zip(pairs["premise"], pairs["hypothesis"])
        ],
        dtype=np.int64,
    )


def _in_distribution_plan(n: int, config: PairsConfig, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(subcase, variant) of each in-distribution pair: ⌈n/2⌉ entailed, the rest non-entailed, of which
    round(fraction · n_non_entailed) are counterexamples; shuffled."""
    n_non_entailed = n // 2
    n_counter = round(config.counterexample_fraction * n_non_entailed)
    plan = [(SUBCASES[i % len(SUBCASES)], "entailed") for i in range(n - n_non_entailed)]
    plan += [(SUBCASES[i % len(SUBCASES)], "substituted") for i in range(n_non_entailed - n_counter)]
    counter = config.counterexample_subcases
    plan += [(counter[i % len(counter)], "overlap_non_entailed") for i in range(n_counter)]
    return [plan[i] for i in rng.permutation(len(plan))]


def _ood_plan(config: PairsConfig) -> list[tuple[str, str]]:
    return [
        (subcase, variant)
        for subcase in config.ood_subcases
        for variant in ("overlap_non_entailed", "entailed")
        for _ in range(config.n_ood_per_subcase)
    ]


def generate_pairs(config: PairsConfig | None = None) -> pd.DataFrame:
    """The ``train``, ``test`` and ``ood`` pairs of ``config`` in one table, deterministic from ``config.seed``.

    Columns (:data:`PAIR_COLUMNS`): ``pair_id``; ``split``; ``subcase`` (:data:`SUBCASES`); ``variant``
    (:data:`VARIANTS`); ``form`` (the premise's construction: active, passive, subject_rc, object_rc,
    preposition, subject_coordination, object_coordination); ``label`` ("entailed" / "non_entailed") and
    ``label_id`` (its index in :data:`LABELS`: 1 = entailed); ``premise``, ``hypothesis`` (words joined by
    spaces, ending " ."); ``lexical_overlap`` (the heuristic's verdict); ``premise_triples`` (list of
    "agent verb patient") and ``hypothesis_triple``. No (premise, hypothesis) pair occurs twice.
    """
    config = PairsConfig() if config is None else config
    seen: set[tuple[str, str]] = set()
    rows: list[dict] = []
    for split_index, split in enumerate(SPLITS):
        rng = np.random.default_rng([config.seed, split_index])
        drawer = _Drawer(rng, config.p_adjective)
        if split == "ood":
            plan = _ood_plan(config)
        else:
            plan = _in_distribution_plan(config.n_train if split == "train" else config.n_test, config, rng)
        for subcase, variant in plan:
            for _ in range(_MAX_ATTEMPTS):
                row = _pair(drawer, subcase, variant, config.substituted_slots)
                key = (row["premise"], row["hypothesis"])
                if key not in seen:
                    break
            else:  # pragma: no cover - the lexicon makes ~10^5 distinct pairs per subcase
                raise ValueError(f"cannot draw {len(plan)} distinct {split} pairs; lower the pair counts")
            seen.add(key)
            rows.append({"pair_id": len(rows), "split": split, **row})
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def accuracy_table(pairs: pd.DataFrame, predicted: np.ndarray, model: str) -> pd.DataFrame:
    """Accuracy of ``predicted`` label ids against ``pairs.label_id`` (:data:`ACCURACY_COLUMNS`).

    Rows: the in-distribution ``test`` split as a whole (subcase and label "all"); per ``ood`` subcase and
    label; and the ``ood`` split per label over all subcases (subcase "all": the label ``non_entailed`` row
    is the HANS-LO-style accuracy). Accuracy = (1/n) Σ [predicted = label].
    """
    predicted = np.asarray(predicted).reshape(-1)
    if predicted.shape[0] != len(pairs):
        raise ValueError(f"{predicted.shape[0]} predictions for {len(pairs)} pairs")
    correct = predicted == pairs["label_id"].to_numpy()
    rows = []

    def add(split: str, subcase: str, label: str, mask: np.ndarray) -> None:
        if mask.any():
            rows.append(
                {
                    "model": model,
                    "split": split,
                    "subcase": subcase,
                    "label": label,
                    "n_pairs": int(mask.sum()),
                    "accuracy": float(correct[mask].mean()),
                }
            )

    split = pairs["split"].to_numpy()
    subcase = pairs["subcase"].to_numpy()
    label = pairs["label"].to_numpy()
    add("test", "all", "all", split == "test")
    for name in dict.fromkeys(subcase[split == "ood"]):
        for lab in (NON_ENTAILED, ENTAILED):
            add("ood", str(name), lab, (split == "ood") & (subcase == name) & (label == lab))
    for lab in (NON_ENTAILED, ENTAILED):
        add("ood", "all", lab, (split == "ood") & (label == lab))
    return pd.DataFrame(rows, columns=list(ACCURACY_COLUMNS))


# --------------------------------------------------------------------------- tokens


def encode_pairs(pairs: pd.DataFrame, tokenizer, n_ctx: int) -> dict[str, np.ndarray]:
    """Token ids of every pair as the tokenizer wraps a text (:func:`~thinkalike.language.packing.text_wrapping`,
    ``<bos> … <eos>`` for the grammar tokenizer) — premise, then hypothesis: ``<bos> premise <eos> <bos>
    hypothesis <eos>``, the way two sentences follow each other in the pretraining stream (the BERT
    ``[CLS] A [SEP] B [SEP]`` analogue). Right-padded to the longest pair.

    Returns ``input_ids`` and ``attention_mask`` (int64 ``(n, seq)``) and ``labels`` (``label_id``). Raises
    ``ValueError`` naming ``n_ctx`` when a pair is longer than ``n_ctx`` tokens.
    """
    wrapping = text_wrapping(tokenizer)
    rows = [premise + hypothesis for premise, hypothesis in _wrapped_pairs(pairs, tokenizer)]
    longest = max((len(r) for r in rows), default=0)
    if longest > n_ctx:
        raise ValueError(
            f"n_ctx={n_ctx} is shorter than the longest premise-hypothesis pair ({longest} tokens); raise n_ctx"
        )
    input_ids = np.full((len(rows), longest), wrapping.pad, dtype=np.int64)
    attention_mask = np.zeros((len(rows), longest), dtype=np.int64)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
        attention_mask[i, : len(row)] = 1
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": np.array(pairs["label_id"], dtype=np.int64),
    }


def _wrapped_pairs(pairs: pd.DataFrame, tokenizer) -> list[tuple[list[int], list[int]]]:
    """Per pair, the wrapped token ids of its premise and of its hypothesis (``<bos> text <eos>`` each)."""
    wrapping = text_wrapping(tokenizer)
    # ids only: the attention masks and type ids a tokenizer returns by default would be built for every text, unused
    encode = tokenizer(
        list(pairs["premise"]) + list(pairs["hypothesis"]),
        add_special_tokens=False,
        return_attention_mask=False,
        return_token_type_ids=False,
    )["input_ids"]
    n = len(pairs)
    return [
        ([*wrapping.prefix, *encode[i], *wrapping.suffix], [*wrapping.prefix, *encode[n + i], *wrapping.suffix])
        for i in range(n)
    ]


# --------------------------------------------------------------------------- pretraining text


def pack_pairs(pairs: pd.DataFrame, tokenizer, n_ctx: int) -> tuple[np.ndarray, np.ndarray]:
    """Pretraining rows of whole pairs: ``<bos> P <eos> <bos> H <eos>`` of consecutive pairs, as many as fit in
    ``n_ctx`` tokens, never split across rows, right-padded with the pad token. Returns the rows (int64
    ``(n_rows, n_ctx)``) and where the hypotheses are (bool, same shape: for hypothesis-weighted masking,
    :meth:`thinkalike.models.training.LanguageModelTrainer.train`'s ``mask_rates``). Raises ``ValueError``
    naming ``n_ctx`` when a pair is longer, and when the tokenizer has no pad token."""
    if tokenizer.pad_token_id is None:
        raise ValueError(f"{type(tokenizer).__name__} has no pad token: whole-pair rows are right-padded")
    rows: list[list[int]] = []
    hypothesis: list[list[bool]] = []
    row: list[int] = []
    where: list[bool] = []
    for premise, hyp in _wrapped_pairs(pairs, tokenizer):
        if len(premise) + len(hyp) > n_ctx:
            raise ValueError(
                f"n_ctx={n_ctx} is shorter than a premise-hypothesis pair "
                f"({len(premise) + len(hyp)} tokens); raise n_ctx"
            )
        if len(row) + len(premise) + len(hyp) > n_ctx:
            rows.append(row)
            hypothesis.append(where)
            row, where = [], []
        row = row + premise + hyp
        where = where + [False] * len(premise) + [True] * len(hyp)
    if row:
        rows.append(row)
        hypothesis.append(where)
    ids = np.full((len(rows), n_ctx), tokenizer.pad_token_id, dtype=np.int64)
    is_hypothesis = np.zeros((len(rows), n_ctx), dtype=bool)
    for i, (row, where) in enumerate(zip(rows, hypothesis)):
        ids[i, : len(row)] = row
        is_hypothesis[i, : len(where)] = where
    return ids, is_hypothesis


def mix_rows(corpus_rows: np.ndarray, pair_rows: np.ndarray, share: float) -> np.ndarray:
    """Pretraining rows of which a fraction ``share`` ∈ [0, 1] are pair-text rows: all ``corpus_rows`` (none when
    ``share`` is 1) and ``round(share / (1 − share) · n_corpus)`` pair rows, cycling through ``pair_rows`` in
    order (all of them, once, when ``share`` is 1)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    if share == 1.0:
        return np.asarray(pair_rows)
    n_pair = round(share / (1.0 - share) * len(corpus_rows))
    if n_pair and len(pair_rows) == 0:
        raise ValueError("a pair-text share > 0 needs pair-text rows")
    cycled = np.asarray(pair_rows)[np.resize(np.arange(len(pair_rows)), n_pair)] if n_pair else pair_rows[:0]
    return np.concatenate([np.asarray(corpus_rows), cycled])
