"""One duplex session (vLLM-Omni's `/v1/realtime?duplex=1` contract) over the embedded engine.

Audio streams in continuously; Silero and Smart Turn decide where a turn ends (a pause judged
unfinished is answered `response.listen`), and the answer runs as in the turn-based session.
User speech over the assistant goes through the overlap policy (backchannel dropped, sustained
speech barges in). `playback.ack` keeps history to what was heard. `epoch` advances on every
cancel, clear and barge-in. Surviving the socket (journal, resume, lease) is `lifeline.py`'s.
"""

import copy
import logging
from collections.abc import Callable
from typing import Any

from omnicli.engine.base import Engine
from omnicli.errors import EventError
from omnicli.protocol.duplex import (
    ClientEvent,
    ErrorCode,
    OverlapAction,
    ServerEvent,
    playback,
)
from omnicli.session.conversation import Item, new_id
from omnicli.session.core import ConversationCore, carry_out
from omnicli.session.duplex import overlap as duplex_overlap
from omnicli.session.duplex.config import DuplexConfig, apply, input_encoding, session_view
from omnicli.session.duplex.items import ItemEvents
from omnicli.session.duplex.lifeline import Attachment, Lifeline
from omnicli.session.duplex.playback import Ledger, Ledgers
from omnicli.session.duplex.streamed_answer import DuplexResponse
from omnicli.session.duplex.wire import f32le_as_pcm16, parse_event
from omnicli.session.settings import SERVER_VAD_DEFAULTS, SessionSettings, with_served_voice
from omnicli.turns.continuous import DuplexInput, Heard, sounds_finished
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.vad import TurnEvent

log = logging.getLogger("omni")

_PADDING_MS = 300
"""Speech starts are reported this much early (the turn's prefix padding)."""


class DuplexSession(Lifeline):
    """One full-duplex session (vLLM-Omni's duplex contract); it outlives its socket for a resume."""

    def __init__(self, engine: Engine, *, session_id: str, model_id: str, capabilities: dict, grace_s: float,
                 semantic: bool, on_end: Callable[[Lifeline], None], scheduler: AnswerScheduler, models: TurnModels,
                 served: bool = True) -> None:
        super().__init__(session_id, grace_s=grace_s, on_end=on_end)
        self.engine = engine
        self.scheduler = scheduler
        self.served = served
        self.capabilities = capabilities
        self.epoch = 0
        self.turn_id = 0
        self.config = DuplexConfig()
        if not semantic:
            self.config.turn_detection = dict(SERVER_VAD_DEFAULTS)
        self.settings = SessionSettings(model_id)
        self.core = ConversationCore(engine, self.settings, scheduler, lambda: self.closed)
        self.conversation = self.core.conversation
        self.input = DuplexInput(engine, self._lock, self._late_turns, scheduler, models)
        self.input.turn_end.on_heard(self._read_ahead)
        self.ledgers = Ledgers()
        self.items = ItemEvents(self.core, self.ledgers, self.emit, self._meta)
        self._speech_item_id: str | None = None
        self._typed: list[str] = []
        """`input.text.append`: text joined to the open input item, committed with it."""
        self._overlap_from: int | None = None
        """Where the user's speech over the assistant began (ms of input), while it lasts."""
        self._deferred = False

    @property
    def idle_timeout_s(self) -> float:
        """The session's lease as configured by the client."""
        return self.config.idle_timeout_s

    async def _stop(self, reason: str) -> None:
        await self._cancel_response(reason)

    def _released(self) -> None:
        self.input.close()

    # ---- attachments ---------------------------------------------------------------------

    async def open(self, attachment: Attachment, update: Any) -> None:
        """The opening handshake; an EventError here refuses the session."""
        await self.settings.take_engine_voice(self.engine)
        await self._configure(update)
        self.input.turn_end.detect_turns(self.config.turn_detection)
        await self.attach_first(attachment)
        await self.emit(ServerEvent.SESSION_CREATED, incarnation=self.incarnation, attachment_generation=self.generation,
                        resume_token=self.resume_token, session=self.session_object())
        await self.emit(ServerEvent.SESSION_UPDATED, session=self.session_object())

    # ---- the session object ----------------------------------------------------------------

    def _meta(self) -> dict:
        return {"session_id": self.id, "epoch": self.epoch}

    def session_object(self) -> dict:
        """The session as `session.created` and `session.updated` show it, with its current turn state."""
        active = self.core.current.id if self.core.current is not None else None
        return session_view(self.config, self.settings, {
            "id": self.id, "state": "open",
            "turn_state": "responding" if active else ("user_speaking" if self.input.turn_end.speaking else "idle"),
            "epoch": self.epoch, "turn_id": self.turn_id, "active_response_id": active,
        }, playback=self.ledgers.last.snapshot() if self.ledgers.last else playback(), capabilities=self.capabilities)

    # ---- events in -----------------------------------------------------------------------

    async def handle(self, text: str, attachment: Attachment) -> None:
        """One client event; a failure becomes an `error` event and the session lives on."""
        if attachment is not self._attachment or self.closed:
            return
        self._touch()
        async with self._lock:
            await carry_out(text, parse_event, self._dispatch, lambda event: event.get("event_id"), self.error)

    async def _dispatch(self, event: dict) -> None:
        kind = event["type"]
        match kind:
            case ClientEvent.SESSION_UPDATE:
                detection = await self._configure(event.get("session"))
                if detection:
                    self.input.turn_end.detect_turns(self.config.turn_detection)
                self._poke.set()
                await self.emit(ServerEvent.SESSION_UPDATED, session=self.session_object())
            case ClientEvent.SESSION_HEARTBEAT:
                await self.emit(ServerEvent.HEARTBEAT_ACK, session_id=self.id)
            case ClientEvent.SESSION_EVENT_ACK:
                seq = event.get("server_event_seq")
                if isinstance(seq, bool) or not isinstance(seq, int):
                    raise EventError("server_event_seq must be an integer", ErrorCode.INVALID_EVENT, param="server_event_seq")
                self.journal.ack(seq)
            case ClientEvent.SESSION_CLOSE:
                await self.close()
            case ClientEvent.SESSION_RESUME:
                raise EventError("session.resume opens a new socket (?duplex=1&autostart=0)", ErrorCode.INVALID_EVENT)
            case ClientEvent.INPUT_APPEND:
                await self._append(event)
            case ClientEvent.INPUT_COMMIT:
                await self._client_commit(event)
            case ClientEvent.INPUT_TEXT_APPEND:
                text = event.get("text")
                if not isinstance(text, str) or not text.strip():
                    raise EventError("input.text.append needs non-empty 'text'", ErrorCode.INVALID_EVENT, param="text")
                self._typed.append(text.strip())
            case ClientEvent.INPUT_CLEAR | ClientEvent.INPUT_CANCEL:
                self.input.turn_end.drop_turn_end()
                self.input.clear()
                self._typed = []
                self._overlap_from = None
                self.epoch += 1
                await self.emit(ServerEvent.INPUT_CLEARED)
            case ClientEvent.RESPONSE_CREATE:
                await self._start_response(event.get("response") or {}, replaces_because="new_response")
            case ClientEvent.RESPONSE_CANCEL:
                if self.core.task is None:
                    raise EventError("there is no response to cancel", "response_cancel_not_active")
                self.epoch += 1
                await self._cancel_response("client_cancelled")
            case ClientEvent.OUTPUT_AUDIO_CLEAR:
                self.epoch += 1
                target = self._audible_response()
                await self.emit(ServerEvent.OUTPUT_AUDIO_CLEARED, response_id=target)
                await self._cancel_response("client_cancelled")
            case ClientEvent.BARGE_IN | ClientEvent.TURN_SIGNAL:
                if kind == ClientEvent.TURN_SIGNAL and event.get("event") != "barge_in":
                    raise EventError("turn.signal supports event 'barge_in'", ErrorCode.INVALID_EVENT, param="event")
                await self._barge_in("client_signal")
            case ClientEvent.PLAYBACK_ACK:
                await self.items.playback_ack(event)
            case ClientEvent.ITEM_CREATE | ClientEvent.ITEM_RETRIEVE | ClientEvent.ITEM_DELETE | ClientEvent.ITEM_TRUNCATE:
                await self.items.handle(kind, event)
            case _:
                raise EventError(f"unsupported event type '{kind}'", ErrorCode.UNKNOWN_EVENT, param="type")

    async def _configure(self, session) -> bool:
        if self.served:
            session = await with_served_voice(self.engine, session, "session.voice")
        return apply(self.config, self.settings, session if session is not None else {})

    # ---- listening -----------------------------------------------------------------------

    async def _append(self, event: dict) -> None:
        audio = event.get("audio")
        if not isinstance(audio, str):
            raise EventError("input_audio_buffer.append needs base64 'audio'", ErrorCode.INVALID_EVENT, param="audio")
        rate = event.get("sample_rate_hz") or self.config.input_rate
        if (input_encoding(event.get("format"), "format") or self.config.input_format) == "pcm_f32le":
            audio = f32le_as_pcm16(audio)
        await self._listened(await self.input.hear(audio, rate))

    async def _late_turns(self, turns: list[TurnEvent]) -> None:
        """A turn end decided after its append (`InputBuffer`)."""
        await self._listened(self.input.heard(turns))

    async def _listened(self, heard: Heard) -> None:
        """What the input buffer heard: pauses that ended no turn, turns started and ended."""
        if heard.unfinished_pauses and self._overlap_from is None and self.core.task is None:
            await self._listen("turn_incomplete")
        for turn in heard.turns:
            if turn.kind == "started":
                self.input.drop_before(turn.ms)
                self._speech_item_id = new_id("item")
                await self.emit(ServerEvent.SPEECH_STARTED, audio_start_ms=turn.ms, item_id=self._speech_item_id)
                if self._audible_response() is not None:
                    self._overlap_from = turn.ms + self.config.turn_detection.get("prefix_padding_ms", _PADDING_MS)
                continue
            item_id, self._speech_item_id = self._speech_item_id or new_id("item"), None
            await self.emit(ServerEvent.SPEECH_STOPPED, audio_end_ms=turn.ms, item_id=item_id)
            if self._overlap_from is not None and await self._overlap_dropped(turn.ms):
                continue
            if self.input.pcm:
                await self._commit_item(item_id)
                if self.config.auto_response:  # else the client asks for each answer (response.create)
                    await self._respond()
        if self._overlap_from is not None and self.input.turn_end.speaking:
            sustained = duplex_overlap.while_speaking(self.config.overlap, self.input.voiced_until_ms - self._overlap_from)
            if sustained is not None:
                self._overlap_from = None
                await self._decided(sustained)
                await self._barge_in(None)
        self.input.settle()

    async def _overlap_dropped(self, until_ms: int) -> bool:
        """The user's speech over the answer ended at `until_ms`: the overlap policy's word on it.
        A backchannel is dropped (cleared; True); longer speech is a turn, answered after the
        answer under way."""
        assert self._overlap_from is not None
        decision = duplex_overlap.when_stopped(self.config.overlap, max(0, until_ms - self._overlap_from))
        self._overlap_from = None
        await self._decided(decision)
        if decision.action != OverlapAction.DROP:
            return False
        self.input.clear()
        return True

    async def _decided(self, decision: duplex_overlap.Decision) -> None:
        await self.emit(ServerEvent.OVERLAP_DECISION, session_id=self.id, epoch=self.epoch,
                        **decision.fields(self.config.overlap.policy))

    async def _listen(self, reason: str) -> None:
        await self.emit(ServerEvent.RESPONSE_LISTEN, session_id=self.id, epoch=self.epoch, response={
            "object": "realtime.response", "status": "listening",
            "metadata": {"type": ServerEvent.RESPONSE_LISTEN.value, **self._meta(), "reason": reason}})

    async def _client_commit(self, event: dict) -> None:
        create = event.get("create_response", event.get("response_create"))
        if event.get("is_speech") is False:
            self.input.clear()
            await self._listen("silence_commit")
            return
        if self._typed and not self.input.voiced:  # a typed turn: the text is the whole of it
            self.input.clear()
            await self._commit_typed_item(self._speech_item_id or new_id("item"))
            self._speech_item_id = None
            if create is not None or self.config.auto_response:  # typed text is finished: nothing to wait for
                await self._respond()
            return
        if create is not True and self._overlap_from is not None and await self._overlap_dropped(self.input.voiced_until_ms):
            self.input.end_turn()  # the client's pause came before ours: the remark ends here, not as a turn later
            self._speech_item_id = None
            return
        if create is False and not self.input.voiced:  # nothing said since the last turn: nothing to answer
            self.input.clear()
            if self._audible_response() is None:  # else the answer under way is the answer to that turn
                await self._listen("no_speech")
            return
        if not self.input.pcm:
            raise EventError("input_audio_buffer.commit requires a non-empty input audio buffer.", ErrorCode.INPUT_BUFFER_EMPTY)
        _, samples = await self._commit_item(self._speech_item_id or new_id("item"))
        self._speech_item_id = None
        self.input.end_turn()  # the detector's turn was this one: its tail is not a second turn
        if create is True or (create is None and self.config.auto_response):
            await self._respond()
        elif create is False:
            if await sounds_finished(samples, self.input.turn_end.models.smart_turn):
                await self._respond()
            else:
                await self._listen("turn_incomplete")

    async def _commit_item(self, item_id: str):
        """The buffered speech as a user item, with what was typed beside it (`input.text.append`)."""
        item, samples = await self.core.commit_turn(self.input, item_id, self._take_typed())
        await self._commit_user(item)
        return item, samples

    async def _commit_typed_item(self, item_id: str) -> None:
        await self._commit_user(Item({"id": item_id, "type": "message", "object": "realtime.item", "role": "user",
                                      "status": "completed", "content": self._take_typed()}))

    def _take_typed(self) -> list[dict]:
        """What was typed since the last turn, as one text part (none if nothing was)."""
        typed, self._typed = self._typed, []
        return [{"type": "input_text", "text": " ".join(typed)}] if typed else []

    async def _commit_user(self, item: Item) -> None:
        self.turn_id += 1
        previous = self.conversation.insert(item)
        deferred = self.core.task is not None
        for kind in (ServerEvent.ITEM_ADDED, ServerEvent.ITEM_CREATED):
            await self.emit(kind, previous_item_id=previous, item=copy.deepcopy(item.wire))
        await self.emit(ServerEvent.INPUT_COMMITTED, previous_item_id=previous, item_id=item.id, event={
            "type": "input.committed", **self._meta(), "turn_id": self.turn_id, "history_len": len(self.conversation.items),
            "response_create_deferred": deferred, "realtime_item_id": item.id})
        if item.transcript is not None:
            await self._transcribed(item, item.transcript)
        await self.emit(ServerEvent.ITEM_DONE, previous_item_id=previous, item=copy.deepcopy(item.wire))

    async def _read_ahead(self, transcript: str, *, begin: bool) -> None:
        """A turn heard before the server or the client ended it: the engine reads it ahead, and with
        one talker begins the answer (as the turn-based session does)."""
        if not self._typed:
            await self.core.read_ahead(transcript, begin=begin)

    async def _heard(self, item: Item, transcript: str) -> None:
        self.core.heard(item, transcript)
        await self._transcribed(item, transcript)

    async def _transcribed(self, item: Item, transcript: str) -> None:
        await self.emit(ServerEvent.INPUT_TRANSCRIPTION, item_id=item.id, content_index=0, transcript=transcript)

    # ---- answers -------------------------------------------------------------------------

    def _audible_response(self) -> str | None:
        """The answer the user hears now: the one running, or the last one still playing."""
        if self.core.current is not None:
            return self.core.current.id
        return self.ledgers.audible_response()

    async def _respond(self) -> None:
        """Answer the user's turn now, or after the answer that is running."""
        if self.core.task is not None:
            self._deferred = True
        else:
            await self._start_response({})

    async def _start_response(self, options: dict, replaces_because: str | None = None) -> None:
        if replaces_because is not None and self.core.task is not None:
            self.epoch += 1
            await self._cancel_response(replaces_because)

        def ledger(response: DuplexResponse) -> Ledger:
            return self.ledgers.open(response.id, response.item, self.config.playback_commit_policy, response.speaks)

        await self.core.start(DuplexResponse(self.engine, self.conversation, self.settings, options, self._response_event,
                                             self._heard, ledger=ledger, meta=self._meta, scheduler=self.scheduler),
                              after=self._answered)

    async def _response_event(self, kind: str, **fields) -> None:
        """A turn-based response event in the duplex shape."""
        response = fields.get("response")
        if kind in (ServerEvent.RESPONSE_CREATED, ServerEvent.RESPONSE_DONE) and isinstance(response, dict):
            fields["response_id"] = response["id"]
            ledger = self.ledgers.get(response["id"])
            raw = {"type": kind, **self._meta(), "response_id": response["id"], "turn_id": self.turn_id}
            if kind == ServerEvent.RESPONSE_DONE and ledger is not None:
                ledger.finished()
                raw.update(committed=ledger.history_committed, playback=ledger.snapshot())
            response["metadata"] = {**raw, "duplex_event": dict(raw)}
        await self.emit(kind, **fields)
        if kind == ServerEvent.ITEM_ADDED:
            await self.emit(ServerEvent.ITEM_CREATED, **fields)
        elif kind == ServerEvent.RESPONSE_DONE:
            await self.emit(ServerEvent.RATE_LIMITS, rate_limits=[])

    def _answered(self) -> None:
        """An answer ended by itself: a turn that waited for it is answered now."""
        if self._deferred and not self.closed:
            self._deferred = False
            self._spawn(self._deferred_response())

    async def _deferred_response(self) -> None:
        async with self._lock:
            if self.core.task is None and not self.closed:
                await self._start_response({})

    async def _cancel_response(self, reason: str) -> str | None:
        self._deferred = False
        return await self.core.cancel(reason)

    async def _barge_in(self, source: str | None) -> None:
        """The user takes the turn: stop the audio, cancel the answer; the epoch advances."""
        if source is not None and not self.capabilities.get("supports_barge_in"):
            raise EventError("this session does not support barge-in", ErrorCode.BARGE_IN_UNSUPPORTED)
        target = self._audible_response()
        self.epoch += 1
        if source is not None:
            await self.emit(ServerEvent.OVERLAP_DECISION, session_id=self.id, epoch=self.epoch,
                            policy=self.config.overlap.policy.value, action=OverlapAction.BARGE_IN.value, reason=source)
        if target is not None:
            await self.emit(ServerEvent.OUTPUT_AUDIO_CLEARED, response_id=target)
        await self._cancel_response("barge_in")
        last = self.ledgers.last
        if last is not None and last.response_id == target:
            last.stopped()
