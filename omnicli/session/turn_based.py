"""One OpenAI Realtime (GA) session, transport-agnostic: JSON events in, JSON events out.

`omni serve` runs it behind a WebSocket; `omni talk` without a server talks to it in memory.
Semantics follow vLLM-Omni's turn-based handler: bad events get an `error` event and the session
lives on; unsupported session fields are dropped; only 24 kHz PCM16 audio is accepted; a new
`response.create` cancels the running response; history lives here. Beyond it: server VAD
(Silero) and semantic VAD (Smart Turn, which vLLM-Omni refuses) commit turns, answer, and
interrupt a response when the user speaks.

This module adapts the wire: `client_events` parses and checks, `settings` keeps the
configuration, `turns.input_buffer` holds the audio and hears turns, `core` keeps the
conversation and the running answer, `responses` runs one answer.
"""

import asyncio
import copy
import logging
import time
from collections.abc import Awaitable, Callable

from openai.types.realtime import (
    ConversationItemCreateEvent,
    ConversationItemDeleteEvent,
    ConversationItemRetrieveEvent,
    ConversationItemTruncateEvent,
    InputAudioBufferAppendEvent,
    InputAudioBufferClearEvent,
    InputAudioBufferCommitEvent,
    ResponseCancelEvent,
    ResponseCreateEvent,
    SessionUpdateEvent,
)

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import pcm16_to_float
from omnicli.engine.base import Engine
from omnicli.errors import EventError, OmniError
from omnicli.session.client_events import ClientEvent, parse
from omnicli.session.conversation import Item, new_id
from omnicli.session.core import ConversationCore, carry_out
from omnicli.session.responses import Response
from omnicli.session.settings import SessionSettings, with_served_voice
from omnicli.turns.input_buffer import InputBuffer, decode_pcm16
from omnicli.turns.models import TurnModels
from omnicli.turns.modes import Detection
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.vad import TurnEvent

log = logging.getLogger("omni")

Send = Callable[[dict], Awaitable[None]]
_PARSE_INLINE_CHARS = 64 * 1024
"""Events up to this size are parsed on the loop; larger ones (audio) in a worker thread."""


class RealtimeSession:
    """One turn-based Realtime session: client events in, server events out (see the module's docstring)."""

    def __init__(self, engine: Engine, send: Send, *, scheduler: AnswerScheduler, models: TurnModels,
                 model_id: str = "omni-embedded", served: bool = True) -> None:
        """`served`: the client is across a network (omni serve), so voices are names from the
        engine's list; `omni talk` in process may name a local Piper model by path. `scheduler` and
        `models` are the process's own, shared by all its sessions."""
        self.engine = engine
        self.scheduler = scheduler
        self.served = served
        self._send = send
        self._send_lock = asyncio.Lock()
        self._one_event_at_a_time = asyncio.Lock()
        self.id = new_id("sess")
        self.expires_at = int(time.time()) + 3600
        self.settings = SessionSettings(model_id)
        self._closed = False
        self.core = ConversationCore(engine, self.settings, scheduler, lambda: self._closed)
        self.conversation = self.core.conversation
        self.input = InputBuffer(engine, self._one_event_at_a_time, self._turns, scheduler, models)
        self.input.turn_end.on_heard(self.core.read_ahead)
        self._speech_item_id: str | None = None

    # ---- transport side ------------------------------------------------------------------

    async def start(self) -> None:
        """Greet the client: `session.created`, then `conversation.created`."""
        await self.settings.take_engine_voice(self.engine)
        await self.emit("session.created", session=self._session_object())
        await self.emit("conversation.created", conversation={"id": self.conversation.id, "object": "realtime.conversation"})

    async def handle(self, text: str) -> None:
        """Carry out one client event (a JSON text); every failure becomes an `error` event.
        Events are carried out one at a time, in the order they came."""
        async with self._one_event_at_a_time:
            await carry_out(text, _parse, self._dispatch, lambda event: event.event_id, self.error)

    async def close(self) -> None:
        """End the session: no more events out, and any answer in progress is cancelled."""
        self._closed = True
        self.input.close()
        await self._cancel_response("client_cancelled")

    async def emit(self, kind: str, **fields) -> None:
        """Send one server event with a fresh event id; a client that is gone closes the session."""
        if self._closed:
            return
        payload = {"type": kind, "event_id": new_id("event"), **fields}
        async with self._send_lock:
            try:
                await self._send(payload)
            except Exception as exc:  # noqa: BLE001 - the client is gone: nobody is left to tell
                log.debug("realtime: cannot send %s: %s", kind, exc)
                self._closed = True

    async def error(self, message: str, code: str, *, event_id=None, param=None) -> None:
        """Send an `error` event; the session goes on."""
        kind = "server_error" if code == "server_error" else "invalid_request_error"
        await self.emit("error", error={"type": kind, "code": code, "message": message, "param": param, "event_id": event_id})

    async def _dispatch(self, event: ClientEvent) -> None:
        raw = event.raw
        match event.model:
            case SessionUpdateEvent():
                await self._update_session(raw["session"])
            case InputAudioBufferAppendEvent(audio=audio):
                await self._append(audio)
            case InputAudioBufferCommitEvent():
                if not self.input.pcm:
                    raise EventError("the input audio buffer is empty", "input_audio_buffer_commit_empty")
                self.input.turn_end.drop_turn_end()
                await self._commit(new_id("item"))
            case InputAudioBufferClearEvent():
                self.input.turn_end.drop_turn_end()
                self.input.clear()
                await self.emit("input_audio_buffer.cleared")
            case ConversationItemCreateEvent():
                await self._create_item(raw["item"], raw.get("previous_item_id"))
            case ConversationItemDeleteEvent(item_id=item_id):
                if not self.conversation.delete(item_id):
                    raise EventError(f"no item with id '{item_id}'", "item_not_found", param="item_id")
                await self.emit("conversation.item.deleted", item_id=item_id)
            case ConversationItemRetrieveEvent(item_id=item_id):
                await self.emit("conversation.item.retrieved", item=self.core.item(item_id).wire)
            case ConversationItemTruncateEvent():
                await self._truncate(event.model)
            case ResponseCreateEvent():
                await self._start_response(raw.get("response") or {})
            case ResponseCancelEvent(response_id=response_id):
                current = self.core.current
                if self.core.task is None:
                    raise EventError("there is no response to cancel", "response_cancel_not_active")
                if response_id is not None and current is not None and response_id != current.id:
                    raise EventError(f"response '{response_id}' is not the one running", "response_not_found", param="response_id")
                await self._cancel_response("client_cancelled")

    # ---- session -------------------------------------------------------------------------

    def _session_object(self) -> dict:
        return {**self.settings.values, "object": "realtime.session", "id": self.id, "expires_at": self.expires_at}

    async def _update_session(self, session: dict) -> None:
        if self.served:
            session = await with_served_voice(self.engine, session, "session.audio.output.voice")
        detection = ((session.get("audio") or {}).get("input") or {}).get("turn_detection")
        if isinstance(detection, dict) and detection.get("type") == Detection.SEMANTIC_VAD:
            await _smart_turn_ready(self.input.turn_end.models)
        if self.settings.update(session):
            self.input.turn_end.detect_turns(self.settings.turn_detection)
        await self.emit("session.updated", session=self._session_object())

    # ---- input audio ---------------------------------------------------------------------

    async def _append(self, audio: str) -> None:
        await self._turns(await self.input.append(audio))

    async def _turns(self, turns: list[TurnEvent]) -> None:
        """What turn detection heard: in an append, or decided later (`InputBuffer`)."""
        detection = self.settings.turn_detection
        for turn in turns:
            if turn.kind == "started":
                self.input.drop_before(turn.ms)
                self._speech_item_id = new_id("item")
                await self.emit("input_audio_buffer.speech_started", audio_start_ms=turn.ms, item_id=self._speech_item_id)
                if detection and detection["interrupt_response"] and self.core.task is not None:
                    await self._cancel_response("turn_detected")
            else:
                item_id = self._speech_item_id or new_id("item")
                self._speech_item_id = None
                await self.emit("input_audio_buffer.speech_stopped", audio_end_ms=turn.ms, item_id=item_id)
                if self.input.pcm:
                    await self._commit(item_id)
                    if detection and detection["create_response"]:
                        await self._start_response({}, replaces_because="turn_detected")
        self.input.settle()

    async def _commit(self, item_id: str) -> None:
        item, samples = await self.core.commit_turn(self.input, item_id)
        previous = self.conversation.insert(item)
        await self.emit("input_audio_buffer.committed", item_id=item_id, previous_item_id=previous)
        await self._announce_item(item.wire, previous)
        if item.transcript is not None:
            await self._transcribed(item, item.transcript, len(samples) / SPEECH_RATE)

    async def _heard(self, item: Item, transcript: str) -> None:
        """The engine heard a user item's audio: keep the words, drop the audio."""
        await self._transcribed(item, transcript, self.core.heard(item, transcript))

    async def _transcribed(self, item: Item, transcript: str, seconds: float) -> None:
        await self.emit("conversation.item.input_audio_transcription.completed", item_id=item.id,
                        content_index=0, transcript=transcript, usage={"type": "duration", "seconds": seconds})

    # ---- conversation items --------------------------------------------------------------

    async def _announce_item(self, wire: dict, previous: str | None) -> None:
        for kind in ("conversation.item.added", "conversation.item.done"):
            await self.emit(kind, item=wire, previous_item_id=previous)

    async def _create_item(self, item: dict, previous_item_id: str | None) -> None:
        wire = copy.deepcopy(item)
        if wire.get("type") != "message":
            raise EventError(f"only message items are supported, not '{wire.get('type')}'", "unsupported_item_type", param="item.type")
        audio = None
        for part in wire.get("content", []):
            if part.get("type") == "input_audio" and part.get("audio"):
                data = await asyncio.to_thread(decode_pcm16, part.pop("audio"), "item.content.audio")
                audio = await asyncio.to_thread(pcm16_to_float, data)
                part.setdefault("transcript", None)
        previous = self.core.insert_created(wire, previous_item_id, audio)
        await self._announce_item(wire, previous)

    async def _truncate(self, event: ConversationItemTruncateEvent) -> None:
        item = self.core.item(event.item_id)
        if item.role != "assistant" or not item.audio_samples:
            raise EventError("only an assistant item with audio can be truncated", "invalid_value", param="item_id")
        index, end_ms = event.content_index, event.audio_end_ms
        if not 0 <= index < len(item.wire["content"]):
            raise EventError(f"content_index {index} is out of range", "invalid_value", param="content_index")
        if end_ms < 0 or end_ms > item.audio_ms:
            raise EventError(f"audio_end_ms {end_ms} is beyond the item's {item.audio_ms} ms of audio", "invalid_value", param="audio_end_ms")
        item.truncate(index, end_ms)
        await self.emit("conversation.item.truncated", item_id=item.id, content_index=index, audio_end_ms=end_ms)

    # ---- responses -----------------------------------------------------------------------

    async def _start_response(self, options: dict, replaces_because: str = "client_cancelled") -> None:
        await self._cancel_response(replaces_because)
        await self.core.start(Response(self.engine, self.conversation, self.settings, options, self.emit, self._heard,
                                       scheduler=self.scheduler))

    async def _cancel_response(self, reason: str) -> None:
        await self.core.cancel(reason)


async def _smart_turn_ready(models: TurnModels) -> None:
    """semantic_vad needs the Smart Turn model: loaded now (once per process), or refused."""
    try:
        await asyncio.to_thread(models.smart_turn.load)
    except OmniError as exc:
        raise EventError(f"semantic_vad is not available: {exc}", "unsupported_feature",
                         param="session.audio.input.turn_detection.type") from None


async def _parse(text: str) -> ClientEvent:
    """A client event, parsed on the loop when small and in a worker thread when large (audio)."""
    return parse(text) if len(text) <= _PARSE_INLINE_CHARS else await asyncio.to_thread(parse, text)
