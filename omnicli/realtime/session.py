"""One OpenAI Realtime (GA) session, transport-agnostic: JSON events in, JSON events out.

`omni serve` runs it behind a WebSocket; `omni talk` without a server talks to it in memory.
Semantics follow vLLM-Omni's turn-based handler: bad events get an `error` event and the session
lives on; unsupported session fields are dropped; only 24 kHz PCM16 audio is accepted; a new
`response.create` cancels the running response; history lives here. Beyond it: server VAD
(Silero) commits turns, answers, and interrupts a response when the user speaks.
"""

import asyncio
import base64
import binascii
import copy
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable

import numpy as np

from omnicli.audio.pcm import float_to_pcm16, pcm16_to_float
from omnicli.engine.base import AudioDelta, ChatDone, ChatRequest, TextDelta, TranscriptDelta
from omnicli.errors import OmniError
from omnicli.realtime.conversation import RATE, Conversation, Item, heard_text, new_id

log = logging.getLogger("omni")

MAX_APPEND_BYTES = 15 * 1024 * 1024
MAX_BUFFER_BYTES = 64 * 1024 * 1024
DEFAULT_INSTRUCTIONS = "You are a friendly voice assistant. Answer in one or two short sentences."
DEFAULT_MAX_TOKENS = 200
REALTIME_TEMPERATURE = 0.0  # greedy: small embedded models drift (into French, into lists) when hotter
SERVER_VAD_DEFAULTS = {
    "type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 500,
    "create_response": True, "interrupt_response": True,
}

Send = Callable[[dict], Awaitable[None]]


class EventError(Exception):
    """A client event that cannot be carried out: becomes an `error` event, the session goes on."""

    def __init__(self, message: str, code: str = "invalid_request_error", param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


def _pcm_format_ok(fmt) -> bool:
    if fmt is None:
        return True
    if isinstance(fmt, str):
        return fmt in ("pcm16", "audio/pcm")
    return fmt.get("type") in ("audio/pcm", "pcm16") and fmt.get("rate", RATE) == RATE


@functools.cache
def _client_events():
    """The schema of every client event; built once (building it costs ~100 ms)."""
    from openai.types.realtime import RealtimeClientEvent
    from pydantic import TypeAdapter

    return TypeAdapter(RealtimeClientEvent)


def _check_formats(session) -> None:
    audio = (session or {}).get("audio") if isinstance(session, dict) else None
    for side in ("input", "output"):
        fmt = ((audio or {}).get(side) or {}).get("format") if isinstance(audio, dict) else None
        if not _pcm_format_ok(fmt):
            raise EventError("only 24 kHz mono PCM16 audio is supported (audio/pcm, rate 24000)",
                             "unsupported_audio_format", param=f"session.audio.{side}.format")


def _merge(base: dict, update: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class RealtimeSession:
    def __init__(self, engine, send: Send, *, model_id: str = "omni-embedded") -> None:
        self.engine = engine
        self._send = send
        self._send_lock = asyncio.Lock()
        self.id = new_id("sess")
        self.model_id = model_id
        self.expires_at = int(time.time()) + 3600
        self.conversation = Conversation()
        self.config = {
            "type": "realtime",
            "model": model_id,
            "output_modalities": ["audio"],
            "instructions": DEFAULT_INSTRUCTIONS,
            "max_output_tokens": "inf",
            "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": RATE}, "turn_detection": None},
                "output": {"format": {"type": "audio/pcm", "rate": RATE}, "voice": "joe", "speed": 1.0},
            },
        }
        self.buffer = bytearray()
        self._buffer_start_ms = 0
        self._heard_ms = 0
        self._detector = None
        self._speech_item_id: str | None = None
        self._response: asyncio.Task | None = None
        self._closed = False
        self._early = None
        if hasattr(engine, "transcribe"):
            from omnicli.realtime.early_asr import EarlyTranscriber

            self._early = EarlyTranscriber(engine)

    # ---- transport side ------------------------------------------------------------------

    async def start(self) -> None:
        await self.emit("session.created", session=self._session_object())
        await self.emit("conversation.created", conversation={"id": self.conversation.id, "object": "realtime.conversation"})

    async def handle(self, text: str) -> None:
        """Carry out one client event (a JSON text); every failure becomes an `error` event."""
        event_id = None
        try:
            event = self._parse(text)
            event_id = event.get("event_id")
            await self._dispatch(event)
        except EventError as exc:
            await self.error(str(exc), exc.code, event_id=event_id, param=exc.param)
        except Exception as exc:  # noqa: BLE001 - the session must outlive any one event
            log.exception("realtime: event failed")
            await self.error(f"internal error: {exc}", "server_error", event_id=event_id, kind="server_error")

    async def close(self) -> None:
        self._closed = True
        if self._early is not None:
            self._early.reset()
        await self._cancel_response("client_cancelled")

    async def emit(self, kind: str, **fields) -> None:
        if self._closed and kind != "error":
            return
        payload = {"type": kind, "event_id": new_id("event"), **fields}
        async with self._send_lock:
            await self._send(payload)

    async def error(self, message: str, code: str, *, event_id=None, param=None, kind="invalid_request_error") -> None:
        await self.emit("error", error={"type": kind, "code": code, "message": message, "param": param, "event_id": event_id})

    # ---- parsing and dispatch ------------------------------------------------------------

    @staticmethod
    def _parse(text: str) -> dict:
        from pydantic import ValidationError

        try:
            raw = json.loads(text)
        except (ValueError, TypeError):
            raise EventError("the event is not valid JSON", "invalid_json") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise EventError("an event is a JSON object with a string 'type'", "invalid_event")
        if raw["type"] not in _HANDLERS:
            raise EventError(f"unknown event type '{raw['type']}'", "unknown_event", param="type")
        if raw["type"] == "session.update":
            _check_formats(raw.get("session"))  # before the schema, which knows only 24 kHz
        try:
            _client_events().validate_python(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"][1:] if not str(p).startswith(("Realtime", "Conversation")))
            raise EventError(f"invalid {raw['type']}: {where}: {first['msg']}", "invalid_event", param=where or None) from None
        return raw

    async def _dispatch(self, event: dict) -> None:
        await getattr(self, _HANDLERS[event["type"]])(event)

    # ---- session -------------------------------------------------------------------------

    def _session_object(self) -> dict:
        return {**self.config, "object": "realtime.session", "id": self.id, "expires_at": self.expires_at}

    async def on_session_update(self, event: dict) -> None:
        update = copy.deepcopy(event["session"])
        update.pop("type", None)
        update.pop("model", None)
        for unsupported in ("tools", "tool_choice", "tracing", "prompt", "include", "truncation", "reasoning", "parallel_tool_calls"):
            update.pop(unsupported, None)
        audio = update.get("audio") or {}
        audio_in = audio.get("input") or {}
        for dropped in ("transcription", "noise_reduction"):
            audio_in.pop(dropped, None)
        if "turn_detection" in audio_in:
            detection = audio_in["turn_detection"]
            if detection:
                detection = {**SERVER_VAD_DEFAULTS, **{k: v for k, v in detection.items() if k in SERVER_VAD_DEFAULTS}, "type": "server_vad"}
            audio_in["turn_detection"] = detection or None
            self._detector = None
        modalities = update.get("output_modalities")
        if modalities is not None and modalities not in (["audio"], ["text"]):
            raise EventError("output_modalities must be ['audio'] or ['text']", "invalid_value", param="output_modalities")
        self.config = _merge(self.config, update)
        await self.emit("session.updated", session=self._session_object())

    # ---- input audio ---------------------------------------------------------------------

    def _turn_detection(self) -> dict | None:
        return self.config["audio"]["input"].get("turn_detection")

    async def on_input_audio_buffer_append(self, event: dict) -> None:
        audio = event["audio"]
        if len(audio) > 4 * ((MAX_APPEND_BYTES + 2) // 3):
            raise EventError("one append may carry at most 15 MiB of audio", "audio_too_large")
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise EventError("audio is not valid base64", "invalid_base64", param="audio") from None
        if len(data) % 2:
            raise EventError("PCM16 audio must hold whole 2-byte samples", "invalid_audio", param="audio")
        if len(self.buffer) + len(data) > MAX_BUFFER_BYTES:
            raise EventError("the input audio buffer may hold at most 64 MiB; commit or clear it", "buffer_full")
        self.buffer.extend(data)
        samples = pcm16_to_float(data)
        if self._early is not None:
            self._early.hear(samples, self.buffer)
        detection = self._turn_detection()
        if detection:
            await self._detect_turns(detection, samples)

    async def _detect_turns(self, detection: dict, samples: np.ndarray) -> None:
        from omnicli.audio.vad import TurnDetector

        if self._detector is None:
            self._detector = TurnDetector(
                RATE, threshold=detection["threshold"], silence_ms=detection["silence_duration_ms"],
                prefix_padding_ms=detection["prefix_padding_ms"],
            )
            self._heard_ms = 0
            self._buffer_start_ms = 0
        events = await asyncio.to_thread(self._detector.feed, samples)
        self._heard_ms += len(samples) * 1000 // RATE
        for turn in events:
            if turn.kind == "started":
                self._drop_buffer_before(turn.ms)
                self._speech_item_id = new_id("item")
                await self.emit("input_audio_buffer.speech_started", audio_start_ms=turn.ms, item_id=self._speech_item_id)
                if detection["interrupt_response"] and self._response is not None:
                    await self._cancel_response("turn_detected")
            else:
                item_id = self._speech_item_id or new_id("item")
                self._speech_item_id = None
                await self.emit("input_audio_buffer.speech_stopped", audio_end_ms=turn.ms, item_id=item_id)
                if self.buffer:
                    await self._commit(item_id)
                    if detection["create_response"]:
                        await self._start_response({}, replaces_because="turn_detected")
        if not self._detector.speaking:
            # Between turns keep only what a coming turn's padding could need.
            self._drop_buffer_before(self._heard_ms - detection["prefix_padding_ms"] - 200)

    def _drop_buffer_before(self, ms: int) -> None:
        cut = max(0, (ms - self._buffer_start_ms) * RATE // 1000 * 2)
        if cut:
            del self.buffer[:cut]
            self._buffer_start_ms += cut // 2 * 1000 // RATE

    async def on_input_audio_buffer_commit(self, event: dict) -> None:
        if not self.buffer:
            raise EventError("the input audio buffer is empty", "input_audio_buffer_commit_empty")
        await self._commit(new_id("item"))

    async def _commit(self, item_id: str) -> None:
        pcm = bytes(self.buffer)
        samples = pcm16_to_float(pcm)
        self._buffer_start_ms += len(samples) * 1000 // RATE
        self.buffer.clear()
        heard = await self._early.take(pcm) if self._early is not None else None
        wire = {"id": item_id, "type": "message", "object": "realtime.item", "role": "user", "status": "completed",
                "content": [{"type": "input_audio", "transcript": heard}]}
        item = Item(wire, audio=samples if heard is None else None, transcript=heard)
        previous = self.conversation.insert(item)
        await self.emit("input_audio_buffer.committed", item_id=item_id, previous_item_id=previous)
        await self._announce_item(wire, previous)
        if heard is not None:
            await self._heard(item, heard, len(samples) / RATE)

    async def _heard(self, item: Item, transcript: str, seconds: float) -> None:
        await self.emit("conversation.item.input_audio_transcription.completed", item_id=item.id,
                        content_index=0, transcript=transcript, usage={"type": "duration", "seconds": seconds})

    async def on_input_audio_buffer_clear(self, event: dict) -> None:
        self._buffer_start_ms += len(self.buffer) // 2 * 1000 // RATE
        self.buffer.clear()
        if self._early is not None:
            self._early.reset()
        await self.emit("input_audio_buffer.cleared")

    # ---- conversation items --------------------------------------------------------------

    async def _announce_item(self, wire: dict, previous: str | None) -> None:
        for kind in ("conversation.item.added", "conversation.item.done"):
            await self.emit(kind, item=wire, previous_item_id=previous)

    async def on_conversation_item_create(self, event: dict) -> None:
        wire = copy.deepcopy(event["item"])
        if wire.get("type") != "message":
            raise EventError(f"only message items are supported, not '{wire.get('type')}'", "unsupported_item_type", param="item.type")
        wire.setdefault("id", new_id("item"))
        wire["object"], wire["status"] = "realtime.item", "completed"
        if self.conversation.find(wire["id"]):
            raise EventError(f"an item with id '{wire['id']}' already exists", "item_exists", param="item.id")
        audio = None
        for part in wire.get("content", []):
            if part.get("type") == "input_audio" and part.get("audio"):
                try:
                    data = base64.b64decode(part.pop("audio"), validate=True)
                except (binascii.Error, ValueError):
                    raise EventError("input_audio.audio is not valid base64", "invalid_base64") from None
                if len(data) % 2:
                    raise EventError("PCM16 audio must hold whole 2-byte samples", "invalid_audio")
                audio = pcm16_to_float(data)
                part.setdefault("transcript", None)
        try:
            previous = self.conversation.insert(Item(wire, audio=audio), event.get("previous_item_id"))
        except KeyError:
            raise EventError(f"previous_item_id '{event['previous_item_id']}' is not in the conversation", "item_not_found") from None
        await self._announce_item(wire, previous)

    async def on_conversation_item_delete(self, event: dict) -> None:
        if not self.conversation.delete(event["item_id"]):
            raise EventError(f"no item with id '{event['item_id']}'", "item_not_found", param="item_id")
        await self.emit("conversation.item.deleted", item_id=event["item_id"])

    async def on_conversation_item_retrieve(self, event: dict) -> None:
        item = self.conversation.find(event["item_id"])
        if item is None:
            raise EventError(f"no item with id '{event['item_id']}'", "item_not_found", param="item_id")
        await self.emit("conversation.item.retrieved", item=item.wire)

    async def on_conversation_item_truncate(self, event: dict) -> None:
        item = self.conversation.find(event["item_id"])
        if item is None:
            raise EventError(f"no item with id '{event['item_id']}'", "item_not_found", param="item_id")
        if item.role != "assistant" or not item.audio_samples:
            raise EventError("only an assistant item with audio can be truncated", "invalid_value", param="item_id")
        index, end_ms = event["content_index"], event["audio_end_ms"]
        if not 0 <= index < len(item.wire["content"]):
            raise EventError(f"content_index {index} is out of range", "invalid_value", param="content_index")
        if end_ms < 0 or end_ms > item.audio_ms:
            raise EventError(f"audio_end_ms {end_ms} is beyond the item's {item.audio_ms} ms of audio", "invalid_value", param="audio_end_ms")
        item.wire["content"][index]["transcript"] = heard_text(item, end_ms)
        item.audio_samples = end_ms * RATE // 1000
        item.spoken = [(end, text) for end, text in item.spoken if end <= item.audio_samples]
        await self.emit("conversation.item.truncated", item_id=item.id, content_index=index, audio_end_ms=end_ms)

    # ---- responses -----------------------------------------------------------------------

    async def on_response_create(self, event: dict) -> None:
        options = event.get("response") or {}
        if options.get("conversation") == "none" or options.get("input") is not None:
            raise EventError("out-of-band responses are not supported", "unsupported_feature", param="response")
        await self._start_response(options)

    async def on_response_cancel(self, event: dict) -> None:
        if self._response is None:
            raise EventError("there is no response to cancel", "response_cancel_not_active")
        await self._cancel_response("client_cancelled")

    async def _start_response(self, options: dict, replaces_because: str = "client_cancelled") -> None:
        await self._cancel_response(replaces_because)
        self._response = asyncio.create_task(self._respond(options))

    async def _cancel_response(self, reason: str) -> None:
        """Cancel the running response; its `response.done` says `cancelled` and why."""
        task, self._response = self._response, None
        if task is not None and not task.done():
            task.cancel(reason)
            await asyncio.gather(task, return_exceptions=True)

    async def _respond(self, options: dict) -> None:
        modalities = options.get("output_modalities") or self.config["output_modalities"]
        speaks = "audio" in modalities
        limit = options.get("max_output_tokens") or self.config["max_output_tokens"]
        max_tokens = DEFAULT_MAX_TOKENS if limit == "inf" else int(limit)
        output_audio = self.config["audio"]["output"]
        response = {"id": new_id("resp"), "object": "realtime.response", "status": "in_progress", "output": [],
                    "conversation_id": self.conversation.id, "output_modalities": list(modalities),
                    "max_output_tokens": limit, "status_details": None, "usage": None}
        instructions = options.get("instructions") or self.config["instructions"]
        messages = self.conversation.messages(instructions)
        unheard = [item for item in self.conversation.items if item.role == "user" and item.transcript is None and item.audio is not None]
        await self.emit("response.created", response=dict(response))

        part_kind = "output_audio" if speaks else "output_text"
        wire = {"id": new_id("item"), "type": "message", "object": "realtime.item", "role": "assistant",
                "status": "in_progress", "content": []}
        item = Item(wire)
        previous = self.conversation.insert(item)
        ids = {"response_id": response["id"], "item_id": wire["id"], "output_index": 0}
        await self.emit("conversation.item.added", item=copy.deepcopy(wire), previous_item_id=previous)
        await self.emit("response.output_item.added", response_id=response["id"], output_index=0, item=copy.deepcopy(wire))
        part = {"type": part_kind, "transcript": ""} if speaks else {"type": part_kind, "text": ""}
        # Content-part events name the part 'audio'/'text'; the item's content says output_*.
        await self.emit("response.content_part.added", **ids, content_index=0, part=_part_event(part))
        wire["content"] = [part]

        request = ChatRequest(messages, modalities=("text", "audio") if speaks else ("text",),
                              voice=output_audio.get("voice"), speed=float(output_audio.get("speed") or 1.0),
                              max_tokens=max_tokens, temperature=REALTIME_TEMPERATURE)
        text, usage, status, details = [], {}, "completed", None
        try:
            async for delta in self.engine.chat(request):
                match delta:
                    case TranscriptDelta(text=heard) if unheard:
                        user = unheard.pop(0)
                        user.transcript = heard
                        user.wire["content"][0]["transcript"] = heard
                        await self._heard(user, heard, len(user.audio) / RATE)
                        user.audio = None
                    case TextDelta(text=piece):
                        text.append(piece)
                        kind = "response.output_audio_transcript.delta" if speaks else "response.output_text.delta"
                        await self.emit(kind, **ids, content_index=0, delta=piece)
                    case AudioDelta(chunk=chunk):
                        item.audio_samples += len(chunk.samples)
                        item.spoken.append((item.audio_samples, chunk.text or ""))
                        delta_b64 = base64.b64encode(float_to_pcm16(chunk.samples)).decode()
                        await self.emit("response.output_audio.delta", **ids, content_index=0, delta=delta_b64)
                    case ChatDone():
                        usage = delta.usage
        except asyncio.CancelledError as exc:
            status = "cancelled"
            details = {"type": "cancelled", "reason": exc.args[0] if exc.args else "client_cancelled"}
        except OmniError as exc:
            status = "failed"
            details = {"type": "failed", "error": {"type": "server_error", "code": "engine_error", "message": str(exc)}}
            await self.error(str(exc), "engine_error", kind="server_error")
        finally:
            if self._response is asyncio.current_task():
                self._response = None

        transcript = "".join(text)
        if speaks:
            part["transcript"] = transcript
            if status == "completed":
                await self.emit("response.output_audio.done", **ids, content_index=0)
                await self.emit("response.output_audio_transcript.done", **ids, content_index=0, transcript=transcript)
        else:
            part["text"] = transcript
            if status == "completed":
                await self.emit("response.output_text.done", **ids, content_index=0, text=transcript)
        wire["status"] = "completed" if status == "completed" else "incomplete"
        await self.emit("response.content_part.done", **ids, content_index=0, part=_part_event(part))
        await self.emit("response.output_item.done", response_id=response["id"], output_index=0, item=copy.deepcopy(wire))
        await self.emit("conversation.item.done", item=copy.deepcopy(wire), previous_item_id=previous)
        response.update(status=status, status_details=details, output=[copy.deepcopy(wire)], usage={
            "input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
        })
        await self.emit("response.done", response=response)


def _part_event(part: dict) -> dict:
    return {**part, "type": "audio" if part["type"] == "output_audio" else "text"}


_HANDLERS = {
    "session.update": "on_session_update",
    "input_audio_buffer.append": "on_input_audio_buffer_append",
    "input_audio_buffer.commit": "on_input_audio_buffer_commit",
    "input_audio_buffer.clear": "on_input_audio_buffer_clear",
    "conversation.item.create": "on_conversation_item_create",
    "conversation.item.delete": "on_conversation_item_delete",
    "conversation.item.retrieve": "on_conversation_item_retrieve",
    "conversation.item.truncate": "on_conversation_item_truncate",
    "response.create": "on_response_create",
    "response.cancel": "on_response_cancel",
}
