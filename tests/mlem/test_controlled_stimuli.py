"""The controlled stimulus set (MLEM's paper-style stimuli): fully crossed, balanced, deterministic, and its
labels agree with an independent reading of each sentence's words."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest

from thinkalike.language import grammar
from thinkalike.language.grammar import (
    CONTROLLED_DEFAULT_FACTORS,
    ControlledConfig,
    controlled_sentences,
    generate_sentences,
)

# -- an independent reader: labels from the words alone, with the lexicon as data ------------------------------
NOUN_NUMBER = {form: number for noun in grammar.NOUNS for form, number in ((noun.singular, "sg"), (noun.plural, "pl"))}
VERB_FORMS = {}  # form -> set of (number or None, tense or "base")
for verb in grammar.TRANSITIVE_VERBS + grammar.INTRANSITIVE_VERBS:
    VERB_FORMS.setdefault(verb.singular, set()).add(("sg", "present"))
    VERB_FORMS.setdefault(verb.plural, set()).add(("pl", "present"))
    VERB_FORMS.setdefault(verb.past, set()).add((None, "past"))
QUESTION_AUX = {"does": ("sg", "present"), "do": ("pl", "present"), "did": (None, "past")}


def read_sentence(text: str) -> dict:
    """Sentence labels and per-word (pos, role), parsed left to right from the text; asserts grammaticality
    (agreement) on the way."""
    words, i = text.split(), 0
    pos, roles = [], []

    def take(p, role="other"):
        nonlocal i
        pos.append(p)
        roles.append(role)
        i += 1
        return words[i - 1]

    labels = {"sentence_type": "question" if words[-1] == "?" else "declarative"}
    aux = take("AUX", "aux") if words[0] in QUESTION_AUX else None
    assert (aux is not None) == (labels["sentence_type"] == "question"), text
    assert take("DET") == "the"
    subject_number = NOUN_NUMBER[take("NOUN", "subject")]
    labels.update(subject_number=subject_number, relative_clause="none", rc_noun_number="none", attractor_number="none")
    if words[i] == grammar.RELATIVE_PRONOUN:
        take("REL")
        if words[i] == "the":  # object RC: that the N V (the verb agrees with the RC noun)
            take("DET")
            labels["rc_noun_number"] = rc_number = NOUN_NUMBER[take("NOUN", "rc_noun")]
            labels["relative_clause"] = "object"
            rc_verb = take("VERB", "rc_verb")
            agree_with = rc_number
        else:  # subject RC: that V the N (the verb agrees with the head noun)
            rc_verb = take("VERB", "rc_verb")
            take("DET")
            labels["rc_noun_number"] = NOUN_NUMBER[take("NOUN", "rc_noun")]
            labels["relative_clause"] = "subject"
            agree_with = subject_number
        rc_forms = VERB_FORMS[rc_verb]
        assert any(number in (agree_with, None) for number, _ in rc_forms), text
        rc_tense = "past" if (None, "past") in rc_forms else "present"
    elif words[i] in grammar.PREPOSITIONS:
        take("PREP")
        take("DET")
        labels["attractor_number"] = NOUN_NUMBER[take("NOUN", "attractor")]
    main_verb = take("VERB", "main_verb")
    if aux is not None:
        number, tense = QUESTION_AUX[aux]
        assert number in (subject_number, None), text
        assert ("pl", "present") in VERB_FORMS[main_verb], text  # the bare form after the auxiliary
    else:
        forms = VERB_FORMS[main_verb]
        assert any(n in (subject_number, None) for n, _ in forms), text
        tense = "past" if (None, "past") in forms else "present"
    if labels["relative_clause"] != "none":
        assert rc_tense == tense, text  # the relative clause is in the sentence's tense
    labels["tense"] = tense
    labels["object_number"] = "none"
    if words[i] == "the":
        take("DET")
        labels["object_number"] = NOUN_NUMBER[take("NOUN", "object")]
    take("PUNCT")
    assert i == len(words), text
    return {**labels, "pos": pos, "word_role": roles, "n_words": len(words)}


def test_the_reader_agrees_with_the_grammar_on_the_corpus():
    """The reader is right on sentences of generate_sentences without adjectives and other determiners."""
    table = generate_sentences(300, seed=3, config=grammar.GrammarConfig(p_adjective=0.0, p_the=1.0))
    for _, row in table.iterrows():
        read = read_sentence(row["text"])
        for name, value in read.items():
            assert row[name] == value, (row["text"], name)


@pytest.mark.parametrize(
    "config",
    [
        ControlledConfig(),
        ControlledConfig(nouns=3, verbs=1),
        ControlledConfig(
            factors={
                "relative_clause": ("subject", "object"),
                "rc_noun_number": ("sg", "pl"),
                "subject_number": ("sg", "pl"),
                "tense": ("present", "past"),
            },
            nouns=4,
            verbs=2,
        ),
        ControlledConfig(
            factors={
                "attractor_number": ("none", "sg", "pl"),
                "subject_number": ("sg", "pl"),
                "sentence_type": ("declarative", "question"),
                "object_number": ("sg", "none"),
            }
        ),
    ],
    ids=["default", "3-nouns-1-verb", "rc-crossed-with-its-noun", "attractors"],
)
def test_every_combination_appears_equally_often_with_labels_read_from_the_words(config):
    table = controlled_sentences(config, first_id=100)
    factors = config.crossed()
    cells = table.groupby(list(factors)).size()
    assert len(cells) == math.prod(len(values) for values in factors.values())  # every combination ...
    assert set(cells) == {config.nouns * config.verbs}  # ... equally often
    combinations = set(itertools.product(*factors.values()))
    assert set(cells.index) == combinations
    assert list(table["sentence_id"]) == list(range(100, 100 + len(table)))
    assert (table["source"] == "controlled").all() and list(table.columns) == list(grammar.SENTENCE_COLUMNS)
    for _, row in table.iterrows():
        read = read_sentence(row["text"])
        for name, value in read.items():
            assert row[name] == value, (row["text"], name, row[name], value)
        assert row["words"] == row["text"].split() and row["word_position"] == list(range(row["n_words"]))
        assert row["words"][row["subject_index"]] in NOUN_NUMBER
    # the lexicon is the first nouns and verbs; each subject noun and main verb is balanced over the conditions
    subjects = table.apply(lambda r: r["words"][r["subject_index"]], axis=1).map(
        {f: n.singular for n in grammar.NOUNS for f in (n.singular, n.plural)}
    )
    assert set(subjects) == {noun.singular for noun in grammar.ANIMATE_NOUNS[: config.nouns]}
    assert set(subjects.value_counts()) == {len(table) // config.nouns}


def test_default_set_is_small_and_one_template_per_condition():
    table = controlled_sentences()
    assert len(table) == 72 * 2 * 2 and list(CONTROLLED_DEFAULT_FACTORS) == [
        "subject_number",
        "object_number",
        "tense",
        "sentence_type",
        "relative_clause",
    ]
    words = {word for sentence in table["words"] for word in sentence}
    assert len(words) <= 30  # dog(s), cat(s), 4 verbs' forms, the, that, does/do/did, . ?
    shapes = table.assign(shape=table["pos"].map(" ".join)).groupby(list(CONTROLLED_DEFAULT_FACTORS))["shape"]
    assert (shapes.nunique() == 1).all()  # one template per condition: only the words vary inside a cell


def test_controlled_set_is_deterministic_and_leaves_the_corpus_alone():
    before = generate_sentences(50, seed=5)
    first, second = controlled_sentences(), controlled_sentences()
    pd.testing.assert_frame_equal(first, second)
    pd.testing.assert_frame_equal(before, generate_sentences(50, seed=5))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nouns": 1}, r"ControlledConfig\.nouns"),
        ({"verbs": 0}, r"ControlledConfig\.verbs"),
        ({"factors": {"gender": ("f", "m")}}, "unknown feature 'gender'"),
        ({"factors": {"tense": ("present",)}}, r"factors\.tense: two or more"),
        ({"factors": {"rc_noun_number": ("sg", "pl")}}, "rc_noun_number is defined exactly when"),
        (
            {"factors": {"relative_clause": ("none", "subject"), "attractor_number": ("none", "sg")}},
            "relative clause or a prepositional attractor",
        ),
    ],
)
def test_bad_configs_are_refused_naming_the_setting(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ControlledConfig(**kwargs)
