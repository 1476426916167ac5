"""Speech for the fast layer, made without a voice model: each word a tone syllable, its length
from the word's, at LEVEL_HZ, and a sentence that ends in . ? or ! ending on a syllable at
FALLING_HZ, as a finished sentence's pitch falls. The stand-in models of `tests/helpers/models.py`
hear it: loud is speech, a falling last syllable a finished turn. The same names as
`tests/helpers/turn_speech.py` (Piper's real speech, for the acceptance layer)."""

from functools import cache
from pathlib import Path

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from tests.helpers.clips import wav_file, with_pause, with_silence

LEVEL_HZ = 240.0
FALLING_HZ = 150.0
LEVEL = 0.25
UNFINISHED_WORDS = frozenset({"a", "an", "and", "if", "maybe", "of", "or", "small", "that", "the", "to"})
"""Words a sentence does not end on (for the stand-in words check)..."""
MAYBE_LAST_WORDS = frozenset({"work", "light"})
"""...and words it may end on, or go on from ("Remember to save your work | before...")."""

UNFINISHED = ("I was wondering if", "you could tell me the capital of France.")
"""A sentence whose first half ends level (unfinished), read as two halves."""
QUESTION = "What is the capital of France?"


def _syllable(word: str, hz: float) -> np.ndarray:
    seconds = 0.1 + 0.035 * len(word.strip(".,;:?!"))
    t = np.arange(int(seconds * SPEECH_RATE)) / SPEECH_RATE
    fade = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.005)
    return (LEVEL * fade * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@cache
def say(text: str) -> np.ndarray:
    """`text` as tone syllables at 24 kHz, with no silence around it."""
    words = text.split()
    finished = text.rstrip().endswith((".", "?", "!"))
    return np.concatenate([_syllable(word, FALLING_HZ if finished and i == len(words) - 1 else LEVEL_HZ)
                           for i, word in enumerate(words)])


def paused(first: str, second: str, pause_s: float, tail_s: float = 2.5) -> np.ndarray:
    """One second of silence, `first`, a pause, `second`, then `tail_s` of silence."""
    return with_pause(say(first), say(second), pause_s, tail_s)


def spoken(text: str, tail_s: float = 2.5) -> np.ndarray:
    """One second of silence, `text`, then `tail_s` of silence."""
    return with_silence(say(text), tail_s)


def speech() -> np.ndarray:
    """'What time is it?' (about 0.8 s), the fast layer's spoken question."""
    return say("What time is it?")


@cache
def speech_file() -> Path:
    """`speech()` as a WAV file, made once per test run."""
    return wav_file(speech(), "question.wav")
