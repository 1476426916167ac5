"""vLLM-Omni's duplex lane (`/v1/realtime?duplex=1`) as MiniCPM-o 4.5 serves it, seen from the
wire: a stand-in for a server that needs a GPU, written from the contract's semantics
(vLLM-Omni's docs/serving/realtime_duplex_api.md), for `omni talk --duplex`'s tests.

What a client meets there:
- the session opens with `session.update` (16 kHz PCM16 in); one without `ref_audio` is refused in
  the flat handshake shape (`{type: "error", error: "...", code: "ref_audio_required"}`);
- the native lane: a commit with speech in it is answered (`response.created`, `response.speak`,
  then one transcript delta per audio delta, `response.done`); a commit of silence gets
  `response.listen`;
- speech over an answer: with `supports_barge_in` the server cancels the answer itself
  (`overlap.decision` barge_in, `output_audio_buffer.cleared`, `response.done` cancelled);
  without it the overlap is only reported (`overlap.decision` listen) and the answer goes on;
- every server event carries `server_event_seq`; a dropped socket is resumed with
  `session.resume` and the journal replayed; `session.replaced`, `session.expired`,
  `session.resync_required` and `session.close` -> `session.closed` end a session.

Test knobs: `drop_after_deltas` (kill the socket mid-answer, once), `replay_extra` (replay a few
events the client already has, as a server replaying from its ack cursor would), `hold` (an
answer that stops after that many deltas until cancelled), `finale` (a session-ending event sent
after the first answer), `idle_timeout_s` (the lease), `greet` (autostart: a socket without
`autostart=0` gets a default session and its `session.created` at once), `needs_ref_audio`,
`audible` (a tone instead of the level-coded deltas, for real devices), `forget_on_drop` (the
dropped session is gone: its resume is refused), `tool_call` ((name, arguments): the first answer
is a call of that tool, as Nemotron VoiceChat makes one, and the spoken answer follows the call's
`function_call_output`; arguments without a name come as the raw malformed-call event, then the answer),
`turn_based` (vLLM-Omni's turn-based tier, as its Qwen3-Omni duplex plugin serves it: a session
asking for `extra_body.auto_response` is refused with `invalid_duplex_runtime_config` in the nested
error shape, and a commit is answered only when it asks, `response_create: true`), `text_only`
(the answer's transcript deltas without its audio), `lose_first_commit` (the socket dies with the
first commit, which the server never heard), `resumable` (`supports_session_resume`), `truncates`
(`supports_audio_truncate`, by default as `supports_barge_in`).
"""

import asyncio
import base64
import itertools
import json
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import numpy as np

from omnicli.audio.pcm import float_to_pcm16, pcm16_to_float
from omnicli.protocol.duplex import ErrorCode, handshake_error, playback, realtime_error

INPUT_RATE = 16000
OUTPUT_RATE = 24000
MODEL = "openbmb/MiniCPM-o-4_5"
SPEECH_RMS = 0.02
"""An append louder than this is speech (an RMS heuristic, as the server's fallback detector)."""
OVERLAP_MS = 300
"""Speech over an answer for this long is 'meaningful overlap'."""
HEARD = "what time is it"
_tokens = itertools.count(1)


def delta_level(index: int) -> float:
    """Audio delta `index` (0-based) of an answer is a constant at this level, so a test can tell
    from what it played which deltas it got, and in which order."""
    return round(0.01 * (index + 1), 4)


def tone_at(samples: int, index: int) -> np.ndarray:
    """Delta `index` as sound a sink can hear (a 220 Hz tone, continuous across deltas)."""
    t = (np.arange(samples) + index * samples) / OUTPUT_RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@dataclass
class Session:
    id: str
    token: str
    capabilities: dict
    config: dict
    idle_timeout_s: float
    incarnation: int = 0
    generation: int = 1
    seq: int = 0
    journal: list[dict] = field(default_factory=list)
    ws: object = None
    buffer: bytearray = field(default_factory=bytearray)
    speech_ms: float = 0.0
    overlap_ms: float = 0.0
    overlap_reported: bool = False
    response: asyncio.Task | None = None
    response_id: str | None = None
    responses: int = 0
    acks: list[dict] = field(default_factory=list)
    """Every playback.ack, as sent."""
    event_acks: list[int] = field(default_factory=list)
    heartbeats: int = 0
    last_heard: float = 0.0
    closed: bool = False
    history: list[dict] = field(default_factory=list)
    """Assistant turns as stored: `ack_only`, so their audio is what the client said it played."""

    async def emit(self, kind: str, **fields) -> None:
        """Journal the event and send it if a socket is attached (a detached session journals only)."""
        self.seq += 1
        event = {"type": kind, **fields, "server_event_seq": self.seq}
        self.journal.append(event)
        await self.deliver(event)

    async def deliver(self, event: dict) -> None:
        ws = self.ws
        if ws is None:
            return
        try:
            await ws.send(json.dumps(event))  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the socket died under us: the journal keeps it
            if self.ws is ws:
                self.ws = None


class MiniCPMoShape:
    """One instance per server (`handler` serves each connection); `sessions` by id,
    `received` every client event per connection (audio replaced by its byte count)."""

    def __init__(self, *, supports_barge_in: bool = True, answer: str = "It is noon.", deltas: int = 5,
                 delta_ms: int = 200, pace_s: float = 0.02, hold: int | None = None,
                 drop_after_deltas: int | None = None, replay_extra: int = 0, finale: str | None = None,
                 idle_timeout_s: float = 300.0, needs_ref_audio: bool = True, greet: bool = False,
                 audible: bool = False, forget_on_drop: bool = False, chunk_period_ms: int = 1000,
                 tool_call: tuple[str | None, str] | None = None, turn_based: bool = False,
                 text_only: bool = False, lose_first_commit: bool = False, resumable: bool = True,
                 truncates: bool | None = None) -> None:
        self.supports_barge_in = supports_barge_in
        self.resumable = resumable
        self.truncates = supports_barge_in if truncates is None else truncates
        self.answer, self.deltas, self.delta_ms, self.pace_s, self.hold = answer, deltas, delta_ms, pace_s, hold
        self.drop_after_deltas = drop_after_deltas
        self.replay_extra = replay_extra
        self.finale = finale
        self.idle_timeout_s = idle_timeout_s
        self.needs_ref_audio = needs_ref_audio
        self.greet = greet
        self.audible = audible
        self.forget_on_drop = forget_on_drop
        self.chunk_period_ms = chunk_period_ms
        self.tool_call = tool_call
        self.turn_based = turn_based
        self.text_only = text_only
        self.lose_first_commit = lose_first_commit
        self.sessions: dict[str, Session] = {}
        self.received: list[list[dict]] = []
        self.queries: list[dict] = []
        self.drops = 0
        self.replayed: list[int] = []
        """Sequence numbers sent again after a resume, in order."""

    # ---- one connection ---------------------------------------------------------------------

    async def handler(self, ws) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(ws.request.path).query).items()}
        self.queries.append(query)
        log: list[dict] = []
        self.received.append(log)
        session: Session | None = None
        if self.greet and query.get("autostart") != "0":
            session = await self._create(ws, {})  # autostart: a default session before the client says anything
        try:
            async for message in ws:
                event = json.loads(message)
                log.append({k: (len(v) if k == "audio" else v) for k, v in event.items()})
                if session is None:
                    session = await self._open(ws, event)
                    if session is None:
                        return
                    continue
                if session.ws is not ws:
                    return  # replaced: this socket no longer speaks for the session
                session.last_heard = asyncio.get_running_loop().time()
                await self._dispatch(session, event)
                if session.closed:
                    return
        except Exception:  # noqa: BLE001 - a socket killed by a test, or by the client going away
            pass
        finally:
            if session is not None and session.ws is ws:
                session.ws = None

    async def _open(self, ws, event: dict) -> Session | None:
        kind = event.get("type")
        if kind == "session.resume":
            return await self._resume(ws, event)
        if kind != "session.update":
            await self._refuse(ws, ErrorCode.SESSION_NOT_OPEN, "the first event must be session.update or session.resume")
            return None
        config = event.get("session") or {}
        if self.needs_ref_audio and not config.get("ref_audio"):
            await self._refuse(ws, ErrorCode.REF_AUDIO_REQUIRED, "MiniCPM-o needs ref_audio: a clip of the assistant's voice")
            return None
        if self.turn_based and (config.get("extra_body") or {}).get("auto_response"):
            await ws.send(json.dumps(realtime_error("invalid_duplex_runtime_config",
                                                    "Qwen requires server VAD or explicit commits; native auto_response is unsupported")))
            await ws.close()
            return None
        if config.get("input_audio_format", "pcm16") != "pcm16" or config.get("sample_rate_hz", INPUT_RATE) != INPUT_RATE:
            await self._refuse(ws, ErrorCode.UNSUPPORTED_AUDIO_FORMAT, "MiniCPM-o takes 16 kHz pcm16 input")
            return None
        return await self._create(ws, config)

    async def _create(self, ws, config: dict) -> Session:
        level = "turn_based_duplex" if self.turn_based else "model_native_duplex"
        capabilities = {"implementation_level": level, "supports_input_append": True,
                        "supports_barge_in": self.supports_barge_in, "supports_session_resume": self.resumable,
                        "supports_session_lease": True, "supports_audio_truncate": self.truncates,
                        "chunk_period_ms": self.chunk_period_ms, "input_modes": ["append_audio_chunk"]}
        session = Session(f"sess_{next(_tokens):04d}", f"rt_{next(_tokens):04d}", capabilities, config, self.idle_timeout_s)
        session.ws = ws
        session.last_heard = asyncio.get_running_loop().time()
        self.sessions[session.id] = session
        described = {"object": "realtime.session", "id": session.id, "model": MODEL, "state": "open",
                     "epoch": 0, "turn_id": 0, "input_audio_format": "pcm16", "output_audio_format": "pcm16",
                     "overlap_policy": config.get("overlap_policy"),
                     "playback_commit_policy": config.get("playback_commit_policy"),
                     "idle_timeout_s": self.idle_timeout_s, "playback": playback(), "capabilities": capabilities,
                     "extra_body": config.get("extra_body")}
        await session.emit("session.created", incarnation=0, attachment_generation=1, resume_token=session.token,
                           session=described)
        await session.emit("session.updated", session=described)
        asyncio.get_running_loop().create_task(self._lease(session))
        return session

    @staticmethod
    async def _refuse(ws, code: str, message: str) -> None:
        await ws.send(json.dumps(handshake_error(code, message)))
        await ws.close()

    async def _resume(self, ws, event: dict) -> Session | None:
        session = self.sessions.get(event.get("session_id") or "")
        if session is None or session.closed:
            await self._refuse(ws, ErrorCode.RESUME_EXPIRED, f"Unknown or expired duplex session: {event.get('session_id')}")
            return None
        if event.get("resume_token") != session.token or event.get("incarnation") != session.incarnation:
            await self._refuse(ws, ErrorCode.RESUME_INVALID, "wrong resume_token or incarnation")
            return None
        cursor = int(event.get("last_received_server_event_seq") or 0)
        if session.journal and cursor < session.journal[0]["server_event_seq"] - 1:
            await ws.send(json.dumps({"type": "session.resync_required", "session_id": session.id, "reason": "journal_gap"}))
            await ws.close()
            return None
        old, session.ws = session.ws, None
        if old is not None:
            try:
                await old.send(json.dumps({"type": "session.replaced", "session_id": session.id,
                                           "attachment_generation": session.generation}))
                await old.close()
            except Exception:  # noqa: BLE001 - the old socket may already be gone
                pass
        session.generation += 1
        session.token = f"rt_{next(_tokens):04d}"
        session.last_heard = asyncio.get_running_loop().time()
        await ws.send(json.dumps({"type": "session.resumed", "session_id": session.id, "incarnation": session.incarnation,
                                  "attachment_generation": session.generation, "resume_token": session.token}))
        replay_from = cursor - self.replay_extra
        for old_event in [e for e in session.journal if e["server_event_seq"] > replay_from]:
            self.replayed.append(old_event["server_event_seq"])
            await ws.send(json.dumps(old_event))
        session.ws = ws
        return session

    async def _lease(self, session: Session) -> None:
        """No client event (a heartbeat is enough) for idle_timeout_s: the session expires."""
        loop = asyncio.get_running_loop()
        while not session.closed:
            await asyncio.sleep(min(0.05, session.idle_timeout_s / 4))
            if loop.time() - session.last_heard > session.idle_timeout_s:
                await self._finish(session, "session.expired", reason="idle_ttl_expired", incarnation=0)

    async def _finish(self, session: Session, kind: str, **fields) -> None:
        session.closed = True
        if session.response is not None:
            session.response.cancel()
        await session.emit(kind, session_id=session.id, **fields)
        ws = session.ws
        if ws is not None:
            await ws.close()  # type: ignore[attr-defined]

    # ---- client events ----------------------------------------------------------------------

    async def _dispatch(self, session: Session, event: dict) -> None:  # noqa: C901 - one branch per event
        match event.get("type"):
            case "input_audio_buffer.append":
                await self._append(session, base64.b64decode(event.get("audio") or ""))
            case "input_audio_buffer.commit" if self.lose_first_commit and not self.drops:
                self.drops += 1
                ws, session.ws = session.ws, None
                ws.transport.abort()  # type: ignore[attr-defined]  # the commit dies with the socket, unheard
            case "input_audio_buffer.commit":
                await self._commit(session, asks=event.get("response_create") is True)
            case "input_audio_buffer.clear":
                session.buffer.clear()
                session.speech_ms = 0.0
                await session.emit("input_audio_buffer.cleared")
            case "response.cancel":
                await self._cancel(session, "client_cancelled")
            case "playback.ack":
                session.acks.append(event)
                self._store(session, event)
                await session.emit("playback.acknowledged", event={
                    "type": "playback.acknowledged", "session_id": session.id, "item_id": event.get("item_id"),
                    "played_ms": event.get("played_ms"), "committed_ms": event.get("committed_ms"),
                    "truncate": bool(event.get("truncate")), "history_committed": True})
            case "session.heartbeat":
                session.heartbeats += 1
                await session.emit("session.heartbeat_ack", session_id=session.id)
            case "session.event_ack":
                seq = int(event.get("server_event_seq") or 0)
                session.event_acks.append(seq)
            case "session.close":
                await self._finish(session, "session.closed", reason="session_close")
            case "conversation.item.create" if (event.get("item") or {}).get("type") == "function_call_output":
                self._answer(session)
            case "barge_in" | "turn.signal" if not self.supports_barge_in:
                await session.emit("error", error=realtime_error(ErrorCode.BARGE_IN_UNSUPPORTED, "this model has no barge-in")["error"])
            case _:
                pass

    async def _append(self, session: Session, pcm: bytes) -> None:
        samples = pcm16_to_float(pcm)
        ms = len(samples) * 1000 / INPUT_RATE
        speech = len(samples) > 0 and float(np.sqrt(np.mean(samples**2))) > SPEECH_RMS
        if session.response is not None and not session.response.done():
            if not speech:
                return
            session.overlap_ms += ms
            if session.overlap_ms < OVERLAP_MS or session.overlap_reported:
                return
            session.overlap_reported = True
            if self.supports_barge_in:
                await session.emit("overlap.decision", session_id=session.id, epoch=0, policy="barge_in_on_speech",
                                   action="barge_in", reason="server_vad_utterance_active", overlap_ms=round(session.overlap_ms))
                await self._cancel(session, "barge_in")
                session.buffer.extend(pcm)
                session.speech_ms += ms
            else:
                await session.emit("overlap.decision", session_id=session.id, epoch=0, policy="listen_only",
                                   action="listen", reason="long_overlap_speech", overlap_ms=round(session.overlap_ms),
                                   buffer_audio=True)
            return
        session.buffer.extend(pcm)
        session.speech_ms += ms if speech else 0.0

    async def _commit(self, session: Session, asks: bool) -> None:
        heard_speech = session.speech_ms >= 200
        session.buffer.clear()
        session.speech_ms = 0.0
        if not heard_speech:
            await session.emit("response.listen", session_id=session.id, epoch=0, response={
                "object": "realtime.response", "status": "listening",
                "metadata": {"type": "response.listen", "session_id": session.id, "epoch": 0, "reason": "model_listen"}})
            return
        item = f"item_user_{session.responses + 1}"
        await session.emit("input_audio_buffer.committed", item_id=item, event={"type": "input.committed", "turn_id": session.responses + 1})
        await session.emit("conversation.item.input_audio_transcription.completed", item_id=item, content_index=0, transcript=HEARD)
        if self.tool_call is not None and session.responses == 0:
            await self._call_tool(session, *self.tool_call)
            return
        if self.turn_based and not asks:
            return  # committed; the answer waits for a response.create
        self._answer(session)

    def _answer(self, session: Session) -> None:
        session.responses += 1
        session.response_id = f"resp_{session.responses:02d}"
        session.overlap_ms, session.overlap_reported = 0.0, False
        session.response = asyncio.get_running_loop().create_task(self._respond(session, session.response_id))

    async def _call_tool(self, session: Session, name: str | None, arguments: str) -> None:
        session.responses += 1
        rid, item, call = f"resp_fc_{session.responses:02d}", f"item_fc_{session.responses:02d}", "call_7d1f"
        if name is None:
            await session.emit("duplex.function_call.done", event={"type": "function_call.done", "session_id": session.id,
                                                                   "epoch": 0, "call_id": None, "name": None, "arguments": arguments})
            session.responses -= 1
            self._answer(session)  # the model goes on to speak
            return
        envelope = {"response_id": rid, "item_id": item, "output_index": 0, "call_id": call}
        await session.emit("response.created", response_id=rid, response={"id": rid, "object": "realtime.response", "status": "in_progress", "output": []})
        await session.emit("response.output_item.added", response_id=rid, output_index=0, item={
            "id": item, "object": "realtime.item", "type": "function_call", "status": "completed", "name": name,
            "call_id": call, "arguments": arguments})
        for piece in (arguments[:len(arguments) // 2], arguments[len(arguments) // 2:]):
            await session.emit("response.function_call_arguments.delta", **envelope, delta=piece)
        await session.emit("response.function_call_arguments.done", **envelope, arguments=arguments)
        await session.emit("response.done", response_id=rid, response={"id": rid, "object": "realtime.response",
                                                                        "status": "completed", "output": [{"id": item}]})

    async def _respond(self, session: Session, rid: str) -> None:
        item = f"item_{rid}"
        envelope = {"response_id": rid, "item_id": item, "output_index": 0, "content_index": 0}
        await session.emit("response.created", response_id=rid, response={"id": rid, "object": "realtime.response", "status": "in_progress", "output": []})
        await session.emit("response.output_item.added", response_id=rid, output_index=0, item={"id": item, "role": "assistant", "status": "in_progress"})
        await session.emit("response.speak", **envelope, metadata={"session_id": session.id, "epoch": 0, "model_speak": True})
        words, spoken = self.answer.split(" "), ""
        per_delta = OUTPUT_RATE * self.delta_ms // 1000
        for index in range(self.deltas):
            if self.hold is not None and index >= self.hold:
                await asyncio.Event().wait()  # held until cancelled
            audio = tone_at(per_delta, index) if self.audible else np.full(per_delta, delta_level(index), np.float32)
            if not self.text_only:
                await session.emit("response.audio.delta", **envelope, delta=base64.b64encode(float_to_pcm16(audio)).decode(),
                                   format="pcm16", sample_rate_hz=OUTPUT_RATE,
                                   metadata={"session_id": session.id, "epoch": 0, "audio_duration_ms": self.delta_ms})
            said = " ".join(words[:(index + 1) * len(words) // self.deltas])
            await session.emit("response.audio_transcript.delta", **envelope, delta=said[len(spoken):])
            spoken = said
            if self.drop_after_deltas == index + 1 and not self.drops:
                self.drops += 1
                ws, session.ws = session.ws, None
                ws.transport.abort()  # type: ignore[attr-defined]  # the socket dies mid-answer, no close frame
                if self.forget_on_drop:
                    del self.sessions[session.id]  # as if its grace ran out at once
            await asyncio.sleep(self.pace_s)
        await session.emit("response.audio.done", **envelope)
        await session.emit("response.audio_transcript.done", **envelope, transcript=self.answer)
        session.response = None
        await session.emit("response.done", response_id=rid, response={"id": rid, "object": "realtime.response",
                                                                        "status": "completed", "output": [{"id": item}]})
        if self.finale is not None:
            await self._finish(session, self.finale, reason={"session.expired": "disconnect_grace_expired",
                                                            "session.resync_required": "journal_overflow"}.get(self.finale),
                               attachment_generation=session.generation)

    async def _cancel(self, session: Session, reason: str) -> None:
        task, rid = session.response, session.response_id
        if task is None or task.done() or rid is None:
            return
        task.cancel()
        session.response = None
        if reason == "barge_in":
            await session.emit("output_audio_buffer.cleared", response_id=rid)
        await session.emit("response.done", response_id=rid, response={
            "id": rid, "object": "realtime.response", "status": "cancelled",
            "status_details": {"type": "cancelled", "reason": reason}, "output": [{"id": f"item_{rid}", "status": "cancelled"}]})

    def _store(self, session: Session, ack: dict) -> None:
        """`ack_only`: the stored assistant turn is as long as the acknowledged playback."""
        rid = ack.get("response_id")
        for turn in session.history:
            if turn["response_id"] == rid:
                turn["played_ms"] = ack.get("played_ms")
                return
        session.history.append({"response_id": rid, "played_ms": ack.get("played_ms")})
