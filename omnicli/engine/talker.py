"""The talker stage in this process: Piper speaks one piece at a time, resampled to 24 kHz.

Pieces queue for the voice in arrival order, so concurrent requests interleave sentence by
sentence, and Piper (espeak inside it is not thread-safe) is never entered twice at once.
"""

import asyncio

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.audio.pcm import resample
from omnicli.engine import piper_voice
from omnicli.engine.base import Voice
from omnicli.engine.cores import PRIORITY
from omnicli.engine.workers import ModelQueue


class PiperTalker:
    def __init__(self, default_voice: str | None = None) -> None:
        self.default_voice = default_voice
        self._queue = ModelQueue("voice")

    def check_voice(self, voice: str | None) -> None:
        piper_voice.resolve_voice(voice or self.default_voice)

    async def say(self, text: str, *, voice: str | None, speed: float) -> AudioChunk:
        model = piper_voice.resolve_voice(voice or self.default_voice)
        loaded = await asyncio.to_thread(piper_voice.load, model)
        samples = await self._queue.run(_synthesize, loaded, text, speed)
        return AudioChunk(samples, SPEECH_RATE, text=text)

    async def voices(self) -> list[Voice]:
        return piper_voice.embedded_voices()

    async def preload(self) -> None:
        await asyncio.to_thread(piper_voice.load, piper_voice.resolve_voice(self.default_voice))

    def source(self) -> str | None:
        return ", ".join(str(path) for path in piper_voice.loaded_paths()) or None


def _synthesize(loaded, text: str, speed: float):
    """Piper's audio at 24 kHz; all of it in the worker thread, none on the event loop."""
    with PRIORITY.speaking():
        samples, rate = piper_voice.synthesize(loaded, text, speed)
    return resample(samples, rate, SPEECH_RATE)
