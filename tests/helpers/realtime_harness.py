"""Helpers for the realtime fast tests: a session over `LocalTransport` (in memory, no socket)
that reads events until the one a test waits for, and real speech to drive the Silero VAD."""

import asyncio
import atexit
import base64
import shutil
import tempfile
from functools import cache
from pathlib import Path

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.talk.transport import LocalTransport
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine

SAFETY_S = 10
"""Only so a broken test fails instead of hanging; never reached when the code works."""


@cache
def speech() -> np.ndarray:
    """'What time is it?' spoken by the real Piper voice (about 1 s), at 24 kHz: real speech for
    the real Silero VAD. Without Piper's sampling noise, so every run hears the same clip."""
    from piper import SynthesisConfig

    from omnicli.audio.pcm import resample
    from omnicli.engine import piper_voice

    voice = piper_voice.load_piper(piper_voice.joe_path())
    still = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    samples = np.concatenate([c.audio_float_array for c in voice.synthesize("What time is it?", syn_config=still)])
    return resample(samples, voice.config.sample_rate, SPEECH_RATE)


@cache
def speech_file() -> Path:
    """`speech()` as a WAV file, made once per test run in a temporary folder."""
    from omnicli.audio.formats import AudioFormat, encode

    folder = tempfile.mkdtemp(prefix="omni-fast-")
    atexit.register(shutil.rmtree, folder, True)
    path = Path(folder) / "question.wav"
    path.write_bytes(encode(speech(), SPEECH_RATE, AudioFormat.WAV))
    return path


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

    async def error(self, event: dict | str) -> dict:
        """Send a bad event; the `error` it got."""
        await self.send(event)
        return (await self.until("error"))["error"]

    def kinds(self, since: int = 0) -> list[str]:
        return [e["type"] for e in self.seen[since:]]


def user_text(text: str, **extra) -> dict:
    return {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}], **extra}}
