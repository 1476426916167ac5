"""vLLM-Omni's turn-based `/v1/realtime` handler (PR 8339, `realtime/connection.py` on its main
branch) as its wire shows it, with any omni `Engine` behind it: a stand-in for a server that needs a
GPU, written from that file's semantics.

What a client meets there and nowhere in omni's own server:
- `session.updated` never carries `turn_detection`: server VAD is dropped from the update (there is
  no server VAD), so the client must commit and send `response.create` itself;
- no `conversation.item.input_audio_transcription.*` (transcription is dropped too);
- a model it does not serve (`?model=`) gets an `error` event, then the socket closes with 1008.
"""

import asyncio
import base64
import contextlib
import copy
import itertools
import json
import threading
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.formats import AudioFormat, encode
from omnicli.audio.pcm import float_to_pcm16, pcm16_to_float, resample
from omnicli.engine.base import AudioDelta, AudioPart, ChatDone, ChatRequest, Engine, Message, TextDelta, TextPart

SERVED_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


class VllmTurnBasedShape:
    """One instance per server; `handler` serves each connection; `received` holds every client
    event (audio replaced by its byte count) in order, per connection."""

    def __init__(self, engine: Engine, model: str = SERVED_MODEL) -> None:
        self.engine = engine
        self.model = model
        self.received: list[list[dict]] = []

    async def handler(self, ws) -> None:
        asked = parse_qs(urlsplit(ws.request.path).query).get("model", [None])[0]
        if asked is not None and asked != self.model:
            await self._error(ws, f"The model `{asked}` does not exist.", "model_not_found")
            await ws.close(1008, "unknown model")
            return
        await _Connection(self, ws).run()

    @staticmethod
    async def _error(ws, message: str, code: str, kind: str = "invalid_request_error") -> None:
        await ws.send(json.dumps({"event_id": _id("evt"), "type": "error", "error": {
            "type": kind, "code": code, "message": message, "param": None, "event_id": None}}))


class _Connection:
    def __init__(self, shape: VllmTurnBasedShape, ws) -> None:
        self.shape, self.ws = shape, ws
        self.log: list[dict] = []
        shape.received.append(self.log)
        self.config: dict = {"model": shape.model, "instructions": "", "output_modalities": ["audio"],
                             "audio": {"input": {"format": {"type": "audio/pcm", "rate": SPEECH_RATE}},
                                       "output": {"format": {"type": "audio/pcm", "rate": SPEECH_RATE}}}}
        self.buffer = bytearray()
        self.history: list[Message] = []
        self.response: asyncio.Task | None = None

    async def send(self, kind: str, **fields) -> None:
        await self.ws.send(json.dumps({"event_id": _id("evt"), "type": kind, **fields}))

    def session(self) -> dict:
        return {**self.config, "object": "realtime.session", "id": "sess_1", "expires_at": 0}

    async def run(self) -> None:
        await self.send("session.created", session=self.session())
        await self.send("conversation.created", conversation={"id": "conv_1", "object": "realtime.conversation"})
        try:
            async for message in self.ws:
                event = json.loads(message)
                self.log.append({**event, "audio": len(event["audio"])} if "audio" in event else event)
                await self.dispatch(event)
        finally:
            if self.response is not None:
                self.response.cancel()

    async def dispatch(self, event: dict) -> None:
        match event.get("type"):
            case "session.update":
                await self.session_update(event.get("session") or {})
            case "input_audio_buffer.append":
                self.buffer.extend(base64.b64decode(event.get("audio") or ""))
            case "input_audio_buffer.commit":
                await self.commit()
            case "input_audio_buffer.clear":
                self.buffer.clear()
                await self.send("input_audio_buffer.cleared")
            case "response.create":
                if self.response is not None and not self.response.done():
                    self.response.cancel()
                response_id = _id("resp")
                await self.send("response.created", response={"id": response_id, "object": "realtime.response",
                                                              "status": "in_progress", "output": []})
                self.response = asyncio.create_task(self.answer(response_id))
            case "response.cancel":
                if self.response is not None:
                    self.response.cancel()
            case "conversation.item.truncate":
                await self.send("conversation.item.truncated", item_id=event.get("item_id"),
                                content_index=event.get("content_index", 0), audio_end_ms=event.get("audio_end_ms"))
            case other:
                await VllmTurnBasedShape._error(self.ws, f"Unknown event type: {other}", "invalid_event")

    async def session_update(self, update: dict) -> None:
        """Unsupported fields are dropped, not refused: server or semantic VAD among them."""
        update = copy.deepcopy(update)
        audio_in = ((update.get("audio") or {}).get("input") or {})
        for audio in ((update.get("audio") or {}).get("input"), (update.get("audio") or {}).get("output")):
            rate = ((audio or {}).get("format") or {}).get("rate", SPEECH_RATE)
            if rate != SPEECH_RATE:
                await VllmTurnBasedShape._error(self.ws, "Only 24 kHz PCM16 audio is supported",
                                                "unsupported_audio_format")
                return
        audio_in.pop("turn_detection", None)
        audio_in.pop("transcription", None)
        for key in ("instructions", "output_modalities"):
            if key in update:
                self.config[key] = update[key]
        voice = ((update.get("audio") or {}).get("output") or {}).get("voice")
        if voice:
            self.config["audio"]["output"]["voice"] = voice
        await self.send("session.updated", session=self.session())

    async def commit(self) -> None:
        if not self.buffer:
            await VllmTurnBasedShape._error(self.ws, "Input audio buffer is empty", "invalid_request_error")
            return
        wav = encode(pcm16_to_float(bytes(self.buffer)), SPEECH_RATE, AudioFormat.WAV)
        self.buffer.clear()
        self.history.append(Message("user", [AudioPart(wav, "wav")]))
        item = {"id": _id("item"), "type": "message", "role": "user", "status": "completed", "content": []}
        await self.send("input_audio_buffer.committed", item_id=item["id"], previous_item_id=None)
        for kind in ("conversation.item.added", "conversation.item.done"):
            await self.send(kind, previous_item_id=None, item=item)

    async def answer(self, response_id: str) -> None:
        item_id = _id("item")
        where = {"response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0}
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        await self.send("response.output_item.added", response_id=response_id, output_index=0, item=item)
        await self.send("response.content_part.added", **where, part={"type": "audio", "transcript": ""})
        system = [Message("system", [TextPart(self.config["instructions"])])] if self.config["instructions"] else []
        request = ChatRequest(messages=system + self.history, modalities=("text", "audio"),
                              voice=self.config["audio"]["output"].get("voice"))
        transcript, status = "", "completed"
        try:
            async for delta in self.shape.engine.chat(request):
                if isinstance(delta, TextDelta) and delta.text:
                    transcript += delta.text
                    await self.send("response.output_audio_transcript.delta", **where, delta=delta.text)
                elif isinstance(delta, AudioDelta):
                    samples = resample(np.asarray(delta.chunk.samples, np.float32), delta.chunk.rate, SPEECH_RATE)
                    pcm = base64.b64encode(float_to_pcm16(samples)).decode()
                    await self.send("response.output_audio.delta", **where, delta=pcm)
                elif isinstance(delta, ChatDone):
                    transcript = delta.text or transcript
        except asyncio.CancelledError:
            status = "cancelled"
        await self.send("response.output_audio.done", **where)
        await self.send("response.output_audio_transcript.done", **where, transcript=transcript)
        await self.send("response.content_part.done", **where, part={"type": "audio", "transcript": transcript})
        done_item = {**item, "status": "completed" if status == "completed" else "incomplete",
                     "content": [{"type": "output_audio", "transcript": transcript}]}
        await self.send("response.output_item.done", response_id=response_id, output_index=0, item=done_item)
        self.history.append(Message("assistant", [TextPart(transcript)]))
        await self.send("response.done", response={"id": response_id, "object": "realtime.response",
                                                   "status": status, "output": [done_item]})


@contextlib.contextmanager
def served(handler) -> Iterator[str]:
    """A websockets server on a free loopback port, in its own thread and event loop, for as long
    as the `with` lasts; yields its http:// URL."""
    from websockets.asyncio.server import serve

    ready, state = threading.Event(), {}

    def run() -> None:
        async def main() -> None:
            async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
                state["port"] = server.sockets[0].getsockname()[1]
                state["stop"] = stop = asyncio.Event()
                state["loop"] = asyncio.get_running_loop()
                ready.set()
                await stop.wait()

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the test WebSocket server did not start")
    try:
        yield f"http://127.0.0.1:{state['port']}"
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(10)
