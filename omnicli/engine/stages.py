"""The three stages of a staged engine, each a small contract of its own.

    [audio in] -> ASR -> thinker (LLM tokens) -> talker (speakable pieces -> speech) -> 24 kHz

A stage may run in this process (Whisper, llama.cpp, Piper) or elsewhere; the cascade and the
staged engine see only these protocols, so any mix of stages composes into one `Engine`.
"""

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from omnicli.audio.chunk import AudioChunk
from omnicli.engine.base import Transcript, Voice


class ASRStage(Protocol):
    """Speech recognition: audio at any rate in, a transcript out."""

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """Hear float32 mono `samples` at `rate` (`quick` and `words` as in `Engine.transcribe`)."""
        ...

    async def preload(self) -> None:
        """Load the model now, so no request pays for loading."""
        ...

    def source(self) -> str | None:
        """Where the model came from, once loaded."""
        ...


class ThinkerStage(Protocol):
    """The LLM: a conversation in, its answer out as streamed text pieces."""

    context: int
    """The model's context window, in tokens."""

    def stream(self, messages: list[dict], *, max_tokens: int, temperature: float) -> AsyncGenerator[str, None]:
        """Text pieces as the model writes them; closing the iterator stops the generation."""
        ...

    async def count_tokens(self, messages: list[dict]) -> int:
        """How many tokens the messages' text takes, for an answer's usage."""
        ...

    async def preload(self) -> None:
        """Load the model now, so no request pays for loading."""
        ...

    def source(self) -> str | None:
        """Where the model came from, once loaded."""
        ...


class TalkerStage(Protocol):
    """The voice: speakable pieces of text in, 24 kHz speech out."""

    def check_voice(self, voice: str | None) -> None:
        """Refuse an unknown voice before any work is done."""
        ...

    async def say(self, text: str, *, voice: str | None, speed: float) -> AudioChunk:
        """One speakable piece (a sentence or a clause), at 24 kHz."""
        ...

    async def voices(self) -> list[Voice]:
        """The voices it can speak with."""
        ...

    async def preload(self) -> None:
        """Load the default voice now, so no request pays for loading."""
        ...

    def source(self) -> str | None:
        """Where the voices came from, once loaded."""
        ...


@dataclass(frozen=True)
class Stages:
    """The three stages a staged engine is made of."""

    asr: ASRStage
    thinker: ThinkerStage
    talker: TalkerStage
