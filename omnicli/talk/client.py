"""The `omni talk` loop: voice in, turns committed, the answer played, interruptions honoured.

    source (mic or file) -> [echo gate] -> turns (push-to-talk | client VAD | server VAD)
        -> input_audio_buffer.append / commit + response.create -> session
    session -> response.output_audio.delta -> speaker (jitter buffer, device rate)

Barge-in (`TalkLoop.barge_in`, the one entry point): when the user speaks over the answer, playback
is flushed, the response is cancelled (unless the server's VAD did), and the answer is truncated to
`audio_end_ms` = what the speaker actually played. Turn strategies live in `turns`, dialect differences in `dialects`, and
what the user sees (`TalkState`) is told here what happened, including where the speaker is.
Nothing is heard and no key acts before the session is ready.
"""

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import OmniError, ServerError
from omnicli.talk import dialects
from omnicli.talk.echo_gate import next_heard_frame
from omnicli.talk.loop import POLL_SECONDS, TalkLoop
from omnicli.talk.playing import Playing
from omnicli.talk.speakers import Speaker
from omnicli.talk.state import TalkState
from omnicli.turns.models import TurnModels
from omnicli.turns.modes import TurnMode
from omnicli.turns.talk_modes import BargeIn, ClientVAD, PushToTalk, ServerVAD, Turns

_GREETING_SECONDS = 1.5
"""A GA server greets with session.created at once; one that stays silent is vLLM-Omni's legacy
(<= 0.30) speech-to-text style path, which wants 16 kHz audio and `commit {final}`."""
_CONFIRM_SECONDS = 5.0
"""How long the session may take to confirm `session.update` (and `--vad server` to learn
whether the server took it); a server that never confirms is talked to after that."""


@dataclass(frozen=True)
class TalkOptions:
    """How a turn-based talk converses: how turns end, the echo gate, what the session is asked for."""

    turns: TurnMode = TurnMode.CLIENT
    echo_gate: bool = True
    instructions: str | None = None
    voice: str | None = None
    model: str | None = None
    answer_timeout: float | None = None
    """Seconds a sent turn may wait with nothing from the server (a server's read timeout)."""

    def __post_init__(self) -> None:
        """`turns` given by its word ("ptt", "smart", ...) is held as the mode itself."""
        object.__setattr__(self, "turns", TurnMode(self.turns))


@dataclass
class AnswerCut:
    """The answer a barge-in stops, as it was when the user cut in."""

    item: str | None
    """Its conversation item (truncated to what was heard)."""
    responding: bool
    """The server was still making it (then it is cancelled)."""
    had_audio: bool
    """Some of its audio had come (an answer with none has nothing to truncate)."""
    heard: int = 0
    """Samples (24 kHz) of it the listener heard."""


def _strategy(turns: TurnMode, client) -> Turns:
    if turns == TurnMode.PUSH_TO_TALK:
        return PushToTalk(client, client.models)
    if turns.by_server:
        return ServerVAD(client, semantic=turns.semantic)
    return ClientVAD(client, client.models, semantic=turns.semantic)


class TalkClient(TalkLoop[AnswerCut]):
    """The turn-based talk: microphone to session to speaker, with turns and barge-in."""

    playout_s = 0.3

    def __init__(self, transport, source, speaker: Speaker, options: TalkOptions, view, log,
                 models: TurnModels | None = None) -> None:
        state = TalkState(options.turns, view, realtime_speaker=speaker.realtime, notes=lambda note: log.write("note", note))
        super().__init__(source, speaker, view, state, echo_gate=options.echo_gate, models=models)
        self.transport = transport
        self.options = options
        self.log = log
        self.dialect: dialects.GA = dialects.GA()
        self.strategy: Turns = _strategy(options.turns, self)
        self.awaiting_answer = False
        self.responding = False
        self.answer_item: str | None = None
        self.muted_item: str | None = None
        self.playing: Playing | None = None
        """The current answer's audio on the speaker (None until its first audio)."""
        self._next_audio_starts = True
        """The next audio is a new answer's first (one ended, or the next has begun)."""
        self._commit_at: float | None = None
        self._greeted = asyncio.Event()
        self._confirmed = asyncio.Event()
        self._server_detects_turns = False
        self._started = False
        self._early_errors: list[str] = []
        """Errors before the session started: a refusal, if the server then closes."""

    async def send(self, event: dict) -> None:
        """Send an event to the session, writing it to the event log first."""
        self.log.write("out", event)
        await self.transport.send(event)

    # ---- setup and main loop -------------------------------------------------------------

    async def _connect(self) -> asyncio.Task:
        await self.transport.open()
        return asyncio.create_task(self._receive())

    async def _prepare(self, receiving: asyncio.Task) -> None:
        """The server's greeting (none: vLLM-Omni's legacy path), the session asked for, and
        whether the server took the turn detection asked."""
        if not await self._until(self._greeted, receiving, _GREETING_SECONDS):
            self.dialect = dialects.Legacy()
        o = self.options
        await self.send(self.dialect.session_update(turn_detection=self.strategy.detection, instructions=o.instructions,
                                                    voice=o.voice, model=o.model))
        confirmed = self.dialect.may_detect_turns and await self._until(self._confirmed, receiving, _CONFIRM_SECONDS)
        if self.strategy.server_vad:
            self._check_server_vad(confirmed)

    def _parts(self) -> list[Coroutine]:
        parts = [self._listen(), self._keys(), self._follow_playback()]
        if self.options.answer_timeout is not None:
            parts.append(self._watch_answers(self.options.answer_timeout))
        return parts

    async def _leaving(self) -> None:
        for event in self.dialect.goodbye():
            try:
                await self.send(event)
            except Exception:  # noqa: BLE001 - the connection may already be gone at the end
                pass

    async def _disconnect(self, receiving: asyncio.Task) -> None:
        receiving.cancel()
        await asyncio.gather(receiving, return_exceptions=True)
        await self.transport.close()

    async def _until(self, flag: asyncio.Event, receiving: asyncio.Task, seconds: float) -> bool:
        """Wait up to `seconds` for `flag`; a connection that ends meanwhile ends the talk, with
        the server's own words when it refused the session."""
        waiting = asyncio.create_task(flag.wait())
        try:
            await asyncio.wait([waiting, receiving], timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if not receiving.done():
            return flag.is_set()
        failure = receiving.exception()
        if self._early_errors:
            raise ServerError(f"the server refused the session: {self._early_errors[-1]}") from failure
        raise failure or ServerError("the server closed the realtime connection before the session started")

    def _check_server_vad(self, confirmed: bool) -> None:
        """`--vad server|semantic` only where the server took it (`session.updated` says so); elsewhere
        turns are found here, or no turn would ever end."""
        semantic = isinstance(self.strategy, ServerVAD) and self.strategy.semantic  # then Smart Turn here
        instead = "client VAD with Smart Turn" if semantic else "client VAD"
        if not self.dialect.may_detect_turns:
            note = f"the server does not detect turns; using {instead}"
        elif not confirmed:
            note = f"the server did not confirm turn detection; using {instead}"
        elif not self._server_detects_turns:
            note = f"the server does not detect turns; using {instead}"
        else:
            return
        self.strategy = ClientVAD(self, self.models, semantic=semantic)
        self.state.turns = TurnMode.SMART if semantic else TurnMode.CLIENT
        self.view.note(note)

    def _session_ready(self) -> None:
        """From here on a server's error is part of the conversation, shown as it comes, and
        the user is heard."""
        self._started = True
        super()._session_ready()
        for text in self._early_errors:
            self.view.problem(text)
        self._early_errors.clear()

    def _answering(self) -> bool:
        return self.awaiting_answer or self.responding

    def _no_answer(self) -> OmniError:
        if self.errors:
            return ServerError(f"the server sent no answer: {self.errors[-1]}")
        if not self.asked:
            who = "the server" if self.strategy.server_vad else "omni"
            return OmniError(f"{who} heard no turn in the input file, so nothing was asked")
        return ServerError(f"the server sent no answer audio for {self.asked} turn{'s' if self.asked > 1 else ''}")

    async def _watch_answers(self, seconds: float) -> None:
        """A sent turn that hears nothing back within `seconds` ends the talk (no silent hang)."""
        while True:
            await asyncio.sleep(min(0.25, seconds / 4))
            heard_at = max(self._commit_at or 0.0, self._last_event_at)
            if self.awaiting_answer and time.monotonic() - heard_at > seconds:
                raise ServerError(f"the server sent nothing for {seconds:g} s after the turn was sent")

    # ---- the user's side -----------------------------------------------------------------

    def toggle_push_to_talk(self) -> None:
        """The talk key was pressed (push-to-talk); carried out in order by the conversation's
        own task. Keys pressed before the session is ready do nothing."""
        if not self.state.ready or not isinstance(self.strategy, PushToTalk):
            return
        if self.mic_muted and not self.strategy.on:
            self.state.tell("the mic is muted: press m to unmute")
            return
        pressed_at = time.monotonic()
        self._pressed.put_nowait(lambda: self._toggle(pressed_at))

    async def _toggle(self, pressed_at: float) -> None:
        if isinstance(self.strategy, PushToTalk):
            await self.strategy.toggle(pressed_at)

    async def _listen(self) -> None:
        while True:
            frame = await next_heard_frame(self)
            self.recording.heard(len(frame))
            await self.strategy.hear(frame)

    async def append(self, frame: np.ndarray) -> None:
        """Append a microphone frame to the server's input buffer, in the session's dialect."""
        await self.send(self.dialect.append(frame))

    def recorded_at(self, heard_ms: float) -> float:
        """When the microphone recorded the audio `heard_ms` into all it has heard."""
        return self.recording.recorded_at(heard_ms)

    def begin_turn(self) -> None:
        """The user's turn began: a key, or speech heard."""
        self.user_speaking = True
        self.state.turn_started()

    def skip_turn(self) -> None:
        """A push-to-talk turn with no speech in it: dropped, nothing asked."""
        self.user_speaking = False
        self.state.turn_skipped()

    async def ask(self, speech_end_at: float, *, by_key: bool = False) -> None:
        """The user's turn is over: commit it and ask for the answer. `speech_end_at`: the key
        press that sent it (`by_key`) or the end of speech, where the user's wait begins."""
        self.user_speaking = False
        for event in self.dialect.ask():
            await self.send(event)
        self.responding = self.responding or self.dialect.commit_starts_answer
        self._commit_at = time.monotonic()
        self.awaiting_answer = True
        self.asked += 1
        self.state.asked(speech_end_at, by_key)

    def _played(self) -> int:
        """Samples (24 kHz) of the current answer the listener has heard."""
        return self.playing.played(self.speaker) if self.playing is not None else 0

    def _answer_to_cut(self) -> AnswerCut | None:
        audible = self.speaker.buffered_seconds > 0
        if not (audible or self.responding) or (self.answer_item is None and self.dialect.interruptible):
            return None
        return AnswerCut(self.answer_item, self.responding, self.playing is not None and self.playing.samples > 0)

    async def _cut_from_speaker(self, answer: AnswerCut) -> int:
        answer.heard = self._played() if answer.had_audio else 0
        self.speaker.flush()
        self.muted_item = answer.item
        return answer.heard

    async def _cut_on_server(self, answer: AnswerCut, *, cancel: bool) -> None:
        if not self.dialect.interruptible:
            return  # no cancel or truncate on that path: flushing the speaker is all there is
        if answer.responding and cancel:
            await self.send({"type": "response.cancel"})
        if answer.had_audio:
            await self.send({"type": "conversation.item.truncate", "item_id": answer.item,
                             "content_index": 0, "audio_end_ms": answer.heard * 1000 // SPEECH_RATE})

    # ---- the server's side ---------------------------------------------------------------

    async def _receive(self) -> None:
        async for event in self.transport.events():
            self._last_event_at = time.monotonic()
            self.log.write("in", event)
            heard = dialects.read(event)
            match heard.kind:
                case "audio":
                    self._play(heard)
                case "answer_text" if heard.item_id is None or heard.item_id != self.muted_item:
                    self.state.answer_text(heard.text)
                case "user_text":
                    self.state.user_text(heard.text)
                case "response_started":
                    self.responding = True
                case "answer_item":
                    self.answer_item = heard.item_id
                    self.playing = None
                    self.state.answer_started()
                case "response_done":
                    self._answer_finished(heard.status, cut_off=self.muted_item is not None and _answer_id(event) == self.muted_item)
                case "audio_done" if not self.dialect.interruptible:  # the legacy path has no response.done
                    self._answer_finished("completed", cut_off=False)
                case "session" | "session_updated":
                    self._greeted.set()
                    self._server_detects_turns = heard.detects_turns
                    if heard.kind == "session_updated":
                        self._confirmed.set()
                case "speech_started":
                    self.begin_turn()
                    await self.barge_in(BargeIn.SERVER)  # server VAD cancels the answer by itself
                case "speech_stopped":
                    self.user_speaking = False
                    self._commit_at = heard_at = time.monotonic()
                    self.awaiting_answer = True
                    self.asked += 1
                    self.state.asked(self._speech_end_at(heard.audio_end_ms, heard_at), by_key=False)
                case "error":
                    self.errors.append(heard.text)
                    if not self._started:
                        self._early_errors.append(heard.text)
                        self._confirmed.set()  # the update's answer, when one was sent
                    elif _no_audio(heard.text):
                        self.state.server_got_no_audio()
                    else:
                        self.view.problem(heard.text)
                    if _no_audio(heard.text):
                        self.awaiting_answer = False

    def _speech_end_at(self, audio_end_ms: int | None, heard_at: float) -> float:
        """When the speech the server heard ended: its position in the audio appended (all that was
        heard); without one, the default silence of server VAD before the server said so."""
        if audio_end_ms is None:
            return heard_at - ServerVAD.silence_ms / 1000
        return self.recording.recorded_at(audio_end_ms)

    def _answer_finished(self, status: str | None, *, cut_off: bool) -> None:
        """The server is done with an answer; one the user cut off was closed when they did."""
        self.responding = False
        self._next_audio_starts = True
        if not cut_off:
            self.awaiting_answer = False
            self._report_playback(self.playing)  # audio heard since the last poll counts before the answer closes
            self.state.answer_done(status, self.speaker.buffered_seconds)

    async def _follow_playback(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            self._report_playback(self.playing)

    def _play(self, heard: dialects.Heard) -> None:
        if heard.item_id is not None and heard.item_id == self.muted_item:
            return  # the rest of an interrupted answer
        if self.playing is None or self._next_audio_starts:
            self._next_audio_starts = False
            self.playing = Playing.after(self.speaker, None, heard.item_id)
        self._to_speaker(self.playing, heard.pcm, heard.rate)
        self._report_playback(self.playing)


def _answer_id(event: dict) -> str | None:
    """The item a `response.done` finished (its first output), if it names one."""
    output = (event.get("response") or {}).get("output") or [{}]
    return output[0].get("id") if isinstance(output[0], dict) else None


def _no_audio(error: str) -> bool:
    """A server's way of saying a commit held no audio (omni's, OpenAI's)."""
    return "buffer is empty" in error or "buffer too small" in error
