"""A scripted engine for the fast test layer: it answers with exactly the deltas a test gives it
and records every request, so tests can assert exact messages, events and their order.

A script is a list of deltas (TextDelta, AudioDelta, TranscriptDelta, ChatDone, AudioChunk for
speech), exceptions (raised at that point), `Hold` gates (the stream waits until the test
opens it, to cancel or interrupt mid-answer), and plain functions (called at that point, e.g. to
send the process a Ctrl-C mid-answer).
"""

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.engine.base import (
    AudioDelta,
    ChatDone,
    ChatRequest,
    Engine,
    SpeechRequest,
    TextDelta,
    Transcript,
    Voice,
)


@dataclass
class Hold:
    """A point where the scripted stream waits until `open()` (reached says it got there)."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def open(self) -> None:
        self.gate.set()


def tone(seconds: float, text: str | None = None, level: float = 0.25) -> AudioChunk:
    """A chunk of audible 24 kHz audio (a 220 Hz tone), `seconds` long."""
    t = np.arange(int(seconds * SPEECH_RATE)) / SPEECH_RATE
    return AudioChunk((level * np.sin(2 * np.pi * 220 * t)).astype(np.float32), SPEECH_RATE, text=text)


def answer(*pieces: str, audio_seconds: float = 0.0, finish_reason: str = "stop") -> list:
    """A complete chat answer: each text piece, then (when asked) one audio chunk per piece."""
    script: list = [TextDelta(p) for p in pieces]
    if audio_seconds:
        script += [AudioDelta(tone(audio_seconds / len(pieces), p)) for p in pieces]
    text = "".join(pieces)
    usage = {"prompt_tokens": 7, "completion_tokens": len(pieces), "total_tokens": 7 + len(pieces)}
    script.append(ChatDone(text=text, finish_reason=finish_reason, usage=usage, metrics={}))
    return script


Script = list | Callable[[object], Iterable]


class ScriptedEngine(Engine):
    name = "scripted"

    def __init__(
        self,
        *,
        chat: Script | None = None,
        speech: Script | None = None,
        transcripts: list[str] | None = None,
        voices: list[Voice] | None = None,
    ) -> None:
        """`chat`/`speech`: one script for every request, or a function of the request."""
        self.chat_script = chat if chat is not None else answer("Hello", " there.")
        self.speech_script = speech if speech is not None else [tone(0.5, "Hello.")]
        self.transcripts = list(transcripts or ["hello"])
        self._voices = voices if voices is not None else [Voice("joe", "a scripted voice")]
        self.requests: list = []
        """Every request in order: SpeechRequest, ChatRequest, or ("transcribe", seconds, rate, language, quick)."""
        self.prepared: list = []
        """ChatRequests the engine was told would likely follow (Engine.prepare)..."""
        self.began_answers: list[bool] = []
        """...and whether it was asked to begin answering each."""
        self.preloaded = 0
        self.closed = 0

    @staticmethod
    def _steps(script: Script, req) -> list:
        return list(script(req) if callable(script) else script)

    async def _play(self, steps: list):
        for step in steps:
            if isinstance(step, Hold):
                step.reached.set()
                await step.gate.wait()
            elif isinstance(step, BaseException):
                raise step
            elif callable(step):
                step()
            else:
                await asyncio.sleep(0)  # a real engine yields to the loop between deltas
                yield step

    async def speech(self, req: SpeechRequest):
        self.requests.append(req)
        async for chunk in self._play(self._steps(self.speech_script, req)):
            yield chunk

    async def chat(self, req: ChatRequest):
        self.requests.append(req)
        async for delta in self._play(self._steps(self.chat_script, req)):
            yield delta

    async def transcribe(self, samples, rate, *, language=None, quick=False, words=False) -> Transcript:
        self.requests.append(("transcribe", len(samples) / rate, rate, language, quick) + (("words",) if words else ()))
        text = self.transcripts.pop(0) if len(self.transcripts) > 1 else self.transcripts[0]
        seconds = len(samples) / rate
        spoken = [{"start": 0.0, "end": seconds, "word": word} for word in text.split()] if words else []
        return Transcript(text, language or "en", seconds, [{"start": 0.0, "end": seconds, "text": text}], spoken)

    async def prepare(self, req, *, begin_answer: bool = False) -> None:
        self.prepared.append(req)
        self.began_answers.append(begin_answer)

    async def voices(self) -> list[Voice]:
        return list(self._voices)

    async def preload(self) -> None:
        self.preloaded += 1

    def loaded(self) -> dict[str, str]:
        return {"scripted": "tests/helpers/scripted.py"}

    async def aclose(self) -> None:
        self.closed += 1


class SlowToBegin(ScriptedEngine):
    """Takes `seconds` to begin an answer in the pause (the thinker's first words, the first piece);
    `begun` lists the turns it did begin, and `watch` (a session's events) how many commits had
    been seen by then."""

    def __init__(self, seconds: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.seconds = seconds
        self.begun: list[str] = []
        self.watch: list[dict] = []
        self.committed_when_begun: list[int] = []

    async def prepare(self, req, *, begin_answer: bool = False) -> None:
        await super().prepare(req, begin_answer=begin_answer)
        await asyncio.sleep(self.seconds)
        self.begun.append(req.messages[-1].text)
        self.committed_when_begun.append([e["type"] for e in self.watch].count("input_audio_buffer.committed"))
