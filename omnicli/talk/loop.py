"""What both lanes of `omni talk` share: the microphone and speaker started and stopped around a
session, the state the view draws, mute, the echo gate, the tasks of one conversation (any that
fails ends it, raised to the caller), and how a headless talk (`--input-file`) knows it is over.

A lane (`client.TalkClient`, turn-based; `duplex.client.DuplexTalkClient`, full duplex) opens its
session, hears the microphone's frames, reads the server's events and plays the answers.

Barge-in has one entry, `TalkLoop.barge_in`, whatever stopped the answer (Esc, the user's voice,
the server): the lane takes the answer off the speaker and says how much of it was heard, the view
is told, and the lane tells its server, with a cancel unless the server stopped it itself."""

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from typing import Generic, TypeVar

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import pcm16_to_float, resample
from omnicli.errors import OmniError
from omnicli.talk.echo_gate import EchoGate
from omnicli.talk.latency import RecordingClock
from omnicli.talk.playing import Playing
from omnicli.talk.state import TalkState
from omnicli.turns.models import TurnModels
from omnicli.turns.talk_modes import BargeIn

POLL_SECONDS = 0.05
"""How often a waiting loop looks again (the speaker's progress, the end of a headless talk)."""
Cut = TypeVar("Cut")
"""What a lane keeps of an answer being cut: the speaker's and the server's side of it."""
_QUIET_SECONDS = 1.5
"""Headless: the talk is over once the file is spoken, the answers played, and the server quiet this long."""


class TalkLoop(ABC, Generic[Cut]):
    """One conversation between a microphone, a realtime session and a speaker; a lane fills in the session's side."""

    playout_s = 0.0
    """Headless: how long the device is given, once everything is played, to play out its own buffer."""

    def __init__(self, source, speaker, view, state: TalkState, *, echo_gate: bool, models: TurnModels | None) -> None:
        """`models`: the turn-taking models this process shares (a talk alone makes its own)."""
        self.models = models or TurnModels()
        self.source = source
        self.speaker = speaker
        self.view = view
        self.state = state
        """What the user sees; `state.timings` holds each turn's wait."""
        view.show(state)
        self.said: list[np.ndarray] = []
        """Everything the assistant said (for --output-file), at 24 kHz."""
        self.errors: list[str] = []
        self.asked = 0
        """Turns sent to the server (committed here, or ended by its turn detection)."""
        self.mic_muted = False
        self.user_speaking = False
        self.echo = EchoGate(echo_gate)
        self.recording = RecordingClock(SPEECH_RATE)
        """Where each heard frame was recorded: turn ends found in the audio are timed on it."""
        self._last_event_at = time.monotonic()
        self._pressed: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        """What the keys pressed asked for, carried out in order by the conversation's own task."""

    def toggle_mute(self) -> None:
        """m: the microphone is heard as silence until pressed again."""
        if self.state.ready:
            self.mic_muted = not self.mic_muted
            self.state.set_muted(self.mic_muted)

    def stop_answer(self) -> None:
        """Esc: the answer stops where the listener is, and no turn begins."""
        if self.state.ready:
            self._pressed.put_nowait(lambda: self.barge_in(BargeIn.KEY))

    async def barge_in(self, cause: BargeIn) -> None:
        """Stop the answer where the listener is: off the speaker, the view told how much of it was
        heard, the server told (a cancel unless `cause` is the server's own). Nothing to stop: nothing."""
        answer = self._answer_to_cut()
        if answer is None:
            return
        heard = await self._cut_from_speaker(answer)
        self.state.cut_off(heard)
        await self._cut_on_server(answer, cancel=cause != BargeIn.SERVER)

    async def _keys(self) -> None:
        """Carry out what the keys asked for, one after another."""
        while True:
            action = await self._pressed.get()
            await action()

    async def run(self, stop: asyncio.Event) -> None:
        """Talk until `stop` (or the end of a headless file); a failure of any part ends the
        conversation and is raised here."""
        receiving = await self._connect()
        tasks: list[asyncio.Task] = []
        try:
            await self._prepare(receiving)
            self._session_ready()
            self.speaker.start()  # after the models loaded: a busy CPU makes the device underrun
            await self.source.start()
            tasks += [asyncio.create_task(part) for part in self._parts()]
            tasks.append(asyncio.create_task(stop.wait()))
            finished = getattr(self.source, "finished", None)
            if finished is not None:
                tasks.append(asyncio.create_task(self._end_after_file(finished, stop)))
            done, _ = await asyncio.wait([receiving, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if (failure := task.exception()) is not None:
                    raise failure
        finally:
            await self._leaving()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.source.stop()
            await self._disconnect(receiving)

    async def _end_after_file(self, finished: asyncio.Event, stop: asyncio.Event) -> None:
        """Headless: once the file has been spoken and the last answer heard, we are done; a
        talk that got no answer at all failed."""
        await finished.wait()
        while (self._answering() or self.user_speaking or self.speaker.buffered_seconds > 0
               or not self.source.frames.empty() or time.monotonic() - self._last_event_at < _QUIET_SECONDS):
            await asyncio.sleep(POLL_SECONDS)
        if not self._answered():
            raise self._no_answer()
        await asyncio.sleep(self.playout_s)
        stop.set()

    def _session_ready(self) -> None:
        """The session is open: the user is heard and keys act from here on."""
        self.state.session_ready()

    def _to_speaker(self, playing: Playing, pcm: bytes, rate: int) -> None:
        """A piece of `playing`'s audio (PCM16 at `rate`) to the speaker, the echo gate, what
        was said and the view."""
        samples = resample(pcm16_to_float(pcm), rate, SPEECH_RATE)
        playing.samples += len(samples)
        self.echo.played(samples)
        self.said.append(samples)
        self.state.answer_audio(len(samples))
        self.speaker.write(samples)

    def _report_playback(self, playing: Playing | None) -> None:
        """Tell the view where the speaker is in `playing`, the answer on it (if any): an answer
        is heard from its first played sample and is over once it has played out."""
        if playing is not None:
            self.state.playback(playing.played(self.speaker), self.speaker.buffered_seconds, self.speaker.underruns)

    # ---- what a lane provides ------------------------------------------------------------

    @abstractmethod
    async def _connect(self) -> asyncio.Task:
        """Open the session; the task that reads its events."""

    @abstractmethod
    async def _prepare(self, receiving: asyncio.Task) -> None:
        """What the session needs before the user is heard (its greeting, its configuration)."""

    @abstractmethod
    def _parts(self) -> list[Coroutine]:
        """The lane's own tasks for the conversation (hearing the microphone, following the speaker, ...)."""

    @abstractmethod
    async def _leaving(self) -> None:
        """The conversation ends: what the session is told first."""

    @abstractmethod
    async def _disconnect(self, receiving: asyncio.Task) -> None:
        """Close the session and stop reading its events."""

    @abstractmethod
    def _answer_to_cut(self) -> Cut | None:
        """What a barge-in would stop now, as the lane keeps it; None when nothing is playing or on its way."""

    @abstractmethod
    async def _cut_from_speaker(self, answer: Cut) -> int:
        """Drop what is not yet heard of `answer` from the speaker; the samples (24 kHz) of it heard."""

    @abstractmethod
    async def _cut_on_server(self, answer: Cut, *, cancel: bool) -> None:
        """Tell the server the answer was cut where it was heard, and to stop making it if `cancel`."""

    @abstractmethod
    def _answering(self) -> bool:
        """An answer is asked for or under way."""

    def _answered(self) -> bool:
        """The talk got an answer (a headless talk without one failed)."""
        return bool(self.said)

    @abstractmethod
    def _no_answer(self) -> OmniError:
        """Why a headless talk got no answer, in the user's words."""
