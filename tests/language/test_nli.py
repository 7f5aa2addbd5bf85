"""NLI pairs: labels checked by an independent parser, splits, the lexical-overlap baseline, bad input;
the grammar's new constructions and the unchanged corpus."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from thinkalike.language import grammar
from thinkalike.language.grammar import (
    ADJECTIVES,
    ANIMATE_NOUNS,
    PLURAL,
    SINGULAR,
    TRANSITIVE_VERBS,
    coordinate,
    coordinated_number,
    generate_sentences,
    passive_verb_group,
)
from thinkalike.language.nli import (
    LABELS,
    SUBCASES,
    PairsConfig,
    accuracy_table,
    encode_pairs,
    generate_pairs,
    heuristic_predictions,
)

CONFIG = PairsConfig(
    n_train=300,
    n_test=100,
    n_ood_per_subcase=30,
    counterexample_fraction=0.2,
    counterexample_subcases=("swap", "conjunction"),
    ood_subcases=("passive", "relative_clause", "preposition"),
    p_adjective=0.3,
    seed=5,
)


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    return generate_pairs(CONFIG)


# --------------------------------------------------------------------------- an independent reading of the text

NOUN_FORMS = {n.form(k) for n in ANIMATE_NOUNS for k in (SINGULAR, PLURAL)}
SINGULAR_FORMS = {n.singular for n in ANIMATE_NOUNS}
PAST_TO_BASE = {v.past: v.base for v in TRANSITIVE_VERBS}
PARTICIPLE_TO_BASE = {v.participle: v.base for v in TRANSITIVE_VERBS}
PASSIVE_BE = {"was": SINGULAR, "were": PLURAL}


class Reader:
    """Reads the (agent, verb, patient) triples a sentence asserts from its words alone (grammar lexicon
    only): NP = the [ADJ] NOUN; clauses: NP [and NP | PREP NP | that VERB NP | that NP VERB] VERB NP [and NP]
    or NP was/were PARTICIPLE by NP. A PP modifier asserts nothing."""

    def __init__(self, text: str) -> None:
        assert text.endswith(" ."), text
        self.words = text.split()[:-1]
        self.i = 0

    def take(self) -> str:
        word = self.words[self.i]
        self.i += 1
        return word

    def noun_phrase(self) -> str:
        assert self.take() == "the"
        word = self.take()
        if word in ADJECTIVES:
            word = self.take()
        assert word in NOUN_FORMS, word
        return word

    def triples(self) -> set[tuple[str, str, str]]:
        found: set[tuple[str, str, str]] = set()
        subjects = [self.noun_phrase()]
        nxt = self.words[self.i]
        if nxt == "and":
            self.take()
            subjects.append(self.noun_phrase())
        elif nxt in grammar.PREPOSITIONS:
            self.take()
            self.noun_phrase()
        elif nxt == "that":
            self.take()
            if self.words[self.i] == "the":  # object relative clause: the RC noun did it to the head
                inner = self.noun_phrase()
                found.add((inner, PAST_TO_BASE[self.take()], subjects[0]))
            else:  # subject relative clause: the head did it to the RC noun
                verb = PAST_TO_BASE[self.take()]
                found.add((subjects[0], verb, self.noun_phrase()))
        if self.words[self.i] in PASSIVE_BE:
            be = self.take()
            assert PASSIVE_BE[be] == (SINGULAR if subjects[0] in SINGULAR_FORMS else PLURAL), "be must agree"
            verb = PARTICIPLE_TO_BASE[self.take()]
            assert self.take() == "by"
            found.add((self.noun_phrase(), verb, subjects[0]))
        else:
            verb = PAST_TO_BASE[self.take()]
            objects = [self.noun_phrase()]
            if self.i < len(self.words) and self.words[self.i] == "and":
                self.take()
                objects.append(self.noun_phrase())
            found.update((s, verb, o) for s in subjects for o in objects)
        assert self.i == len(self.words), f"unread words in {' '.join(self.words)!r}"
        return found


def test_every_label_follows_from_the_triples_read_from_the_text(pairs):
    """Entailed ⇔ the hypothesis's (agent, verb, patient) holds in the premise — read from the words alone."""
    for row in pairs.itertuples():
        premise = Reader(row.premise).triples()
        (hypothesis,) = Reader(row.hypothesis).triples()
        entailed = hypothesis in premise
        assert LABELS[row.label_id] == row.label
        assert row.label == ("entailed" if entailed else "non_entailed"), (row.premise, row.hypothesis)
        # the structured fields say the same as the text
        assert {tuple(t.split()) for t in row.premise_triples} == premise
        assert tuple(row.hypothesis_triple.split()) == hypothesis


def test_variants_and_the_lexical_overlap_they_promise(pairs):
    overlap = np.array([set(h.split()) <= set(p.split()) for p, h in zip(pairs.premise, pairs.hypothesis)])
    assert (overlap == pairs.lexical_overlap.to_numpy()).all()
    by_variant = pairs.groupby("variant").lexical_overlap
    assert by_variant.all()["entailed"] and by_variant.all()["overlap_non_entailed"]
    assert not by_variant.any()["substituted"]
    assert set(pairs.loc[pairs.variant == "overlap_non_entailed", "label"]) == {"non_entailed"}
    # every construction is in there, in every form
    assert set(pairs.form) == {
        "active",
        "passive",
        "subject_rc",
        "object_rc",
        "preposition",
        "subject_coordination",
        "object_coordination",
    }
    assert pairs.premise.str.split().map(lambda w: bool(set(w) & set(ADJECTIVES))).any()
    assert not pairs.hypothesis.str.split().map(lambda w: bool(set(w) & set(ADJECTIVES))).any()


def test_split_composition_and_disjointness(pairs):
    assert pairs.groupby("split").size().to_dict() == {"train": 300, "test": 100, "ood": 3 * 2 * 30}
    in_dist = pairs[pairs.split != "ood"]
    ood = pairs[pairs.split == "ood"]
    counter = in_dist[in_dist.variant == "overlap_non_entailed"]
    # the subcases seen as overlap-but-not-entailed in training never come back out of distribution
    assert set(counter.subcase) == set(CONFIG.counterexample_subcases)
    assert set(ood.loc[ood.variant == "overlap_non_entailed", "subcase"]) == set(CONFIG.ood_subcases)
    assert not set(counter.subcase) & set(ood.subcase)
    for split, n in (("train", 300), ("test", 100)):
        part = pairs[pairs.split == split]
        n_non_entailed = n // 2
        assert (part.label == "non_entailed").sum() == n_non_entailed
        assert (part.variant == "overlap_non_entailed").sum() == round(0.2 * n_non_entailed)
        assert set(part.loc[part.variant == "entailed", "subcase"]) == set(SUBCASES)
    assert set(ood.variant) == {"entailed", "overlap_non_entailed"}
    assert (ood.groupby(["subcase", "label"]).size() == 30).all()
    keys = list(zip(pairs.premise, pairs.hypothesis))
    assert len(set(keys)) == len(keys)  # no pair twice, so no pair in two splits
    assert pairs.pair_id.tolist() == list(range(len(pairs)))


def test_the_heuristic_baseline_fails_exactly_on_the_non_entailed_overlap_pairs(pairs):
    table = accuracy_table(pairs, heuristic_predictions(pairs), "heuristic").set_index(["split", "subcase", "label"])
    for subcase in CONFIG.ood_subcases:
        assert table.loc[("ood", subcase, "non_entailed"), "accuracy"] == 0.0
        assert table.loc[("ood", subcase, "entailed"), "accuracy"] == 1.0
    assert table.loc[("ood", "all", "non_entailed"), "n_pairs"] == 90
    # in distribution it is wrong only on the counterexamples
    test = pairs[pairs.split == "test"]
    expected = 1 - (test.variant == "overlap_non_entailed").mean()
    assert table.loc[("test", "all", "all"), "accuracy"] == pytest.approx(expected)
    without = generate_pairs(PairsConfig(n_train=50, n_test=50, n_ood_per_subcase=5, counterexample_fraction=0.0))
    acc = accuracy_table(without, heuristic_predictions(without), "h").set_index(["split", "subcase", "label"])
    assert acc.loc[("test", "all", "all"), "accuracy"] == 1.0


def test_accuracy_table_counts_against_the_labels(pairs):
    always_entailed = np.ones(len(pairs), dtype=np.int64)
    table = accuracy_table(pairs, always_entailed, "yes").set_index(["split", "subcase", "label"])
    test = pairs[pairs.split == "test"]
    assert table.loc[("test", "all", "all"), "accuracy"] == pytest.approx((test.label == "entailed").mean())
    assert table.loc[("ood", "all", "entailed"), "accuracy"] == 1.0
    with pytest.raises(ValueError, match="predictions"):
        accuracy_table(pairs, always_entailed[:-1], "short")


def test_generation_is_deterministic():
    small = PairsConfig(n_train=40, n_test=20, n_ood_per_subcase=4, seed=3)
    pd.testing.assert_frame_equal(generate_pairs(small), generate_pairs(small))
    other = generate_pairs(PairsConfig(n_train=40, n_test=20, n_ood_per_subcase=4, seed=4))
    assert other.premise.tolist() != generate_pairs(small).premise.tolist()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"counterexample_fraction": 1.0}, r"PairsConfig.counterexample_fraction must be in \[0, 1\)"),
        ({"counterexample_fraction": -0.1}, r"PairsConfig.counterexample_fraction must be in \[0, 1\)"),
        ({"ood_subcases": ("passive", "cleft")}, r"ood_subcases has unknown subcase\(s\) \['cleft'\]; known: \['swap'"),
        ({"counterexample_subcases": ("swapp",)}, r"counterexample_subcases has unknown subcase"),
        ({"counterexample_subcases": ("swap", "passive")}, r"disjoint .* both have \['passive'\]"),
        ({"ood_subcases": ()}, r"ood_subcases is empty"),
        ({"counterexample_subcases": ()}, r"counterexample_subcases is empty"),
        ({"n_train": 0}, r"n_train must be >= 1"),
        ({"p_adjective": 1.5}, r"p_adjective must be in \[0, 1\]"),
    ],
)
def test_bad_settings_are_refused_with_the_setting_named(settings, message):
    with pytest.raises(ValueError, match=message):
        PairsConfig(**settings)


def test_settings_validate_as_pipeline_parameters():
    from thinkalike.pipelines.nli.schema import validate_nli
    from thinkalike.pipelines.schema import ParameterError

    config = validate_nli({"pairs": {"ood_subcases": ["passive"], "counterexample_fraction": 0.1}}).pairs
    assert config.ood_subcases == ("passive",)
    with pytest.raises(ParameterError, match=r"^nli.pairs.counterexample_fraction must be in \[0, 1\), got 1.0$"):
        validate_nli({"pairs": {"counterexample_fraction": 1.0}})
    with pytest.raises(ParameterError, match=r"^nli.pairs.n_trian: unknown parameter"):
        validate_nli({"pairs": {"n_trian": 10}})


def test_encoded_pairs_are_premise_then_hypothesis_each_wrapped():
    from thinkalike.language.tokenizer import train_tokenizer

    table = generate_pairs(PairsConfig(n_train=20, n_test=10, n_ood_per_subcase=2))
    tokenizer = train_tokenizer(list(table.premise) + list(table.hypothesis), vocab_size=200)
    encoded = encode_pairs(table, tokenizer, n_ctx=64)
    assert encoded["input_ids"].shape == encoded["attention_mask"].shape
    assert (encoded["labels"] == table.label_id.to_numpy()).all()
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    for i, row in enumerate(table.itertuples()):
        ids = encoded["input_ids"][i][encoded["attention_mask"][i] == 1].tolist()
        assert ids[0] == bos and ids[-1] == eos and ids.count(bos) == 2 and ids.count(eos) == 2
        split = ids.index(eos)
        assert ids[split + 1] == bos
        assert tokenizer.decode(ids[1:split]) == row.premise
        assert tokenizer.decode(ids[split + 2 : -1]) == row.hypothesis
        assert (encoded["attention_mask"][i][len(ids) :] == 0).all()
    with pytest.raises(ValueError, match="n_ctx=8"):
        encode_pairs(table, tokenizer, n_ctx=8)


# --------------------------------------------------------------------------- the grammar's new constructions


def test_passive_and_coordination_agree():
    see = next(v for v in TRANSITIVE_VERBS if v.base == "see")
    helped = next(v for v in TRANSITIVE_VERBS if v.base == "help")
    assert passive_verb_group(see, SINGULAR, "past") == ["was", "seen"]
    assert passive_verb_group(see, PLURAL, "past") == ["were", "seen"]
    assert passive_verb_group(helped, SINGULAR, "present") == ["is", "helped"]
    assert passive_verb_group(helped, PLURAL, "present") == ["are", "helped"]
    with pytest.raises(ValueError, match="transitive"):
        passive_verb_group(grammar.INTRANSITIVE_VERBS[0], SINGULAR, "past")
    assert coordinated_number([SINGULAR, SINGULAR]) == PLURAL and coordinated_number([SINGULAR]) == SINGULAR
    dog, cat = (["the", "dog"], ["the", "cat"])
    assert coordinate([dog, cat]) == ["the", "dog", "and", "the", "cat"]
    # a coordinated subject takes the plural verb
    assert helped.form(coordinated_number([SINGULAR, SINGULAR]), "present") == "help"
    new_words = {"was", "were", "is", "are", "by", "and", "seen", "known"}
    assert new_words <= grammar.lexicon_words()


def _digest(table: pd.DataFrame) -> str:
    digest = hashlib.sha256("|".join(table.columns).encode())
    for row in table.itertuples(index=False):
        cells = (" ".join(map(str, v)) if isinstance(v, list) else str(v) for v in row)
        digest.update(("\t".join(cells) + "\n").encode())
    return digest.hexdigest()


def test_the_corpus_is_what_it_was_before_the_nli_constructions():
    """The grammar's NLI additions leave generate_sentences untouched (digest computed with the grammar
    before they were added)."""
    assert _digest(generate_sentences(500, seed=11)) == (
        "cbfe35261ee5856fc5b20d113d5ea28b7fdfd1bd993dc3d44b82be3022ee9783"
    )


def test_substituted_pairs_replace_one_to_three_slots_and_stay_non_entailed():
    """substituted_slots=3: every substituted hypothesis differs from an entailed triple in 1..3 of its slots, by
    words absent from the premise, and all three counts occur; 3 is the default (conf/base's nli.pairs)."""
    three = generate_pairs(PairsConfig(n_train=300, n_test=10, n_ood_per_subcase=2, substituted_slots=3, seed=2))
    substituted = three[three.variant == "substituted"]
    changed = set()
    for row in substituted.itertuples():
        premise_words = set(row.premise.split())
        hypothesis = row.hypothesis_triple.split()
        # the fewest slots in which the hypothesis differs from any premise triple
        changed.add(min(sum(a != b for a, b in zip(hypothesis, t.split())) for t in row.premise_triples))
        assert Reader(row.hypothesis).triples().isdisjoint(Reader(row.premise).triples())
        assert not set(row.hypothesis.split()) <= premise_words
        assert row.label == "non_entailed"
    assert changed == {1, 2, 3}
    default = generate_pairs(PairsConfig(n_train=60, n_test=10, n_ood_per_subcase=2, seed=2))
    stated = generate_pairs(PairsConfig(n_train=60, n_test=10, n_ood_per_subcase=2, substituted_slots=3, seed=2))
    pd.testing.assert_frame_equal(default, stated)
    with pytest.raises(ValueError, match=r"PairsConfig.substituted_slots must be 1, 2 or 3"):
        PairsConfig(substituted_slots=4)


def test_whole_pair_rows_mark_the_hypotheses_and_decode_to_the_pairs():
    from thinkalike.language.nli import pack_pairs
    from thinkalike.language.tokenizer import train_tokenizer

    table = generate_pairs(PairsConfig(n_train=40, n_test=4, n_ood_per_subcase=1))
    tokenizer = train_tokenizer(list(table.premise) + list(table.hypothesis), vocab_size=200)
    rows, is_hypothesis = pack_pairs(table, tokenizer, 48)
    assert rows.shape[1] == 48 and is_hypothesis.shape == rows.shape and len(rows) < len(table)
    premises, hypotheses = [], []
    for row, where in zip(rows, is_hypothesis):
        n_real = int((row != tokenizer.pad_token_id).sum())
        assert (row[n_real:] == tokenizer.pad_token_id).all() and not where[n_real:].any()  # right-padded
        starts = np.flatnonzero(row == tokenizer.bos_token_id)
        assert len(starts) % 2 == 0  # whole pairs only
        for start, end in zip(starts, [*starts[1:], n_real]):
            assert row[end - 1] == tokenizer.eos_token_id and len(set(where[start:end])) == 1
            (hypotheses if where[start] else premises).append(tokenizer.decode(row[start + 1 : end - 1]))
    assert premises == list(table.premise) and hypotheses == list(table.hypothesis)
    with pytest.raises(ValueError, match="n_ctx=8"):
        pack_pairs(table, tokenizer, 8)


def test_row_mixing():
    from thinkalike.language.nli import mix_rows

    corpus, pairs = np.zeros((6, 4), dtype=np.int64), np.arange(8).reshape(2, 4)
    mixed = mix_rows(corpus, pairs, 0.25)  # 0.25 / 0.75 * 6 = 2 pair rows
    assert mixed.shape == (8, 4) and (mixed[6:] == pairs).all()
    assert (mix_rows(corpus, pairs, 0.5)[6:] == np.concatenate([pairs, pairs, pairs])).all()  # cycled
    assert (mix_rows(corpus, pairs, 1.0) == pairs).all() and (mix_rows(corpus, pairs, 0.0) == corpus).all()
