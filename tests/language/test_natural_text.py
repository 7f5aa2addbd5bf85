"""Reading natural text and turning it into a sentence table."""

from __future__ import annotations

import pytest

from thinkalike.language.grammar import SENTENCE_COLUMNS
from thinkalike.language.natural_text import natural_text_table, read_natural_text
from thinkalike.pipelines.corpus.schema import check_corpus
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings


def test_lines_mode(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("First  document here.\n\n   \nSecond\tone!\n", encoding="utf-8")
    assert read_natural_text(path, mode="lines") == ["First document here.", "Second one!"]
    assert read_natural_text(str(path)) == ["First document here.", "Second one!"]


def test_plain_mode_splits_paragraphs_and_sentences(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("The cat sat. It was\nhappy!\n\nA new paragraph? Yes.\n", encoding="utf-8")
    assert read_natural_text(path, mode="plain") == [
        "The cat sat.",
        "It was happy!",
        "A new paragraph?",
        "Yes.",
    ]


def test_missing_file_names_path_and_parameter(tmp_path):
    missing = tmp_path / "nowhere.txt"
    with pytest.raises(FileNotFoundError) as info:
        read_natural_text(missing)
    assert str(info.value).startswith("corpus.natural_text.path: ") and str(missing) in str(info.value)
    assert "natural_text_path" not in str(info.value)  # the key before corpus.natural_text


def test_the_checked_parameters_name_the_key_once(tmp_path):
    """The run's parameter check (before anything runs) gives the reader's message, key first, not twice."""
    for path, expected in ((tmp_path / "nowhere.txt", "not found"), (tmp_path / "blank.txt", "no text")):
        if path.name == "blank.txt":
            path.write_text("\n", encoding="utf-8")
        with pytest.raises(ParameterError) as info:
            check_corpus(RunSettings({"corpus": {"natural_text": {"path": str(path)}}}))
        message = str(info.value)
        assert message.startswith("corpus.natural_text.path: ") and message.count("corpus.natural_text.path") == 1
        assert expected in message and str(path) in message


def test_empty_file_and_bad_mode(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text"):
        read_natural_text(path)
    with pytest.raises(ValueError, match="mode"):
        read_natural_text(path, mode="csv")  # type: ignore[arg-type]


def test_table(tmp_path):
    table = natural_text_table(["Hello,  world!", "one two three"], first_id=1000)
    assert list(table.columns) == list(SENTENCE_COLUMNS)
    assert table["sentence_id"].tolist() == [1000, 1001]
    assert table["text"].tolist() == ["Hello, world!", "one two three"]
    assert table["words"][0] == ["Hello,", "world!"]
    assert table["n_words"].tolist() == [2, 3]
    assert set(table["source"]) == {"natural"}
    assert set(table["tense"]) == {"none"} and set(table["main_verb_index"]) == {-1}
    with pytest.raises(ValueError, match="document 1"):
        natural_text_table(["fine", "   "])


def test_a_shipped_text_is_read_by_its_package_name_from_any_working_directory(tmp_path, monkeypatch):
    from thinkalike.language.natural_text import shipped_texts

    monkeypatch.chdir(tmp_path)  # no project here: the text comes with the installed package
    assert "everyday_english.txt" in shipped_texts()
    documents = read_natural_text("package:everyday_english.txt")
    assert len(documents) == 70 and all(document.endswith(".") for document in documents)


def test_an_unknown_shipped_text_is_one_line_naming_the_parameter_and_the_shipped_ones():
    with pytest.raises(FileNotFoundError) as raised:
        read_natural_text("package:nosuch.txt")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("corpus.natural_text.path: the package ships no text 'nosuch.txt'")
    assert "package:everyday_english.txt" in message
