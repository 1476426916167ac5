"""Helpers for the realtime fast tests: a session over `LocalTransport` (in memory, no socket)
that reads events until the one a test waits for."""

import asyncio
import base64

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.talk.transport import LocalTransport
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine

SAFETY_S = 10
"""Only so a broken test fails instead of hanging; never reached when the code works."""


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SPEECH_RATE), np.float32)


def pcm_b64(samples: np.ndarray) -> str:
    return base64.b64encode((np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes()).decode()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, SAFETY_S))


class Session:
    """`async with Session(engine) as s`: a started session; `s.seen` holds every event read."""

    def __init__(self, engine: ScriptedEngine | None = None, scheduler: AnswerScheduler | None = None,
                 models: TurnModels | None = None) -> None:
        self.engine = engine or ScriptedEngine()
        self.transport = LocalTransport(self.engine, scheduler, models or TURN_MODELS)
        self.seen: list[dict] = []
        self._events = None

    async def __aenter__(self) -> "Session":
        await self.transport.open()
        self._events = aiter(self.transport.events())
        await self.until("conversation.created")
        return self

    async def __aexit__(self, *exc) -> None:
        await self.transport.close()

    async def send(self, event: dict | str) -> None:
        if isinstance(event, str):
            await self.transport.session.handle(event)
        else:
            await self.transport.send(event)

    async def until(self, kind: str) -> dict:
        while True:
            event = await anext(self._events)
            self.seen.append(event)
            if event["type"] == kind:
                return event

    async def stream(self, audio: np.ndarray) -> None:
        """`audio` (24 kHz) as a microphone sends it: 40 ms `input_audio_buffer.append`s."""
        step = SPEECH_RATE * 40 // 1000
        for start in range(0, len(audio), step):
            await self.send({"type": "input_audio_buffer.append", "audio": pcm_b64(audio[start:start + step])})

    async def error(self, event: dict | str) -> dict:
        """Send a bad event; the `error` it got."""
        await self.send(event)
        return (await self.until("error"))["error"]

    def kinds(self, since: int = 0) -> list[str]:
        return [e["type"] for e in self.seen[since:]]


def user_text(text: str, **extra) -> dict:
    return {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}], **extra}}
