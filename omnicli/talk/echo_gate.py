"""Without headphones the microphone hears the answer being played. The echo gate lets the mic
through while something plays only when the user is clearly louder than the playback; both talk
clients (turn-based and duplex) use it, so they judge "the user talks over the answer" alike,
and take each microphone frame the same way (`next_heard_frame`)."""

from typing import Any, Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import rms

MARGIN = 2.0
"""The user must be this much louder than the playback to get through."""
LEVEL_SECONDS = 9.0
"""The playback level is learnt over this many seconds of answer (an exponential average weighted
by duration, so it does not depend on how a server slices its audio deltas): the user's first
words over an answer get through easily."""


class EchoGate:
    """Holds back mic frames that are the answer heard from the speaker, not the user."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.level = 0.0

    def played(self, samples: np.ndarray) -> None:
        """Answer audio (24 kHz) handed to the speaker."""
        weight = 1.0 - float(np.exp(-len(samples) / (SPEECH_RATE * LEVEL_SECONDS)))
        self.level += weight * (rms(samples) - self.level)

    def blocks(self, frame: np.ndarray, playing: bool) -> bool:
        """Whether this mic frame is (probably) the answer heard back, not the user."""
        return self.enabled and playing and rms(frame) < MARGIN * self.level


class MicSide(Protocol):
    """What of a talk client its microphone side reads."""

    source: Any  # a sources.Microphone or FileVoice: `.frames`, an asyncio queue
    speaker: Any  # a speakers.Speaker: `.buffered_seconds`
    state: Any  # a talk_state.TalkState: `.mic(frame)` drives the level meter
    mic_muted: bool
    echo: EchoGate


async def next_heard_frame(client: MicSide) -> np.ndarray:
    """The next microphone frame as the client hears it: silence while muted (the meter shows
    that too) or while the gate holds back the answer playing into the microphone."""
    frame = await client.source.frames.get()
    if client.mic_muted:
        frame = np.zeros_like(frame)
    client.state.mic(frame)
    if client.echo.blocks(frame, playing=client.speaker.buffered_seconds > 0):
        frame = np.zeros_like(frame)
    return frame
