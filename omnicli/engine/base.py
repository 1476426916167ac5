"""The one interface every command drives: an in-process engine or a server behind HTTP.

Audio crosses it as float32 mono chunks at `SPEECH_RATE`, whichever engine made it, so callers
never care where speech came from.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

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


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class AudioPart:
    """An attached audio file, kept as its bytes so a server gets exactly what the user gave."""

    data: bytes
    format: str
    """wav, mp3, flac or ogg."""


@dataclass(frozen=True)
class ImagePart:
    data: bytes
    mime: str


Part = TextPart | AudioPart | ImagePart


@dataclass
class Message:
    role: Literal["system", "user", "assistant"]
    parts: list[Part]

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass
class ChatRequest:
    messages: list[Message]
    modalities: tuple[str, ...] = ("text",)
    voice: str | None = None
    model: str | None = None
    max_tokens: int = 256
    temperature: float = 0.7
    speed: float = 1.0

    @property
    def wants_audio(self) -> bool:
        return "audio" in self.modalities


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class AudioDelta:
    chunk: AudioChunk


@dataclass(frozen=True)
class TranscriptDelta:
    """What the engine heard in an audio attachment (embedded engine: its ASR stage)."""

    text: str


@dataclass(frozen=True)
class ChatDone:
    text: str
    finish_reason: str = "stop"
    usage: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)


ChatDelta = TextDelta | AudioDelta | TranscriptDelta | ChatDone


class Engine(Protocol):
    def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]: ...

    def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]: ...

    async def voices(self) -> list[Voice]: ...

    async def aclose(self) -> None: ...
