"""The real turn-taking models on real speech (the embedded Piper voice): Silero hears a spoken
question as one turn, Smart Turn hears a finished question as complete and a trailing "if" as not,
and SmolLM2 reads the words heard so far as finished or not. The fast layer hears turns through
stand-ins (tests/helpers/models.py); these are the behaviours the stand-ins stand for."""

import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import resample
from omnicli.turns import smart_turn
from omnicli.turns.models import TurnModels
from omnicli.turns.text_turn import Reading
from omnicli.turns.vad import TurnDetector
from tests.helpers.clips import quiet
from tests.helpers.turn_speech import QUESTION, UNFINISHED, say, spoken


@pytest.fixture(scope="module")
def models() -> TurnModels:
    return TurnModels()


def test_silero_hears_a_spoken_question_as_one_turn_and_smart_turn_ends_it_sooner(models):
    audio = spoken(QUESTION)
    semantic, plain = TurnDetector(SPEECH_RATE, models, semantic=True), TurnDetector(SPEECH_RATE, models, silence_ms=500)
    events = [[e for start in range(0, len(audio), 960) for e in d.feed(audio[start:start + 960])] for d in (semantic, plain)]
    assert [[e.kind for e in each] for each in events] == [["started", "stopped"]] * 2
    (_, by_meaning), (_, by_silence) = events
    assert by_meaning.probability is not None and by_meaning.probability >= 0.5
    assert by_meaning.silence_ms < by_silence.silence_ms == 500
    assert abs(by_meaning.ms - by_silence.ms) < 32  # the same end of speech (to a VAD chunk), heard sooner


def test_smart_turn_hears_a_finished_question_as_complete_and_a_trailing_if_as_not(models):
    def at_16k(samples: np.ndarray) -> np.ndarray:
        return resample(np.concatenate([samples, quiet(0.2)]), SPEECH_RATE, smart_turn.RATE)

    finished = models.smart_turn.completion_probability(at_16k(say(QUESTION)))
    unfinished = models.smart_turn.completion_probability(at_16k(say(UNFINISHED[0])))
    assert unfinished < 0.5 < finished <= 1


def test_the_words_heard_so_far_read_finished_maybe_finished_or_unfinished(models):
    reading = models.words.reading
    assert reading("What is the capital of France?") is reading(QUESTION.rstrip("?")) is Reading.FINISHED
    assert reading("I was wondering if you could tell me the capital of France.") is Reading.FINISHED
    assert reading("What is the capital of.") is Reading.UNFINISHED  # Whisper's full stop after any pause is dropped
    assert reading("I was wondering if") is reading("The children built a small") is Reading.UNFINISHED
    # first halves that are sentences themselves, as short finished sentences read
    assert reading("Remember to save your work") is reading("My grandmother keeps her old letters") is Reading.MAYBE_FINISHED
    assert models.words.sentence_end_probability(" ...  ") == 1.0  # no words: the audio decides


def test_the_words_check_reads_only_what_follows_what_it_read_last_and_says_the_same_as_from_scratch(models):
    """It keeps the longest prefix it read (the turn's words grow as the pause is asked about again):
    each verdict equals a fresh model's, whatever was read before."""
    from omnicli.turns.text_turn import WordsCheck

    texts = ["What is the capital of", "What is the capital of France?", "The children built a small",
             "The children built a small castle out of sand.", "What is the capital of France?"]
    fresh = [WordsCheck().sentence_end_probability(text) for text in texts]
    assert [models.words.sentence_end_probability(text) for text in texts] == pytest.approx(fresh, abs=1e-4)
    assert fresh[0] < 0.02 < fresh[1]
