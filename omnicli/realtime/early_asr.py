"""Hearing the user before they commit: once a short pause follows speech, the pending audio is
transcribed in the background. If the commit that follows added only silence, its transcript is
ready when the answer starts, so the answer does not wait for ASR (measured here: ~300 ms of
the commit-to-first-audio time). New speech before the commit voids the early transcript."""

import asyncio

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import pcm16_to_float
from omnicli.audio.vad import TurnDetector
from omnicli.engine.base import Engine

PAUSE_MS = 96
"""Three VAD chunks: started before a semantic turn end (Smart Turn is asked at 128 ms), the
transcript is (nearly) ready at the commit; at 200 ms it cost those turns ~150 ms of ASR."""


class EarlyTranscriber:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._detector: TurnDetector | None = None
        self._heard: bytes | None = None
        self._task: asyncio.Task | None = None

    def pauses(self, samples: np.ndarray) -> list[str]:
        """The VAD's verdicts on an appended piece ("started"/"stopped"); CPU work, for a worker thread."""
        if self._detector is None:
            self._detector = TurnDetector(SPEECH_RATE, silence_ms=PAUSE_MS, prefix_padding_ms=0)
        return [turn.kind for turn in self._detector.feed(samples)]

    def act(self, verdicts: list[str], buffer: bytes | bytearray) -> None:
        """On the loop, after `pauses`: speech voids the early transcript, a pause starts one."""
        for kind in verdicts:
            if kind == "started":
                self.reset()
            elif buffer:
                self.reset()
                self._heard = bytes(buffer)
                self._task = asyncio.create_task(self._transcribe(self._heard))

    async def _transcribe(self, pcm: bytes) -> str | None:
        try:
            samples = await asyncio.to_thread(pcm16_to_float, pcm)
            return (await self.engine.transcribe(samples, SPEECH_RATE, quick=True)).text
        except Exception:  # noqa: BLE001 - no early transcript: the turn is heard the usual way
            return None

    async def take(self, committed: bytes) -> str | None:
        """The transcript of `committed`, if it was heard early and only silence came after."""
        task, heard = self._task, self._heard
        self.reset(cancel=False)
        if task is None or heard is None or not committed.startswith(heard):
            if task is not None:
                task.cancel()
            return None
        return await task

    def reset(self, cancel: bool = True) -> None:
        if cancel and self._task is not None:
            self._task.cancel()
        self._task, self._heard = None, None
