"""The input audio buffer: PCM16 the client appended and has not committed, kept between turns
as far as a coming turn's padding needs; where turns start and end in it is `TurnEnd`'s to decide.

The CPU work of an append (base64, PCM conversion, both VADs) runs in a worker thread, so a
14 MiB append does not stall other sessions or /health; the session handles one event at a time,
which keeps the order of events. Positions are milliseconds of audio heard since turn detection
was (re)configured, as OpenAI's `audio_start_ms`/`audio_end_ms` count them.
"""

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import pcm16_to_float
from omnicli.engine.base import Engine
from omnicli.errors import EventError
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.turn_end import SEMANTIC_PADDING_MS, TurnEnd
from omnicli.turns.vad import TurnEvent

log = logging.getLogger("omni")

MAX_APPEND_BYTES = 15 * 1024 * 1024
MAX_BUFFER_BYTES = 64 * 1024 * 1024
_B64_SLICE = 4 * 256 * 1024
"""Base64 is decoded this many characters at a time, so the worker thread lets go of the GIL
(and the event loop runs) between slices."""
_KEEP_BETWEEN_TURNS_MS = 200
"""Between turns the buffer keeps a coming turn's prefix padding and this much more."""


def decode_pcm16(audio: str, param: str = "audio") -> bytes:
    """Base64 PCM16 from a client event; CPU work, for a worker thread."""
    if len(audio) > 4 * ((MAX_APPEND_BYTES + 2) // 3):
        raise EventError("one append may carry at most 15 MiB of audio", "audio_too_large", param=param)
    try:
        data = b"".join(base64.b64decode(audio[i:i + _B64_SLICE], validate=True) for i in range(0, len(audio), _B64_SLICE))
    except (binascii.Error, ValueError):
        raise EventError("audio is not valid base64", "invalid_base64", param=param) from None
    if len(data) % 2:
        raise EventError("PCM16 audio must hold whole 2-byte samples", "invalid_audio", param=param)
    return data


@dataclass(frozen=True)
class Committed:
    """A committed turn: its PCM16, the same as float samples, and any transcript heard early."""

    pcm: bytes
    samples: np.ndarray
    transcript: str | None
    """Heard early (before the commit), or None."""


class InputBuffer:
    """A session's uncommitted input audio; `turn_end` hears the turns in it."""

    def __init__(self, engine: Engine, lock: asyncio.Lock, on_late_turns: Callable[[list[TurnEvent]], Awaitable[None]],
                 scheduler: AnswerScheduler, models: TurnModels) -> None:
        """`on_late_turns`: turn ends decided after their append, told under `lock` (`TurnEnd`)."""
        self.pcm = bytearray()
        self._start_ms = 0
        """Where `pcm` starts, in the audio heard since turn detection was configured."""
        self.turn_end = TurnEnd(engine, scheduler, models, lock, on_late_turns, pending=lambda: self.pcm)

    async def append(self, audio: str) -> list[TurnEvent]:
        """Add base64 PCM16; the turns turn detection heard in it (none without turn detection)."""
        verdicts, turns = await asyncio.to_thread(self._append, audio)
        return await self.turn_end.heard(verdicts, turns)

    def _append(self, audio: str) -> tuple[list[str], list[TurnEvent]]:
        data = decode_pcm16(audio)
        if len(self.pcm) + len(data) > MAX_BUFFER_BYTES:
            raise EventError("the input audio buffer may hold at most 64 MiB; commit or clear it", "buffer_full")
        if self.turn_end.detecting is not None and self.turn_end.detector is None:
            self._start_ms = 0  # positions count from the detector that is about to hear this
        self.pcm.extend(data)
        return self.turn_end.hear(pcm16_to_float(data))

    def settle(self) -> None:
        """Between turns keep only what a coming turn's padding could need."""
        turns = self.turn_end
        if turns.detecting is not None and not turns.speaking and not turns.deciding:
            padding = turns.detecting.get("prefix_padding_ms", SEMANTIC_PADDING_MS)
            self.drop_before(turns.heard_ms - padding - _KEEP_BETWEEN_TURNS_MS)

    def drop_before(self, ms: int) -> None:
        """Forget buffered audio before `ms` (a position in the audio heard), keeping what follows."""
        cut = min(len(self.pcm), max(0, (ms - self._start_ms) * SPEECH_RATE // 1000 * 2))
        if cut:
            del self.pcm[:cut]
            self._start_ms += cut // 2 * 1000 // SPEECH_RATE

    async def commit(self) -> Committed:
        """Take the whole buffer as the user's turn, with what was transcribed early; the buffer empties."""
        pcm = bytes(self.pcm)
        self.clear(cancel_early=False)
        samples = await asyncio.to_thread(pcm16_to_float, pcm)
        return Committed(pcm, samples, await self.turn_end.early.take(pcm))

    def clear(self, cancel_early: bool = True) -> None:
        """Empty the buffer; `cancel_early` also drops the transcript being made early."""
        self._start_ms += len(self.pcm) // 2 * 1000 // SPEECH_RATE
        self.pcm.clear()
        if cancel_early:
            self.turn_end.early.reset()

    def close(self) -> None:
        """Stop any turn end being decided and the early transcription (the session ends)."""
        self.turn_end.close()
