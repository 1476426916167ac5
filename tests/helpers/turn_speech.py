"""Spoken sentences for the semantic-turn tests: the embedded Piper voice without its sampling
noise (every run hears the same audio), at 24 kHz, and sentences with a pause inside."""

from functools import cache

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE

UNFINISHED = ("I was wondering if", "you could tell me the capital of France.")
"""A sentence whose first half Smart Turn hears as unfinished, read as two halves."""
QUESTION = "What is the capital of France?"


@cache
def say(text: str) -> np.ndarray:
    """`text` spoken, without the silence Piper puts around it (so a pause is the one asked for)."""
    from piper import SynthesisConfig

    from omnicli.audio.pcm import resample
    from omnicli.engine import piper_voice

    voice = piper_voice.load_piper(piper_voice.joe_path())
    still = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    samples = np.concatenate([c.audio_float_array for c in voice.synthesize(text, syn_config=still)])
    samples = resample(samples, voice.config.sample_rate, SPEECH_RATE)
    frames = samples[: len(samples) // 240 * 240].reshape(-1, 240)
    loud = np.flatnonzero(np.sqrt((frames ** 2).mean(axis=1)) > 0.005)  # 10 ms frames with sound in them
    return samples[loud[0] * 240:(loud[-1] + 1) * 240]


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SPEECH_RATE), np.float32)


def paused(first: str, second: str, pause_s: float, tail_s: float = 2.5) -> np.ndarray:
    """One second of silence, `first`, a pause, `second`, then `tail_s` of silence."""
    return np.concatenate([quiet(1.0), say(first), quiet(pause_s), say(second), quiet(tail_s)])


def spoken(text: str, tail_s: float = 2.5) -> np.ndarray:
    return np.concatenate([quiet(1.0), say(text), quiet(tail_s)])
