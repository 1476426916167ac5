"""Hearing the user before they commit: once a short pause follows speech, the pending audio is
transcribed in the background. If the commit that follows added only silence, its transcript is
ready when the answer starts, so the answer does not wait for ASR (measured here: ~300 ms of
the commit-to-first-audio time). New speech before the commit voids the early transcript."""

import asyncio

import numpy as np

from omnicli.audio.pcm import pcm16_to_float
from omnicli.audio.vad import TurnDetector
from omnicli.realtime.conversation import RATE

PAUSE_MS = 200


class EarlyTranscriber:
    def __init__(self, engine) -> None:
        self.engine = engine
        self._detector = TurnDetector(RATE, silence_ms=PAUSE_MS, prefix_padding_ms=0)
        self._heard: bytes | None = None
        self._task: asyncio.Task | None = None

    def hear(self, samples: np.ndarray, buffer: bytearray) -> None:
        """Called with each appended piece, after it joined `buffer`."""
        for turn in self._detector.feed(samples):
            if turn.kind == "started":
                self.reset()
            elif buffer:
                self._heard = bytes(buffer)
                self._task = asyncio.create_task(self._transcribe(self._heard))

    async def _transcribe(self, pcm: bytes) -> str:
        return (await self.engine.transcribe(pcm16_to_float(pcm), RATE, quick=True)).text

    async def take(self, committed: bytes) -> str | None:
        """The transcript of `committed`, if it was heard early and only silence came after."""
        task, heard = self._task, self._heard
        self.reset(cancel=False)
        if task is None or heard is None or not committed.startswith(heard):
            if task is not None:
                task.cancel()
            return None
        try:
            return await task
        except Exception:  # noqa: BLE001 - fall back to hearing it the usual way
            return None

    def reset(self, cancel: bool = True) -> None:
        if cancel and self._task is not None:
            self._task.cancel()
        self._task, self._heard = None, None
