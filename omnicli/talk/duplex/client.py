"""`omni talk --duplex`: a full-duplex conversation over vLLM-Omni's duplex contract.

    source (mic or file) -> [echo gate] -> input_audio_buffer.append, always (the model listens all along)
        client VAD: a pause -> input_audio_buffer.commit {create_response: false} (the model decides;
        true where the model answers only when asked)
    link -> response.speak / response.listen / overlap.decision -> the view and the event log
         -> response.audio.delta -> speaker; playback.ack {played_ms} while it plays and at every cut

What was heard is measured where it is heard: `played_ms` of a response counts the samples the
speaker has actually played of it, so the history the server keeps (`ack_only`) is what the
listener heard. Speech over the answer is the server's to judge where its capabilities say
`supports_barge_in` (it cancels; we flush and acknowledge); elsewhere the client judges it as the
server's overlap policy would: a remark shorter than a backchannel ("uh-huh": the session's
`overlap_short_ack_ms`) is dropped (`input_audio_buffer.clear`) and the answer plays on; speech
that goes on past it is a barge-in the client forces: flush, `response.cancel` (while the server is
still making the answer), `input_audio_buffer.clear`, then the user's speech again from its start.
Everything branches on the session's capabilities, never on a model name.
"""

import asyncio
import base64
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import OmniError, ServerError
from omnicli.protocol import duplex
from omnicli.protocol.duplex import ClientEvent, ErrorCode, OverlapAction, ServerEvent, error_code_and_message
from omnicli.talk.duplex.acks import SpeakerAcks
from omnicli.talk.duplex.appends import Appends
from omnicli.talk.duplex.commits import UnconfirmedCommits
from omnicli.talk.duplex.link import DuplexLink, SessionRefused
from omnicli.talk.duplex.options import DuplexOptions
from omnicli.talk.duplex.presets import InputEncoder, session_config
from omnicli.talk.duplex.remarks import RemarkOverAnswer, backchannel_ms
from omnicli.talk.duplex.tools import ToolCalls
from omnicli.talk.echo_gate import next_heard_frame
from omnicli.talk.loop import POLL_SECONDS, TalkLoop
from omnicli.talk.playing import Playing
from omnicli.talk.state import TalkState
from omnicli.turns.modes import TurnMode
from omnicli.turns.talk_modes import BargeIn

if TYPE_CHECKING:
    from omnicli.turns.models import TurnModels
    from omnicli.turns.vad import TurnDetector

log = logging.getLogger("omni")

_SILENCE_MS = 500
_ECHOES = {ServerEvent.HEARTBEAT_ACK, ServerEvent.PLAYBACK_ACKNOWLEDGED}
"""Replies to the client's own bookkeeping: they do not keep a headless talk from ending."""


def _response_id(event: dict) -> str | None:
    found = event.get("response_id") or (event.get("response") or {}).get("id")
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class ResponsesCut:
    """What a barge-in stops: the answers on the speaker, and the one the server is making."""

    on_speaker: bool
    making: str | None
    """The response the server is still making (cancelled unless the server stopped it)."""


class DuplexTalkClient(TalkLoop[ResponsesCut]):
    """The full-duplex talk: the microphone streams to the session all along, answers play as they come."""

    def __init__(self, link: DuplexLink, source, speaker, options: DuplexOptions, view, log=None,
                 models: "TurnModels | None" = None) -> None:
        """`log`: the event log (`--transcript`), where each answer's playing is noted."""
        state = TalkState(TurnMode.CLIENT if options.turns == TurnMode.SMART else options.turns, view,
                          realtime_speaker=speaker.realtime, notes=None if log is None else lambda note: log.write("note", note))
        super().__init__(source, speaker, view, state, echo_gate=options.echo_gate, models=models)
        self.link = link
        self.options = options
        self.encoder = InputEncoder(options.preset)
        self.auto_response = True
        """The session answers a commit by itself (the model decides); else each commit asks."""
        self.answer_text = 0
        """Answer text received (an answer without audio is an answer too)."""
        self.commits = UnconfirmedCommits(link, self.send)
        self.interruptions = 0
        self.forced = 0
        """Barge-ins the client forced (the server has none)."""
        self.backchannels = 0
        """Remarks over an answer the client dropped (the server has no barge-in to judge them)."""
        self.acks = SpeakerAcks(speaker, self.send, lambda: self.capabilities.supports_audio_truncate)
        """Responses whose audio the speaker holds or plays, and what the server was told of them."""
        self.active: str | None = None
        """The response the server is making (created, not yet done)."""
        self.cut: set[str | None] = set()
        """Responses the user talked over: the rest of their audio and text is dropped."""
        self.tools = ToolCalls()
        self._detector: TurnDetector | None = None
        self.appends = Appends(self.encoder, self.send, options.frame)
        self.remark = RemarkOverAnswer()
        """Speech over an answer the server will not cut, while it may still be a backchannel."""

    @property
    def capabilities(self):
        """What the server said its duplex session supports."""
        return self.link.capabilities

    @property
    def playing(self) -> Playing | None:
        """The newest response on the speaker."""
        return self.acks.newest

    def toggle_push_to_talk(self) -> None:
        """Space does nothing in duplex: the model listens all along."""

    # ---- setup and main loop -------------------------------------------------------------

    async def _connect(self) -> asyncio.Task:
        try:
            await self._open()
        except BaseException:
            await self.link.close()
            raise
        log.debug("duplex session %s: capabilities %s", self.link.session_id, self.capabilities.model_dump())
        self.appends.fit(self.capabilities.chunk_period_ms)
        self._detector = await asyncio.to_thread(self._make_detector)
        return asyncio.create_task(self._receive())

    async def _prepare(self, receiving: asyncio.Task) -> None:
        """Nothing more: the session was configured as it opened."""

    def _parts(self) -> list[Coroutine]:
        return [self._listen(), self._follow_playback(), self.commits.watch(), self._keys()]

    async def _leaving(self) -> None:
        """Nothing yet: what was played is acknowledged once the microphone stops."""

    async def _disconnect(self, receiving: asyncio.Task) -> None:
        """What was played is acknowledged, then `session.close` -> `session.closed`."""
        if not receiving.done():
            await self.acks.ack_all()
        await self.link.close()  # the receiver reads on until session.closed
        receiving.cancel()
        await asyncio.gather(receiving, return_exceptions=True)

    async def _open(self) -> None:
        """The session, answering by itself (`auto_response`) where the model allows it. A model
        that answers only when asked (vLLM-Omni's turn-based Qwen3-Omni duplex) refuses that knob:
        then the same session without it, and each turn end asks for its answer."""
        o = self.options
        session = session_config(o.preset, model=o.model, ref_audio=o.ref_audio, instructions=o.instructions,
                                 voice=o.voice)
        try:
            await self.link.open(session)
        except SessionRefused as refused:
            if refused.code != ErrorCode.RUNTIME_CONFIG_INVALID or not session["extra_body"].pop("auto_response", False):
                raise
            log.debug("duplex: %s; asking again without auto_response", refused)
            await self.link.open(session)
            self.auto_response = False
            if o.turns == TurnMode.SERVER:  # nobody would end a turn: omni's VAD does
                self.options, self.state.turns = replace(o, turns=TurnMode.CLIENT), TurnMode.CLIENT
                self.view.note("this server answers only when asked, so omni's VAD ends the turns")

    def _make_detector(self) -> "TurnDetector":
        from omnicli.turns.vad import TurnDetector

        return TurnDetector(SPEECH_RATE, self.models, silence_ms=_SILENCE_MS, semantic=self.options.turns == TurnMode.SMART)

    def _answering(self) -> bool:
        return self.active is not None

    def _answered(self) -> bool:
        return bool(self.said or self.answer_text)

    def _no_answer(self) -> OmniError:
        if self.errors:
            return ServerError(f"the server sent no answer: {self.errors[-1]}")
        if not self.asked and self.options.turns != TurnMode.SERVER:
            return OmniError("omni heard no turn in the input file, so nothing was asked")
        return ServerError("the duplex server sent no answer audio")

    # ---- the user's side -----------------------------------------------------------------

    async def send(self, event: dict) -> None:
        """Send an event over the link (which waits while it resumes)."""
        await self.link.send(event)

    async def _listen(self) -> None:
        """Every frame goes to the server (the model listens all along); Silero finds the pauses
        that end a turn and the speech that talks over an answer."""
        while True:
            frame = await next_heard_frame(self)
            self.recording.heard(len(frame))
            await self.appends.add(frame)
            self.remark.heard(frame)
            assert self._detector is not None
            for turn in await asyncio.to_thread(self._detector.feed, frame):
                if turn.kind == "started":
                    await self._speech_started()
                else:
                    await self._speech_stopped(self.recording.recorded_at(turn.ms))  # the wait began there
            if self.remark.open:
                await self._weigh_overlap()

    async def _speech_started(self) -> None:
        self.user_speaking = True
        self.commits.settled()  # a new turn: its commit carries what a lost one had
        self.state.turn_started()
        if not self._answer_in_progress():
            return
        if self.capabilities.supports_barge_in:
            return  # the server's overlap policy judges it: a remark is dropped, sustained speech barges in
        assert self._detector is not None
        self.remark.begin(self._detector.heard_ms - self._detector.min_speech_ms)

    async def _weigh_overlap(self) -> None:
        """Speech over an answer the server will not cut: a barge-in once it lasts longer than a
        backchannel; the next turn if the answer ended first."""
        assert self._detector is not None and self.remark.began_ms is not None
        if not self._answer_in_progress():
            self.remark.end()
        elif self._detector.heard_ms - self._detector.trailing_silence_ms - self.remark.began_ms >= backchannel_ms(self.link.session):
            self.state.overlap_decision(OverlapAction.BARGE_IN.value)
            await self._force_barge_in(self.remark.end())

    async def _speech_stopped(self, speech_end_at: float) -> None:
        """A pause: the turn may be over. The model decides (`create_response: false`). A remark
        over the answer that ended before it grew longer than a backchannel is dropped instead."""
        self.user_speaking = False
        if self.remark.open:
            self.remark.end()
            await self._drop_backchannel()
            return
        if self.options.turns == TurnMode.SERVER:
            return
        await self.appends.flush()
        # Both spellings: the document's `response_create`, and `create_response` as the brief for
        # omni serve's lane and DuplexClient's keyword name it.
        ask = not self.auto_response
        commit = {"type": ClientEvent.INPUT_COMMIT.value, "final": True, "response_create": ask, "create_response": ask}
        self.commits.sent(commit)
        await self.send(commit)
        self.asked += 1
        self.state.asked(speech_end_at, by_key=False)

    def _answer_in_progress(self) -> bool:
        audible = self.speaker.buffered_seconds > 0 and self.playing is not None and self.playing.response_id not in self.cut
        return audible or (self.active is not None and self.active not in self.cut)

    async def _drop_backchannel(self) -> None:
        """"uh-huh" over the answer: the answer plays on, and the remark is not a turn (cleared
        from the input, as the server's own policy drops it)."""
        self.backchannels += 1
        self.state.remark_dropped()
        await self.appends.flush()
        await self.send({"type": ClientEvent.INPUT_CLEAR.value})

    async def _force_barge_in(self, speech: list[np.ndarray]) -> None:
        """No barge-in on the server: stop the answer, and send the user's `speech` again from its
        onset (the clear dropped it with the rest of the buffer)."""
        await self.barge_in(BargeIn.SPEECH)
        self.forced += 1
        self.appends.drop_unsent()  # `speech` holds them
        await self.send({"type": ClientEvent.INPUT_CLEAR.value})
        await self.appends.send_now(np.concatenate(speech))

    def _answer_to_cut(self) -> ResponsesCut | None:
        making = self.active if self.active is not None and self.active not in self.cut else None
        on_speaker = self.playing is not None and self.playing.response_id not in self.cut
        return ResponsesCut(on_speaker, making) if on_speaker or making is not None else None

    async def _cut_from_speaker(self, answer: ResponsesCut) -> int:
        """What was not heard is dropped from the speaker, and the server told how much of each
        answer on it was heard (`truncate` where it can shorten the stored answer)."""
        if not answer.on_speaker:
            return 0
        self.cut.update(playing.response_id for playing in self.acks.on_speaker)
        cut = await self.acks.cut()
        self.interruptions += 1
        return cut[-1][1]

    async def _cut_on_server(self, answer: ResponsesCut, *, cancel: bool) -> None:
        if answer.making is not None:
            self.cut.add(answer.making)
            if cancel:
                await self.send({"type": ClientEvent.RESPONSE_CANCEL.value, "response_id": answer.making})

    # ---- playback ---------------------------------------------------------------------------

    async def _follow_playback(self) -> None:
        """The view follows the speaker; the server hears of each answer's progress (`acks`)."""
        while True:
            await asyncio.sleep(POLL_SECONDS)
            self._report_playback(self.playing)
            await self.acks.follow()

    def _play(self, event: dict, response_id: str | None) -> None:
        if response_id is None or response_id in self.cut:
            return  # the rest of an answer the user talked over
        rate = int(event.get("sample_rate_hz") or self.options.preset.output_rate)
        self._to_speaker(self.acks.playing(response_id, event.get("item_id")),
                         base64.b64decode(event.get("delta") or event.get("audio") or ""), rate)

    # ---- the server's side ---------------------------------------------------------------

    async def _receive(self) -> None:
        async for event in self.link.events():
            if event.get("type") not in _ECHOES:
                self._last_event_at = time.monotonic()
            await self._on(event)
            if event.get("type") == ServerEvent.SESSION_CLOSED and not self.link.closing:
                reason = event.get("reason")
                raise ServerError("the server closed the duplex session" + (f" ({reason})" if reason else ""))

    async def _on(self, event: dict) -> None:  # noqa: C901 - one branch per event the talk reacts to
        kind = event.get("type")
        rid = _response_id(event)
        if kind in (ServerEvent.INPUT_COMMITTED, ServerEvent.RESPONSE_CREATED):
            self.commits.settled()
        match kind:
            case ServerEvent.RESPONSE_CREATED:
                self.active = rid
                self.state.answer_started()
            case ServerEvent.RESPONSE_SPEAK:
                log.debug("duplex: the model speaks (%s)", rid)
                self.state.model_decision("speak")
            case ServerEvent.RESPONSE_LISTEN:
                log.debug("duplex: the model listens (%s)", (event.get("response") or {}).get("metadata", {}).get("reason"))
                self.state.model_decision("listen")
            case ServerEvent.OVERLAP_DECISION:
                action = str(event.get("action"))
                log.debug("duplex: overlap %s (%s, %s ms)", action, event.get("reason"), event.get("overlap_ms"))
                self.state.overlap_decision(action)
                if action == OverlapAction.BARGE_IN:
                    await self.barge_in(BargeIn.SERVER)
            case ServerEvent.OUTPUT_AUDIO_CLEARED:
                await self.barge_in(BargeIn.SERVER)
            case ServerEvent.AUDIO_DELTA | duplex.BETA_AUDIO_DELTA:
                self._play(event, rid)
            case ServerEvent.AUDIO_TRANSCRIPT_DELTA | ServerEvent.TEXT_DELTA | duplex.BETA_AUDIO_TRANSCRIPT_DELTA:
                if rid not in self.cut:
                    self.answer_text += len(event.get("delta") or "")
                    self.state.answer_text(event.get("delta") or "")
            case ServerEvent.INPUT_TRANSCRIPTION:
                self.state.user_text(event.get("transcript") or "")
            case ServerEvent.RESPONSE_DONE:
                await self._response_done(rid, (event.get("response") or {}).get("status"))
            case ServerEvent.OUTPUT_ITEM_ADDED:
                self.tools.announced(event.get("item") or {})
            case ServerEvent.FUNCTION_CALL_ARGUMENTS_DONE:
                shown, output = self.tools.called(event)
                self.view.said("tool", shown, "not run: omni talk runs no tools")
                if output is not None:
                    await self.send(output)
            case ServerEvent.FUNCTION_CALL_MALFORMED:
                raw = event.get("event") or {}
                self.view.problem(f"the model made a malformed tool call ({raw.get('name') or 'no name'}, arguments "
                                  f"{str(raw.get('arguments'))!r})")
            case ServerEvent.ERROR:
                code, message = error_code_and_message(event)
                text = message + (f" ({code})" if code else "")
                self.errors.append(text)
                self.view.problem(text)

    async def _response_done(self, rid: str | None, status: str | None) -> None:
        if rid == self.active:
            self.active = None
        playing = self.acks.of(rid)
        if status == "cancelled" and rid is not None and rid not in self.cut:
            if playing is not None:
                await self.barge_in(BargeIn.SERVER)
            else:
                self.state.answer_done(status, self.speaker.buffered_seconds)
            self.cut.add(rid)
            return
        if rid in self.cut:
            return
        if playing is not None:
            playing.done = True
        self._report_playback(self.playing)  # audio heard since the last poll counts before the answer closes
        self.state.answer_done(status, self.speaker.buffered_seconds)
