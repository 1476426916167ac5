"""Splitting text into speakable pieces: whole sentences, bounded run-ons, prompt first pieces."""

from omnicli.engine.sentences import RUNWAY_S, SentenceChunker, first_piece, split_sentences


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


def feed_words(chunker: SentenceChunker, text: str) -> list[tuple[int, str]]:
    """Feed `text` a word at a time, as a thinker writes it; (words fed, piece) as pieces come."""
    out = []
    for n, word in enumerate(text.split(" "), start=1):
        out.extend((n, piece) for piece in chunker.feed(word if n == 1 else " " + word))
    out.extend((n, piece) for piece in chunker.flush())
    return out


def test_the_first_piece_ends_at_a_comma_once_it_is_a_few_words_long():
    pieces = feed_words(SentenceChunker(), "Well, the capital of France, as you know, is Paris.")
    assert [p for _, p in pieces] == ["Well, the capital of France,", "as you know, is Paris."]


def test_a_long_first_sentence_without_breaks_is_cut_after_about_eight_words():
    text = ("The quick brown fox jumps over the lazy dog while the farmer watches from the porch "
            "and wonders why nobody ever fixed the gate.")
    pieces = feed_words(SentenceChunker(), text)
    first_at, first = pieces[0]
    assert first == "The quick brown fox jumps over the lazy dog"  # 43 characters, whole words
    assert first_at == 10  # handed over as the tenth word arrived, not at the sentence's end
    assert " ".join(p for _, p in pieces) == text


def test_later_sentences_stay_whole_unless_they_run_long():
    short = "First one. Then a second sentence, with a comma, that is spoken whole."
    assert [p for _, p in feed_words(SentenceChunker(), short)] == [
        "First one.", "Then a second sentence, with a comma, that is spoken whole."]
    long = ("Yes. The river flows through seven countries before it reaches the sea, and along the way it "
            "feeds farms, cities and forests that depend on it for water every single day of the year.")
    pieces = [p for _, p in feed_words(SentenceChunker(), long)]
    assert pieces[0] == "Yes."
    assert pieces[1] == "The river flows through seven countries before it reaches the sea, and along the way it feeds farms,"
    assert all(len(p) <= 200 for p in pieces) and " ".join(pieces) == long


def test_a_slow_first_piece_is_handed_over_after_half_a_second_once_it_has_three_words():
    now = [0.0]
    chunker = SentenceChunker(clock=lambda: now[0])
    assert chunker.feed("The") == []
    now[0] = 0.3
    assert chunker.feed(" old lighthouse") == []
    now[0] = 0.6  # waited long enough: cut before the last word, which may not be whole yet
    assert chunker.feed(" keep") == ["The old lighthouse"]
    now[0] = 5.0  # later pieces never wait on the clock
    assert chunker.feed("er walked slowly down") == []
    assert chunker.flush() == ["keeper walked slowly down"]


def test_a_later_piece_is_cut_early_when_the_audio_still_to_play_runs_short():
    """A thinker slower than the voice: with little audio left to play, the rest of a sentence is
    handed over after three words (or at a comma) instead of at its end, so it is spoken before
    the speaker runs dry; with plenty left, the sentence stays whole."""
    relaxed, hurried = SentenceChunker(clock=lambda: 0.0), SentenceChunker(clock=lambda: 0.0)
    for chunker in (relaxed, hurried):
        assert chunker.feed("Well, on a clear day, ") == ["Well, on a clear day,"]
    words = ["the ", "sky ", "is ", "typically ", "blue."]
    assert [relaxed.feed(w, runway=2.0) for w in words] == [[], [], [], [], []]
    assert relaxed.flush() == ["the sky is typically blue."]
    assert [hurried.feed(w, runway=RUNWAY_S - 0.1) for w in words] == [[], [], ["the sky is"], [], []]
    assert hurried.flush() == ["typically blue."]


def test_the_first_piece_of_an_answer_written_ahead_is_the_one_its_stream_will_say():
    short = ["There", " are", " seven", " days", " in", " a", " week", "."]
    assert first_piece(short, whole=True) == "There are seven days in a week."
    assert first_piece(short, whole=False) is None  # more may follow "week.": not final yet
    longer = ["Yes", ".", " It", " is", "."]
    assert first_piece(longer, whole=False) == first_piece(longer, whole=True) == "Yes."
    chunker = SentenceChunker(clock=lambda: 0.0)
    streamed = [piece for token in short for piece in chunker.feed(token)] + chunker.flush()
    assert streamed[0] == first_piece(short, whole=True)
