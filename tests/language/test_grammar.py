"""The grammar: agreement, features consistent with the text, determinism, coverage."""

from __future__ import annotations

import pandas as pd
import pytest
from pydantic import ValidationError

from thinkalike.language import grammar
from thinkalike.language.grammar import (
    AUXILIARIES,
    FEATURE_VALUES,
    INTRANSITIVE_VERBS,
    NOUNS,
    SENTENCE_COLUMNS,
    TRANSITIVE_VERBS,
    GrammarConfig,
    generate_sentences,
)

VERBS = TRANSITIVE_VERBS + INTRANSITIVE_VERBS
SINGULAR_VERB_FORMS = {v.singular for v in VERBS}
PLURAL_VERB_FORMS = {v.plural for v in VERBS}
PAST_VERB_FORMS = {v.past for v in VERBS}
SINGULAR_NOUNS = {n.singular for n in NOUNS}
PLURAL_NOUNS = {n.plural for n in NOUNS}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return generate_sentences(3000, seed=7)


def _number_of_noun(word: str) -> str:
    assert word in SINGULAR_NOUNS | PLURAL_NOUNS, word
    return "sg" if word in SINGULAR_NOUNS else "pl"


def _present_form(word: str) -> str:
    """'sg' / 'pl' for a present-tense verb or auxiliary form."""
    if word in SINGULAR_VERB_FORMS or word == "does":
        return "sg"
    assert word in PLURAL_VERB_FORMS or word == "do", word
    return "pl"


def _index(row, role: str) -> int:
    return list(row.word_role).index(role)


def test_lexicon_forms_are_unambiguous():
    forms = [n.singular for n in NOUNS] + [n.plural for n in NOUNS]
    forms += [f for v in VERBS for f in {v.singular, v.plural, v.past}]
    forms += list(grammar.ADJECTIVES) + list(grammar.PREPOSITIONS)
    assert len(forms) == len(set(forms))
    assert 25 <= len(NOUNS) and 20 <= len(TRANSITIVE_VERBS) and 10 <= len(INTRANSITIVE_VERBS)


def test_columns_and_shapes(table):
    assert list(table.columns) == list(SENTENCE_COLUMNS)
    assert table["sentence_id"].tolist() == list(range(len(table)))
    for row in table.itertuples():
        n = row.n_words
        assert row.text == " ".join(row.words)
        assert len(row.pos) == len(row.word_role) == n
        assert list(row.word_position) == list(range(n))
        assert row.words[row.subject_index] in SINGULAR_NOUNS | PLURAL_NOUNS
        assert row.word_role[row.subject_index] == "subject"
        assert set(row.words) <= grammar.lexicon_words()


def test_subject_verb_agreement(table):
    present = table[table["tense"] == "present"]
    assert len(present) > 1000
    for row in present.itertuples():
        verb = row.words[row.main_verb_index]
        assert _number_of_noun(row.words[row.subject_index]) == row.subject_number
        assert _present_form(verb) == row.subject_number, row.text
    # agreement is not trivially adjacent: interveners of the other number exist
    subject = present["subject_number"]
    attractor, rc_noun = present["attractor_number"], present["rc_noun_number"]
    assert ((attractor != "none") & (attractor != subject)).sum() > 50
    assert ((rc_noun != "none") & (rc_noun != subject)).sum() > 50


def test_relative_clause_verb_agrees_with_its_own_subject(table):
    with_rc = table[(table["relative_clause"] != "none") & (table["tense"] == "present")]
    for row in with_rc.itertuples():
        rc_verb = row.words[_index(row, "rc_verb")]
        expected = row.subject_number if row.relative_clause == "subject" else row.rc_noun_number
        assert _present_form(rc_verb) == expected, row.text


def test_past_tense_has_no_number_marking(table):
    for row in table[table["tense"] == "past"].itertuples():
        word = row.words[row.main_verb_index]
        if row.sentence_type == "question":
            assert word == "did"
        else:
            assert word in PAST_VERB_FORMS


def test_features_match_text(table):
    for row in table.itertuples():
        words, roles = list(row.words), list(row.word_role)
        if row.sentence_type == "question":
            assert words[-1] == "?" and row.pos[0] == "AUX" and row.main_verb_index == 0
            assert words[0] == AUXILIARIES[(row.tense, row.subject_number)]
            assert row.words[_index(row, "main_verb")] in PLURAL_VERB_FORMS  # base form
        else:
            assert words[-1] == "." and roles[row.main_verb_index] == "main_verb"
        if row.relative_clause == "none":
            assert "that" not in words and "rc_noun" not in roles and row.rc_noun_number == "none"
        else:
            that = words.index("that")
            assert that == row.subject_index + 1
            # subject RC: that VERB ...; object RC: that DET ... NOUN VERB
            assert row.pos[that + 1] == ("VERB" if row.relative_clause == "subject" else "DET")
            assert _number_of_noun(words[_index(row, "rc_noun")]) == row.rc_noun_number
        if row.attractor_number == "none":
            assert "attractor" not in roles and "PREP" not in row.pos
        else:
            assert row.pos[row.subject_index + 1] == "PREP"
            assert _number_of_noun(words[_index(row, "attractor")]) == row.attractor_number
        if row.object_number == "none":
            assert "object" not in roles
        else:
            assert _number_of_noun(words[_index(row, "object")]) == row.object_number


def test_articles_agree(table):
    for row in table.itertuples():
        for word, following in zip(row.words, row.words[1:]):
            if word == "a":
                assert following[0] not in "aeiou"
            if word == "an":
                assert following[0] in "aeiou"


def test_every_feature_value_occurs(table):
    for feature, values in FEATURE_VALUES.items():
        assert set(table[feature]) == set(values), feature
    all_pos = {p for ps in table["pos"] for p in ps}
    assert all_pos == {"DET", "NOUN", "VERB", "AUX", "ADJ", "PREP", "REL", "PUNCT"}


def test_deterministic():
    a = generate_sentences(200, seed=3)
    pd.testing.assert_frame_equal(a, generate_sentences(200, seed=3))
    assert a["text"].tolist() != generate_sentences(200, seed=4)["text"].tolist()


def test_config_changes_distribution():
    config = GrammarConfig(p_question=1.0, p_relative_clause=0.0, p_attractor=0.0, p_transitive=0.0)
    table = generate_sentences(100, seed=0, config=config)
    assert set(table["sentence_type"]) == {"question"}
    assert set(table["relative_clause"]) == {"none"} == set(table["attractor_number"])
    assert set(table["object_number"]) == {"none"}
    with pytest.raises(ValidationError, match="frozen"):
        config.p_question = 0.5  # type: ignore[misc]


def test_invalid_arguments():
    with pytest.raises(ValueError, match="p_past"):
        GrammarConfig(p_past=1.5)
    with pytest.raises(ValueError, match="n_sentences"):
        generate_sentences(0, seed=0)
