"""The one interface every command drives: an in-process engine or a server behind HTTP.

Audio crosses it as float32 mono chunks at `SPEECH_RATE`, whichever engine made it, so callers
never care where speech came from.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

SPEECH_RATE = 24000


@dataclass(frozen=True)
class SpeechRequest:
    text: str
    voice: str | None = None
    speed: float = 1.0
    instructions: str | None = None
    language: str | None = None
    model: str | None = None
    ref_audio: str | None = None
    """Reference audio for voice cloning, as a data URI or URL."""
    ref_text: str | None = None


@dataclass
class AudioChunk:
    samples: np.ndarray
    rate: int = SPEECH_RATE
    text: str | None = None
    """The sentence this chunk speaks, when the engine knows it."""

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate


@dataclass(frozen=True)
class Voice:
    name: str
    description: str = ""
    details: dict = field(default_factory=dict)


class Engine(Protocol):
    def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]: ...

    async def voices(self) -> list[Voice]: ...

    async def aclose(self) -> None: ...
