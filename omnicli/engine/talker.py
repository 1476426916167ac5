"""The talker stage in this process: an embedded voice (hibari or Piper) speaks one piece at a time, at 24 kHz.

Pieces queue for the voice in arrival order, so concurrent requests interleave sentence by
sentence, and no voice (espeak inside Piper is not thread-safe) is entered twice at once. The
first piece of an answer written ahead (engine/thinker.py) may be spoken ahead too (`say_ahead`):
the answer's `say` of the same piece then takes that audio.
"""

import asyncio
import contextlib
from pathlib import Path

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.audio.pcm import resample
from omnicli.engine import voice_models
from omnicli.engine.base import Voice
from omnicli.engine.cores import PRIORITY
from omnicli.engine.workers import ModelQueue


class EmbeddedTalker:
    """A `TalkerStage` speaking with an embedded voice in this process, one queued piece at a time."""

    def __init__(self, default_voice: str | None = None) -> None:
        self.default_voice = default_voice
        self._queue = ModelQueue("voice")
        self._ahead: tuple[tuple, asyncio.Future[np.ndarray]] | None = None
        """A piece spoken ahead: (text, voice model, speed), and its audio to come."""
        self._used: dict[Path, None] = {}
        """The voice models this talker has loaded, in order."""

    def check_voice(self, voice: str | None) -> None:
        """Refuse an unknown voice, or a Piper model path that is not there, before any work."""
        voice_models.resolve_voice(voice or self.default_voice)

    async def say(self, text: str, *, voice: str | None, speed: float) -> AudioChunk:
        """Speak one piece at 24 kHz, taking the audio `say_ahead` made for it where it matches."""
        model = voice_models.resolve_voice(voice or self.default_voice)
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == (text, model, speed) and ahead[1].get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(Exception):  # it failed: speak it now
                return AudioChunk(await asyncio.shield(ahead[1]), SPEECH_RATE, text=text)
        return AudioChunk(await self._speak(text, model, speed), SPEECH_RATE, text=text)

    async def say_ahead(self, text: str, *, voice: str | None, speed: float) -> None:
        """Speak the first piece of an answer not yet asked for, for its `say` to take (even while
        it is being spoken); skipped while the voice is busy (a guess does not delay a real
        answer). One piece is kept, the latest."""
        model = voice_models.resolve_voice(voice or self.default_voice)
        key = (text, model, speed)
        if self._queue.busy or (self._ahead is not None and self._ahead[0] == key):
            return
        job = asyncio.ensure_future(self._speak(text, model, speed))
        job.add_done_callback(lambda done: done.cancelled() or done.exception())  # nobody may take it
        self._ahead = (key, job)
        await asyncio.shield(job)

    async def _speak(self, text: str, model: voice_models.VoiceModel, speed: float) -> np.ndarray:
        loaded = await asyncio.to_thread(voice_models.load, model)
        self._used[model.path] = None
        return await self._queue.run(_synthesize, model, loaded, text, speed)

    async def voices(self) -> list[Voice]:
        """The embedded engine's voices."""
        return voice_models.embedded_voices()

    async def preload(self) -> None:
        """Load the default voice now, off the event loop."""
        model = voice_models.resolve_voice(self.default_voice)
        await asyncio.to_thread(voice_models.load, model)
        self._used[model.path] = None

    def source(self) -> str | None:
        """The voice models this talker has loaded so far, comma-separated; None before any."""
        return ", ".join(str(path) for path in self._used) or None


def _synthesize(model: voice_models.VoiceModel, loaded, text: str, speed: float):
    """The voice's audio at 24 kHz; all of it in the worker thread, none on the event loop."""
    with PRIORITY.speaking():
        samples, rate = voice_models.synthesize(model, loaded, text, speed)
    return resample(samples, rate, SPEECH_RATE)
