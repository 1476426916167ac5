"""One realtime response, from `response.created` to `response.done`.

The one error policy of the realtime side: whatever happens inside (cancelled, the engine
failing with anything at all), the client hears `response.done`, with status `failed` and an
`error` event before it when something raised; the session lives on. A prompt over the
engine's context window is retried with the oldest turns left out, so a long conversation
keeps answering instead of failing.
"""

import asyncio
import base64
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.audio.pcm import float_to_pcm16
from omnicli.engine.base import (
    DEFAULT_MAX_TOKENS,
    AudioDelta,
    ChatDone,
    ChatRequest,
    Engine,
    Message,
    TextDelta,
    TranscriptDelta,
)
from omnicli.errors import ContextWindowError, OmniError
from omnicli.session.conversation import Conversation, Item, messages, new_id
from omnicli.session.settings import SessionSettings
from omnicli.turns.scheduler import AnswerScheduler

log = logging.getLogger("omni")

REALTIME_TEMPERATURE = 0.0  # greedy: small embedded models drift (into French, into lists) when hotter
AUDIO_DELTA_SAMPLES = SPEECH_RATE // 10
"""A synthesized piece goes out as 100 ms deltas: the client can start playing, and a barge-in
can stop, without a whole sentence's frame (seconds of audio) in the way."""

Emit = Callable[..., Awaitable[None]]


class Asked:
    """What an answer is asked for: the session's settings, with a `response.create`'s options over them."""

    def __init__(self, settings: SessionSettings, options: dict) -> None:
        output = {**settings.output, **((options.get("audio") or {}).get("output") or {})}
        self.modalities = list(options.get("output_modalities") or settings.values["output_modalities"])
        self.limit = options.get("max_output_tokens") or settings.values["max_output_tokens"]
        self.instructions = options.get("instructions") or settings.values["instructions"]
        self.voice = output.get("voice")
        self.speed = float(output.get("speed") or 1.0)

    def request(self, prompt: list[Message]) -> ChatRequest:
        """The engine request for these settings, on the given prompt."""
        return ChatRequest(prompt, modalities=("text", "audio") if "audio" in self.modalities else ("text",),
                           voice=self.voice, speed=self.speed, temperature=REALTIME_TEMPERATURE,
                           max_tokens=DEFAULT_MAX_TOKENS if self.limit == "inf" else int(self.limit))


class Response:
    """One answer of a realtime session: asks the engine, streams its text and audio as events, ends with `response.done`."""

    def __init__(self, engine: Engine, conversation: Conversation, settings: SessionSettings, options: dict,
                 emit: Emit, heard: Callable[[Item, str], Awaitable[None]], *, scheduler: AnswerScheduler) -> None:
        self.engine = engine
        self.scheduler = scheduler
        self.conversation = conversation
        self.emit = emit
        self._heard = heard
        self.asked = Asked(settings, options)
        self.modalities, self.limit = self.asked.modalities, self.asked.limit
        self.speaks = "audio" in self.modalities
        self.id = new_id("resp")
        self._wire: dict[str, Any] = {"id": new_id("item"), "type": "message", "object": "realtime.item", "role": "assistant",
                      "status": "in_progress", "content": []}
        self.item = Item(self._wire)
        self._ids = {"response_id": self.id, "item_id": self._wire["id"], "output_index": 0}
        self._part = {"type": "output_audio", "transcript": ""} if self.speaks else {"type": "output_text", "text": ""}
        self._response: dict = {}
        self._previous: str | None = None
        self._spoke = False
        self._text: list[str] = []
        self._usage: dict = {}
        self.finishing = False
        """The closing events have begun: a cancel now waits for them instead of cutting them short."""

    async def begin(self) -> None:
        """Announce the response and its item; the session awaits this before the answer runs,
        so whatever happens next, the client has heard `response.created`."""
        self._response = {"id": self.id, "object": "realtime.response", "status": "in_progress", "output": [],
                          "conversation_id": self.conversation.id, "output_modalities": self.modalities,
                          "max_output_tokens": self.limit, "status_details": None, "usage": None}
        await self.emit("response.created", response=copy.deepcopy(self._response))
        self._previous = self.conversation.insert(self.item)
        await self.emit("conversation.item.added", item=copy.deepcopy(self._wire), previous_item_id=self._previous)
        await self.emit("response.output_item.added", response_id=self.id, output_index=0, item=copy.deepcopy(self._wire))
        # Content-part events name the part 'audio'/'text'; the item's content says output_*.
        await self.emit("response.content_part.added", **self._ids, content_index=0, part=_part_event(self._part))
        self._wire["content"] = [self._part]

    async def run(self) -> None:
        """Answer, then end with `response.done` whatever happened."""
        with self.scheduler.answering():
            await self._answered()

    async def _answered(self) -> None:
        try:
            await self._answer()
        except asyncio.CancelledError as exc:
            await self.finish("cancelled", exc.args[0] if exc.args else "client_cancelled")
        except Exception as exc:  # noqa: BLE001 - one policy: every response ends with response.done
            if not isinstance(exc, OmniError):
                log.exception("realtime: the response failed")
            await self.finish("failed", error=str(exc) or type(exc).__name__)
        else:
            await self.finish("completed")

    async def finish(self, status: str, reason: str | None = None, *, error: str | None = None) -> None:
        """The closing events, once (a second call does nothing): cancelled with why, or failed
        with an `error` event first."""
        if self.finishing:
            return
        self.finishing = True
        details: dict[str, Any] | None = None
        if status == "cancelled":
            details = {"type": "cancelled", "reason": reason}
        elif error is not None:
            details = {"type": "failed", "error": {"type": "server_error", "code": "engine_error", "message": error}}
            await self.emit("error", error={**details["error"], "param": None, "event_id": None})
        ids, part, wire = self._ids, self._part, self._wire
        transcript = "".join(self._text)
        part["transcript" if self.speaks else "text"] = transcript
        if status == "completed":
            if self.speaks:
                await self.emit("response.output_audio.done", **ids, content_index=0)
                await self.emit("response.output_audio_transcript.done", **ids, content_index=0, transcript=transcript)
            else:
                await self.emit("response.output_text.done", **ids, content_index=0, text=transcript)
        wire["status"] = "completed" if status == "completed" else "incomplete"
        await self.emit("response.content_part.done", **ids, content_index=0, part=_part_event(part))
        await self.emit("response.output_item.done", response_id=self.id, output_index=0, item=copy.deepcopy(wire))
        await self.emit("conversation.item.done", item=copy.deepcopy(wire), previous_item_id=self._previous)
        usage = self._usage
        self._response.update(status=status, status_details=details, output=[copy.deepcopy(wire)], usage={
            "input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
        })
        await self.emit("response.done", response=self._response)

    async def _answer(self) -> None:
        """Stream the engine's answer; a context refusal before any output forgets 1, 2, 4... old turns."""
        forget = 1
        while True:
            try:
                return await self._stream()
            except ContextWindowError:
                if self._spoke or not self.conversation.forget_oldest(forget, answering=self.item):
                    raise
                log.info("realtime: the conversation outgrew the context; leaving out the oldest %d turn(s)", forget)
                forget *= 2

    async def _stream(self) -> None:
        item = self.item
        items = [i for i in self.conversation.remembered() if i is not item]
        prompt = await asyncio.to_thread(messages, self.asked.instructions, items)
        unheard = [i for i in items if i.role == "user" and i.transcript is None and i.audio is not None]
        async for delta in self.engine.chat(self.asked.request(prompt)):
            match delta:
                case TranscriptDelta(text=heard) if unheard:
                    await self._heard(unheard.pop(0), heard)
                case TextDelta(text=piece):
                    self._text.append(piece)
                    await self._text_piece(piece)
                case AudioDelta(chunk=chunk):
                    await self._audio_piece(chunk)
                case ChatDone(usage=usage):
                    self._usage = usage

    async def _text_piece(self, piece: str) -> None:
        """A piece of the answer's text, as it is written."""
        self._spoke = True
        kind = "response.output_audio_transcript.delta" if self.speaks else "response.output_text.delta"
        await self.emit(kind, **self._ids, content_index=0, delta=piece)

    async def _audio_piece(self, chunk: AudioChunk) -> None:
        """A synthesized piece of the answer (with the words it speaks)."""
        self._spoke = True
        self.item.spoken.append((self.item.audio_samples + len(chunk.samples), chunk.text or ""))
        await self._send_audio(float_to_pcm16(chunk.samples))

    async def _send_audio(self, pcm: bytes) -> None:
        """One piece as 100 ms deltas; the item counts only the audio actually sent."""
        step = 2 * AUDIO_DELTA_SAMPLES
        for start in range(0, len(pcm), step):
            part = pcm[start:start + step]
            await self.emit("response.output_audio.delta", **self._ids, content_index=0, delta=base64.b64encode(part).decode())
            self.item.audio_samples += len(part) // 2


def _part_event(part: dict) -> dict:
    return {**part, "type": "audio" if part["type"] == "output_audio" else "text"}


async def read_ahead(engine: Engine, conversation: Conversation, settings: SessionSettings, transcript: str,
                     *, begin_answer: bool) -> None:
    """A user's turn heard before its commit: the engine is offered the request an answer to it
    would make with the session's settings (the conversation and these words), to read while the
    user is quiet, and with `begin_answer` to begin answering."""
    wire = {"id": "item_ahead", "type": "message", "role": "user", "content": [{"type": "input_audio"}]}
    items = [*conversation.remembered(), Item(wire, transcript=transcript)]
    asked = Asked(settings, {})
    prompt = await asyncio.to_thread(messages, asked.instructions, items)
    await engine.prepare(asked.request(prompt), begin_answer=begin_answer)
