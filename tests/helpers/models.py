"""The fast layer's turn-taking models: stand-ins for Silero, Smart Turn and the words check that
load nothing and answer by rules a test can tell in advance, heard on the synthetic speech of
`tests/helpers/synthetic_speech.py`. The real models, on real speech, are tested in
tests/acceptance (test_turn_models.py, test_semantic_turns.py)."""

import numpy as np

from omnicli.turns.models import TurnModels
from omnicli.turns.silero import SileroModel
from omnicli.turns.smart_turn import RATE, SmartTurn
from omnicli.turns.text_turn import WordsCheck
from tests.helpers.synthetic_speech import FALLING_HZ, LEVEL_HZ, MAYBE_LAST_WORDS, UNFINISHED_WORDS

LOUD_RMS = 0.003
"""2 ms of audio this loud (RMS) is voice: synthetic speech, even at a tenth of its level (RMS 0.018)."""
VOICED_SHARE = 0.75
"""A 32 ms chunk is speech when this share of its 2 ms pieces is voice (so a click is not)."""


class LoudnessVAD(SileroModel):
    """Silero's stand-in: a chunk is speech when most of it is voice, at any level above a whisper
    (as Silero hears quiet speech as speech)."""

    def load(self) -> None:
        """Nothing to load."""

    def speech_probability(self, window: np.ndarray, state: np.ndarray) -> tuple[float, np.ndarray]:
        """0.95 when VOICED_SHARE of the last 32 ms is voice, else 0.02; the state passes through unchanged."""
        pieces = window[0, -512:].reshape(16, 32)
        voiced = np.sqrt((pieces ** 2).mean(axis=1)) >= LOUD_RMS
        return (0.95 if voiced.mean() >= VOICED_SHARE else 0.02), state


class LingeringVAD(LoudnessVAD):
    """Silero's stand-in as the real model hears the end of a voice: still speech for LINGER_CHUNKS
    chunks (96 ms) after the last loud one (Silero: 60-170 ms after the last loud sample)."""

    LINGER_CHUNKS = 3

    def speech_probability(self, window: np.ndarray, state: np.ndarray) -> tuple[float, np.ndarray]:
        """LoudnessVAD's verdict, or 0.95 within LINGER_CHUNKS chunks after a loud one (the state
        counts the chunks since the last loud one, and whether any was)."""
        prob, _ = super().speech_probability(window, state)
        state, loud = state.copy(), prob > 0.5
        state.flat[0] = 0.0 if loud else state.flat[0] + 1
        state.flat[1] = max(state.flat[1], float(loud))
        lingering = bool(state.flat[1]) and state.flat[0] <= self.LINGER_CHUNKS
        return (0.95 if lingering else prob), state


class PitchTurn(SmartTurn):
    """Smart Turn's stand-in: a turn whose last syllable falls in pitch (synthetic speech ends a
    finished sentence at FALLING_HZ) is complete; one that ends level (LEVEL_HZ) is not."""

    def load(self):
        """Nothing to load."""
        return None

    def completion_probability(self, audio: np.ndarray) -> float:
        """0.98 when the last voiced 100 ms of the 16 kHz `audio` is nearer FALLING_HZ than LEVEL_HZ,
        else 0.05 (no voice at all: 0.05)."""
        frame = RATE // 100
        frames = np.asarray(audio, dtype=np.float32)[: len(audio) // frame * frame].reshape(-1, frame)
        voiced = np.flatnonzero(np.sqrt((frames ** 2).mean(axis=1)) >= LOUD_RMS)
        if not len(voiced):
            return 0.05
        last = frames[max(0, voiced[-1] - 9):voiced[-1] + 1].reshape(-1)
        pitch = np.argmax(np.abs(np.fft.rfft(last, RATE))) * 1.0  # 1 Hz bins
        return 0.98 if abs(pitch - FALLING_HZ) < abs(pitch - LEVEL_HZ) else 0.05


class SurerAfterSilence(PitchTurn):
    """Smart Turn as it hears some finished questions: unsure (0.5) at a short pause, as sure as
    PitchTurn once 300 ms of silence follow the voice."""

    def completion_probability(self, audio: np.ndarray) -> float:
        """PitchTurn's verdict once the 16 kHz `audio` ends in 300 ms of silence, 0.5 before."""
        frame = RATE // 100
        frames = np.asarray(audio, dtype=np.float32)[: len(audio) // frame * frame].reshape(-1, frame)
        voiced = np.flatnonzero(np.sqrt((frames ** 2).mean(axis=1)) >= LOUD_RMS)
        quiet_s = (len(frames) - 1 - voiced[-1]) / 100 if len(voiced) else 0.0
        return super().completion_probability(audio) if quiet_s >= 0.3 else 0.5


class LastWordCheck(WordsCheck):
    """The words check's stand-in: words read unfinished when the last one (punctuation dropped, as
    the real check drops it) is one a sentence does not end on (UNFINISHED_WORDS), maybe finished
    when it is one a sentence may go on from (MAYBE_LAST_WORDS)."""

    def load(self) -> None:
        """Nothing to load."""

    def sentence_end_probability(self, text: str) -> float:
        """0.001 when the last word cannot end a sentence, 0.1 when it may, else 0.98 (no words: 1.0,
        as the real check)."""
        words = text.strip().rstrip(" \t\n.,;:?!\u2026-\u2014\"'").split()
        if not words:
            return 1.0
        last = words[-1].lower()
        return 0.001 if last in UNFINISHED_WORDS else 0.1 if last in MAYBE_LAST_WORDS else 0.98


def stand_in_models() -> TurnModels:
    """A fresh set of the three stand-ins."""
    return TurnModels(silero=LoudnessVAD(), smart_turn=PitchTurn(), words=LastWordCheck())


TURN_MODELS = stand_in_models()
"""One set for the whole test process, as a server or `omni talk` shares one."""
