"""Hearing the user before they commit: once a short pause follows speech, the pending audio is
transcribed in the background. If the commit that follows added only silence, its transcript is
ready when the answer starts, so the answer does not wait for ASR, and the session lets the
engine read it ahead (`on_heard`: the thinker has the new turn in its cache when the answer is
asked for). New speech before the commit voids the early transcript.

When to start is a trade: a turn that ends by meaning (Smart Turn, first asked
`SEMANTIC_PAUSE_MS` into the pause) wants the transcript started at once, but every pause between
two words then costs a Whisper run that new speech voids, taking the cores from other sessions'
answers when several talk at once. So a transcript starts after `EAGER_PAUSE_MS` only
while the process is otherwise idle (no other early transcript, no answer being made: one
talker, as the session's `AnswerScheduler` says), and after `PAUSE_MS` in any case.

Once the turn is heard, the engine is offered to begin the answer in the pause with any number of
talkers: the embedded thinker does so only where no other answer's first words wait for it (a
guess gives way to an answer asked for meanwhile, and is taken up later by its own).

With one talker and an engine that keeps what it read (`Engine.reads_ahead`), the words are heard
while the user still speaks too, every `PARTIAL_EVERY_MS` of speech, and offered to be read only
(`on_partial`): when the turn ends, the thinker reads just its last words. An early transcript
ready meanwhile is told once that reading is done, so the two never race for the thinker."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import pcm16_to_float, rms
from omnicli.engine.base import Engine
from omnicli.errors import OmniError
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.vad import TurnDetector

log = logging.getLogger("omni")

EAGER_PAUSE_MS = 32
"""One VAD chunk: a semantic turn end (Smart Turn is first asked at 128 ms) waits for the words,
which are then mostly read already, and the decision comes sooner than with a longer wait; a pause
this short inside a sentence is hardly more common than a longer one."""
PAUSE_MS = 200
"""Ahead of a 500 ms-silence turn end, with time for Whisper to finish."""
PARTIAL_EVERY_MS = 600
"""While the user speaks, the words so far are heard this often (see the module's docstring)..."""
PARTIAL_QUIET_BELOW = 0.03
"""...but not while the last 32 ms of audio is this much quieter (RMS) than the loudest 32 ms of the
speech so far: the voice has most likely ended (Silero hears it for 60-170 ms after its last loud
sample), the pause's own transcript will hear the turn whole, and a Whisper run begun there would
only hold it up. The reading comes once the voice is loud again."""
_LEVEL_SAMPLES = SPEECH_RATE * 32 // 1000


def _levels(samples: np.ndarray) -> tuple[float, float]:
    """The loudest and the last RMS level of `samples` in 32 ms pieces, counted from the end."""
    ends = range(len(samples), 0, -_LEVEL_SAMPLES)
    levels = [rms(samples[max(0, end - _LEVEL_SAMPLES):end]) for end in ends] or [0.0]
    return max(levels), levels[0]


STARTED, EAGER, LATE, PARTIAL = "started", "eager", "late", "partial"


class EarlyTranscriber:
    """Transcribes the pending audio in the pauses before a commit, so the turn is heard before it ends."""

    def __init__(self, engine: Engine, scheduler: AnswerScheduler, models: TurnModels) -> None:
        self.engine = engine
        self.scheduler = scheduler
        self.models = models
        self._detector: TurnDetector | None = None
        self._speech_end_ms: int | None = None
        """Where the speech before the current pause ended (None while speaking, or once the
        late pause was reported)."""
        self._partial_from_ms: int | None = None
        """Where the speech was last heard in part from (None while quiet)."""
        self._loudest = 0.0
        """The loudest 32 ms (RMS) of the speech since it started."""
        self._partial: asyncio.Task | None = None
        self.on_partial: Callable[[str], Awaitable[None]] | None = None
        """Told the words heard while the user still speaks, to read only (see the module's docstring)."""
        self._heard: bytes | None = None
        self._task: asyncio.Task | None = None
        self.on_heard: Callable[[str], Awaitable[None]] | None = None
        """Told each early transcript as it is ready (the session lets the engine read it ahead)."""
        self._telling: set[asyncio.Task] = set()
        self.told: tuple[str, asyncio.Task] | None = None
        """The last early transcript `on_heard` was given, and that telling (done once it returned):
        set as the transcript is ready, so whoever waits for it cannot miss it."""
        scheduler.listen(self)

    def pauses(self, samples: np.ndarray) -> list[str]:
        """The VAD's verdicts on an appended piece: speech started, an eager pause, a late one
        (PAUSE_MS of it); CPU work, for a worker thread."""
        if self._detector is None:
            self._detector = TurnDetector(SPEECH_RATE, self.models, silence_ms=EAGER_PAUSE_MS, prefix_padding_ms=0)
        verdicts = []
        for turn in self._detector.feed(samples):
            verdicts.append(STARTED if turn.kind == "started" else EAGER)
            self._speech_end_ms = None if turn.kind == "started" else turn.ms
            self._partial_from_ms = turn.ms if turn.kind == "started" else None
            self._loudest = 0.0
        loudest, level = _levels(samples)
        self._loudest = max(self._loudest, loudest)
        if (self._partial_from_ms is not None and self._detector.heard_ms - self._partial_from_ms >= PARTIAL_EVERY_MS
                and level >= PARTIAL_QUIET_BELOW * self._loudest):
            verdicts.append(PARTIAL)
            self._partial_from_ms = self._detector.heard_ms
        if self._speech_end_ms is not None and self._detector.heard_ms - self._speech_end_ms >= PAUSE_MS:
            verdicts.append(LATE)
            self._speech_end_ms = None
        return verdicts

    def act(self, verdicts: list[str], buffer: bytes | bytearray) -> None:
        """On the loop, after `pauses`: speech voids the early transcript, a pause starts one."""
        for kind in verdicts:
            if kind == STARTED:
                self._void()
            elif kind == PARTIAL:
                if buffer and self._reads_partial():
                    self._partial = asyncio.create_task(self._read_partial(bytes(buffer)))
            elif buffer and self._task is None and (kind == LATE or self.scheduler.idle()):
                self._start(buffer)

    def _reads_partial(self) -> bool:
        """Whether the words so far are worth hearing now: someone reads them, nothing else is
        heard or answered in the process, and no reading of them is under way."""
        return (self.on_partial is not None and self.engine.reads_ahead and self._task is None
                and (self._partial is None or self._partial.done())
                and self.scheduler.idle() and self.scheduler.one_talker())

    async def _read_partial(self, pcm: bytes) -> None:
        """Hear the words so far and offer them to be read, unless the turn was heard meanwhile."""
        try:
            samples = await asyncio.to_thread(pcm16_to_float, pcm)
            text = (await self.engine.transcribe(samples, SPEECH_RATE, quick=True)).text
            if text.strip() and self._task is None and self.on_partial is not None:
                await self.on_partial(text)
        except OmniError:  # reading ahead is a guess the engine may refuse; the turn is heard the usual way
            log.debug("reading the words heard so far failed", exc_info=True)
        except Exception:  # noqa: BLE001 - nor does a bug end the session, but it is not hidden
            log.warning("reading the words heard so far failed", exc_info=True)

    def _start(self, buffer: bytes | bytearray) -> None:
        self._heard = bytes(buffer)
        self._task = asyncio.create_task(self._transcribe(self._heard))

    @property
    def hearing(self) -> bool:
        """An early transcript is being made."""
        return self._task is not None and not self._task.done()

    async def now(self, buffer: bytes | bytearray) -> str | None:
        """The transcript of the speech in `buffer` (started now unless already under way), left
        in place for the commit that may follow."""
        if self._task is None:
            if not buffer:
                return None
            self._start(buffer)
        assert self._task is not None
        return await asyncio.shield(self._task)

    async def _transcribe(self, pcm: bytes) -> str | None:
        with self.scheduler.transcribing():
            return await self._transcribed(pcm)

    async def _transcribed(self, pcm: bytes) -> str | None:
        try:
            samples = await asyncio.to_thread(pcm16_to_float, pcm)
            text = (await self.engine.transcribe(samples, SPEECH_RATE, quick=True)).text
            if text.strip() and self.on_heard is not None and self._task is asyncio.current_task():
                # (not once a commit took it: the answer is already reading this turn itself)
                told = asyncio.create_task(self._tell(self.on_heard, text, self._partial))
                self.told = (text, told)
                self._telling.add(told)
                told.add_done_callback(self._telling.discard)
            return text
        except OmniError:  # no early transcript: the turn is heard the usual way
            log.debug("hearing the turn early failed", exc_info=True)
            return None
        except Exception:  # noqa: BLE001 - nor does a bug end the session, but it is not hidden
            log.warning("hearing the turn early failed", exc_info=True)
            return None

    @staticmethod
    async def _tell(on_heard: Callable[[str], Awaitable[None]], text: str, reading: asyncio.Task | None) -> None:
        """`on_heard(text)`, once a reading of the words heard in part is done with the thinker."""
        try:
            if reading is not None:
                await asyncio.wait([reading])
            await on_heard(text)
        except OmniError:  # reading ahead is a guess the engine may refuse; the answer reads the turn itself
            log.debug("reading the early transcript ahead failed", exc_info=True)
        except Exception:  # noqa: BLE001 - nor does a bug end the session, but it is not hidden
            log.warning("reading the early transcript ahead failed", exc_info=True)

    async def take(self, committed: bytes) -> str | None:
        """The transcript of `committed`, if it was heard early and only silence came after."""
        task, heard = self._task, self._heard
        if task is None or heard is None or not committed.startswith(heard):
            self.reset()  # a stale transcript, and the guesses made on it, are called off
            return None
        self.reset(cancel=False)
        return await task

    def reset(self, cancel: bool = True) -> None:
        """Forget the speech heard so far (a commit took it, or it was cleared): its pause is not
        reported late either, so a turn committed early in it (semantic turns) is not heard again
        as the silence after it, beside its answer."""
        self._void(cancel)
        self._speech_end_ms = None

    def close(self) -> None:
        """The session ends: forget its speech, and it no longer counts as a talker."""
        self.reset()
        if self._partial is not None:
            self._partial.cancel()
        self.scheduler.leave(self)

    def _void(self, cancel: bool = True) -> None:
        """Cancelled (new speech, a clear), what was heard is stale: its transcript, and what the
        engine was offered on it (a thinker writing the answer ahead stops at its next token).
        Not cancelled, a commit took it: what the engine was offered is that turn's answer now,
        which speech or a clear after the commit must not call off."""
        if cancel:
            for task in [self._task, *self._telling]:
                if task is not None:
                    task.cancel()
        else:
            self._telling = set()
        self._task, self._heard = None, None
