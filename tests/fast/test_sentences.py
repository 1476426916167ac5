"""Splitting text into speakable pieces: whole sentences, bounded run-ons, prompt first pieces."""

from omnicli.engine.sentences import SentenceChunker, split_sentences


def test_sentences_and_lines_break():
    assert split_sentences("Hi there. How are you?\nFine!") == ["Hi there.", "How are you?", "Fine!"]


def test_a_run_on_without_punctuation_is_cut_at_spaces_into_bounded_pieces():
    pieces = split_sentences("word " * 4000)
    assert all(len(p) <= 200 for p in pieces)
    assert " ".join(pieces).split() == ["word"] * 4000


def test_a_run_on_with_commas_is_cut_at_commas_first():
    text = ", ".join(f"clause number {n}" for n in range(60))
    pieces = split_sentences(text)
    assert all(len(p) <= 200 for p in pieces) and len(pieces) > 1
    assert all(p.endswith(",") for p in pieces[:-1])
    assert " ".join(pieces) == text


def test_one_enormous_word_is_still_bounded():
    pieces = split_sentences("x" * 1000)
    assert [len(p) for p in pieces] == [200] * 5


def test_the_chunker_hands_over_each_sentence_as_soon_as_it_ends():
    chunker = SentenceChunker()
    assert chunker.feed("Hello") == []
    assert chunker.feed(" there. How") == ["Hello there."]
    assert chunker.feed(" are you") == []
    assert chunker.flush() == ["How are you"]
