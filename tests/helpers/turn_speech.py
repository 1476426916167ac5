"""Real speech for the acceptance tests: the embedded Piper voice without its sampling noise (every
run hears the same audio), at 24 kHz: sentences, sentences with a pause inside, and a spoken
question. The fast layer hears `tests/helpers/synthetic_speech.py`, with the same names."""

from functools import cache
from pathlib import Path

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from tests.helpers.clips import wav_file, with_pause, with_silence

UNFINISHED = ("I was wondering if", "you could tell me the capital of France.")
"""A sentence whose first half Smart Turn hears as unfinished, read as two halves."""
QUESTION = "What is the capital of France?"


@cache
def _piper(text: str) -> np.ndarray:
    """`text` as the Piper voice says it without its sampling noise (every run hears the same), at 24 kHz."""
    from piper import SynthesisConfig

    from omnicli.audio.pcm import resample
    from omnicli.engine import piper_voice

    voice = piper_voice.load_piper(piper_voice.joe_path())
    still = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    samples = np.concatenate([c.audio_float_array for c in voice.synthesize(text, syn_config=still)])
    return resample(samples, voice.config.sample_rate, SPEECH_RATE)


@cache
def say(text: str) -> np.ndarray:
    """`text` spoken, without the silence Piper puts around it (so a pause is the one asked for)."""
    samples = _piper(text)
    frames = samples[: len(samples) // 240 * 240].reshape(-1, 240)
    loud = np.flatnonzero(np.sqrt((frames ** 2).mean(axis=1)) > 0.005)  # 10 ms frames with sound in them
    return samples[loud[0] * 240:(loud[-1] + 1) * 240]


def paused(first: str, second: str, pause_s: float, tail_s: float = 2.5) -> np.ndarray:
    """One second of silence, `first`, a pause, `second`, then `tail_s` of silence."""
    return with_pause(say(first), say(second), pause_s, tail_s)


def spoken(text: str, tail_s: float = 2.5) -> np.ndarray:
    """One second of silence, `text`, then `tail_s` of silence."""
    return with_silence(say(text), tail_s)


def speech() -> np.ndarray:
    """'What time is it?' spoken by the real Piper voice (about 1 s, with Piper's own silence around
    it), at 24 kHz: real speech for the real Silero VAD."""
    return _piper("What time is it?")


@cache
def speech_file() -> Path:
    """`speech()` as a WAV file, made once per test run."""
    return wav_file(speech(), "question.wav")
