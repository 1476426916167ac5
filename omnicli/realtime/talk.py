"""The `omni talk` loop: voice in, turns committed, the answer played, interruptions honoured.

    source (mic or file) -> [echo gate] -> turns (push-to-talk | client VAD | server VAD)
        -> input_audio_buffer.append / commit + response.create -> session
    session -> response.output_audio.delta -> speaker (jitter buffer, device rate)

Barge-in (`interrupt`, the one entry point): when the user speaks over the answer, playback is
flushed, the response is cancelled, and the answer is truncated to `audio_end_ms` = what the
speaker actually played. Turn strategies live in `turns`, dialect differences in `dialects`.
"""

import asyncio
import time
from dataclasses import dataclass

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import pcm16_to_float, resample
from omnicli.errors import OmniError, ServerError
from omnicli.realtime import dialects
from omnicli.realtime.speakers import Speaker
from omnicli.realtime.turns import ClientVAD, PushToTalk, ServerVAD, Turns

_ECHO_MARGIN = 2.0  # the user must be this much louder than the playback to get through
_QUIET_SECONDS = 1.5  # headless: a busy server may still be reporting on audio it was sent
_GREETING_SECONDS = 1.5
"""A GA server greets with session.created at once; one that stays silent is vLLM-Omni's legacy
(<= 0.30) speech-to-text style path, which wants 16 kHz audio and `commit {final}`."""
_CONFIRM_SECONDS = 5.0
"""How long `--vad server` waits for `session.updated` to learn whether the server took it."""


@dataclass(frozen=True)
class TalkOptions:
    turns: str = "client"  # "ptt", "client" or "server"
    echo_gate: bool = True
    instructions: str | None = None
    voice: str | None = None
    model: str | None = None
    answer_timeout: float | None = None
    """Seconds a sent turn may wait with nothing from the server (a server's read timeout)."""


def _rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples**2))) if len(samples) else 0.0


class TalkClient:
    def __init__(self, transport, source, speaker: Speaker, options: TalkOptions, view, log) -> None:
        self.transport = transport
        self.source = source
        self.speaker = speaker
        self.options = options
        self.view = view
        self.log = log
        self.said: list[np.ndarray] = []
        """Everything the assistant said (for --output-file)."""
        self.turns: list[dict] = []
        """Per turn: seconds from end of speech and from commit to the first answer audio."""
        self.dialect: dialects.GA = dialects.GA()
        strategies: dict[str, type[Turns]] = {"ptt": PushToTalk, "server": ServerVAD, "client": ClientVAD}
        self.strategy: Turns = strategies[options.turns](self)
        self.user_speaking = False
        self.awaiting_answer = False
        self.responding = False
        self.answer_item: str | None = None
        self.muted_item: str | None = None
        self._answer_mark = 0
        self._answer_samples = 0
        self._first_audio_seen = False
        self._last_event_at = time.monotonic()
        self._playback_rms = 0.0
        self._commit_at: float | None = None
        self._speech_end_at: float | None = None
        self._greeted = asyncio.Event()
        self._confirmed = asyncio.Event()
        self._server_detects_turns = False
        self._started = False
        self._early_errors: list[str] = []
        """Errors before the session started: a refusal, if the server then closes."""
        self.errors: list[str] = []
        self.asked = 0
        """Turns sent to the server (committed by us, or ended by its VAD)."""
        self._toggles: asyncio.Queue[None] = asyncio.Queue()

    async def send(self, event: dict) -> None:
        self.log.write("out", event)
        await self.transport.send(event)

    def show(self, state: str) -> None:
        self.view.set_state(state)

    # ---- setup and main loop -------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Talk until `stop` (or the end of a headless file); a failure of any part ends the
        conversation and is raised here."""
        await self.transport.open()
        receiving = asyncio.create_task(self._receive())
        tasks: list[asyncio.Task] = [receiving]
        try:
            if not await self._until(self._greeted, receiving, _GREETING_SECONDS):
                self.dialect = dialects.Legacy()
            o = self.options
            await self.send(self.dialect.session_update(server_vad=self.strategy.server_vad, instructions=o.instructions,
                                                        voice=o.voice, model=o.model))
            if self.strategy.server_vad:
                await self._check_server_vad(receiving)
            self._start_session()
            self.speaker.start()  # after the models loaded: a busy CPU makes the device underrun
            await self.source.start()
            tasks += [asyncio.create_task(self._listen()), asyncio.create_task(self._keys())]
            finished = getattr(self.source, "finished", None)
            if finished is not None:
                tasks.append(asyncio.create_task(self._end_after_file(finished, stop)))
            if o.answer_timeout is not None:
                tasks.append(asyncio.create_task(self._watch_answers(o.answer_timeout)))
            tasks.append(asyncio.create_task(stop.wait()))
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if (failure := task.exception()) is not None:
                    raise failure
        finally:
            for event in self.dialect.goodbye():
                try:
                    await self.send(event)
                except Exception:  # noqa: BLE001 - the connection may already be gone at the end
                    pass
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.source.stop()
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

    async def _check_server_vad(self, receiving: asyncio.Task) -> None:
        """`--vad server` only where the server took it (`session.updated` says so); elsewhere
        turns are found here, or no turn would ever end."""
        if not self.dialect.may_detect_turns:
            note = "the server does not detect turns; using client VAD"
        elif not await self._until(self._confirmed, receiving, _CONFIRM_SECONDS):
            note = "the server did not confirm turn detection; using client VAD"
        elif not self._server_detects_turns:
            note = "the server does not detect turns; using client VAD"
        else:
            return
        self.strategy = ClientVAD(self)
        self.view.note(note)

    def _start_session(self) -> None:
        """From here on a server's error is part of the conversation, shown as it comes."""
        self._started = True
        for text in self._early_errors:
            self.view.problem(text)
        self._early_errors.clear()

    async def _end_after_file(self, finished: asyncio.Event, stop: asyncio.Event) -> None:
        """Headless: once the file has been spoken and the last answer heard, we are done; a
        talk that got no answer at all failed."""
        await finished.wait()
        while (self.awaiting_answer or self.responding or self.user_speaking or self.speaker.buffered_seconds > 0
               or not self.source.frames.empty() or time.monotonic() - self._last_event_at < _QUIET_SECONDS):
            await asyncio.sleep(0.05)
        if not self.said:
            raise self._no_answer()
        await asyncio.sleep(0.3)  # the device plays out its own buffer
        stop.set()

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
        """Enter was pressed (push-to-talk); carried out in order by the conversation's own task."""
        self._toggles.put_nowait(None)

    async def _keys(self) -> None:
        while True:
            await self._toggles.get()
            if isinstance(self.strategy, PushToTalk):
                await self.strategy.toggle()

    async def _listen(self) -> None:
        while True:
            frame = await self.source.frames.get()
            if self._gated(frame):
                frame = np.zeros_like(frame)
            await self.strategy.hear(frame)

    def _gated(self, frame: np.ndarray) -> bool:
        """Without headphones the mic hears the answer: let it through only when the user is
        clearly louder than what is playing."""
        if not self.options.echo_gate or self.speaker.buffered_seconds <= 0:
            return False
        return _rms(frame) < _ECHO_MARGIN * self._playback_rms

    async def append(self, frame: np.ndarray) -> None:
        await self.send(self.dialect.append(frame))

    async def ask(self, speech_end_at: float) -> None:
        """The user's turn is over: commit it and ask for the answer."""
        self._speech_end_at = speech_end_at
        for event in self.dialect.ask():
            await self.send(event)
        self.responding = self.responding or self.dialect.commit_starts_answer
        self._commit_at = time.monotonic()
        self.awaiting_answer = True
        self.asked += 1
        self.show("thinking")

    async def interrupt(self) -> None:
        """The user speaks over the answer: stop it where the listener stopped hearing it."""
        audible = self.speaker.buffered_seconds > 0
        if not (audible or self.responding) or (self.answer_item is None and self.dialect.interruptible):
            return
        played = (self.speaker.played_frames - self._answer_mark) * SPEECH_RATE / self.speaker.device_rate
        played = int(min(max(played, 0), self._answer_samples))
        self.speaker.flush()
        if not self.dialect.interruptible:
            return  # no cancel or truncate on that path: flushing the speaker is all there is
        if self.responding and not self.strategy.server_vad:  # server VAD cancels by itself
            await self.send({"type": "response.cancel"})
        await self.send({"type": "conversation.item.truncate", "item_id": self.answer_item,
                         "content_index": 0, "audio_end_ms": played * 1000 // SPEECH_RATE})
        self.muted_item = self.answer_item
        self.show("interrupted")

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
                    self.view.answer_delta(heard.text)
                case "user_text":
                    self.view.heard(heard.text)
                case "response_started":
                    self.responding = True
                case "answer_item":
                    self.answer_item = heard.item_id
                    self._first_audio_seen = False
                    self.view.new_answer()
                case "response_done":
                    self._answer_finished(heard.status)
                case "audio_done" if not self.dialect.interruptible:  # the legacy path has no response.done
                    self._answer_finished("completed")
                case "session" | "session_updated":
                    self._greeted.set()
                    self._server_detects_turns = heard.detects_turns
                    if heard.kind == "session_updated":
                        self._confirmed.set()
                case "speech_started":
                    self.user_speaking = True
                    await self.interrupt()
                case "speech_stopped":
                    self.user_speaking = False
                    self._speech_end_at = self._commit_at = time.monotonic()
                    self.awaiting_answer = True
                    self.asked += 1
                case "error":
                    self.errors.append(heard.text)
                    if not self._started:
                        self._early_errors.append(heard.text)
                        self._confirmed.set()  # the update's answer, when one was sent
                    else:
                        self.view.problem(heard.text)
                    if "buffer is empty" in heard.text:
                        self.awaiting_answer = False

    def _answer_finished(self, status: str | None) -> None:
        self.responding = False
        self.awaiting_answer = False
        self._first_audio_seen = False
        self.view.answer_done(status)
        self.show("listening")

    def _play(self, heard: dialects.Heard) -> None:
        if heard.item_id is not None and heard.item_id == self.muted_item:
            return  # the rest of an interrupted answer
        samples = pcm16_to_float(heard.pcm)
        if heard.rate != SPEECH_RATE:
            samples = resample(samples, heard.rate, SPEECH_RATE)
        if not self._first_audio_seen:
            self._first_audio_seen = True
            now = time.monotonic()
            self._answer_mark = self.speaker.played_frames + int(self.speaker.buffered_seconds * self.speaker.device_rate)
            self._answer_samples = 0
            turn = {"from_commit": now - self._commit_at if self._commit_at else None,
                    "from_speech_end": now - self._speech_end_at if self._speech_end_at else None}
            self.turns.append(turn)
            if turn["from_speech_end"] is not None:
                self.view.turn_latency(turn["from_speech_end"])
            self.show("speaking")
        self._answer_samples += len(samples)
        self._playback_rms = 0.8 * self._playback_rms + 0.2 * _rms(samples)
        self.said.append(samples)
        self.speaker.write(samples)
