"""Where a user's turn ends, decided in one place: a pause of silence (server_vad), or a pause that
Smart Turn and then the words heard so far (turns/text_turn.py) call the end (semantic_vad); words
that read only maybe finished end the turn where the silence rule would, not sooner. A
semantic turn end is decided while the audio keeps coming: it waits for the answer begun on the
words heard early, and the voice coming back first keeps the turn whole. Smart Turn is asked
beside Whisper's early transcript when it can be (Whisper leaves part of two cores idle), else
after that answer. Positions are milliseconds of audio heard since turn detection was
(re)configured, as OpenAI's `audio_start_ms`/`audio_end_ms` count them."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.engine.base import Engine
from omnicli.errors import OmniError
from omnicli.turns.early_transcript import EarlyTranscriber
from omnicli.turns.heard_clock import HeardClock
from omnicli.turns.models import TurnModels
from omnicli.turns.modes import SILENCE_RULE_MS, Detection
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.text_turn import Reading
from omnicli.turns.vad import EAGERNESS, TurnDetector, TurnEvent

log = logging.getLogger("omni")

SEMANTIC_PADDING_MS = 300
"""semantic_vad has no `prefix_padding_ms`; its turns keep server_vad's default."""
_ANSWER_WAIT_S = 1.0
"""A turn end decided late waits at most this much audio for the answer begun on its words (time
for its first piece): meanwhile no silence is counted towards the ceiling."""
_RESUMING_WAIT_S = 0.2
"""...and, should the voice be starting again as it is decided, at most this much to tell the
voice coming back (96 ms of it) from a click or a breath."""


class TurnEnd:
    """Decides where a session's user turns start and end, from the audio heard and the words heard early."""

    def __init__(self, engine: Engine, scheduler: AnswerScheduler, models: TurnModels, lock: asyncio.Lock,
                 on_late_turns: Callable[[list[TurnEvent]], Awaitable[None]],
                 pending: Callable[[], bytes | bytearray]) -> None:
        """Whether a pause ends the turn (semantic_vad with the words check) is decided while more
        audio comes in: `heard` returns without it; Smart Turn is asked (`_ends_turn`: beside
        Whisper, or once the answer begun on the words heard is ready, which could not play any
        sooner), the words are read after that answer, and `on_late_turns` gets the turns that
        follow, under `lock` (the session's own: no event is carried out meanwhile). Should the
        voice come back first, the pause was inside the turn, which goes on: a sentence with a
        pause in it is not cut for want of an answer. `pending`: the audio not yet committed."""
        self.models = models
        self.early = EarlyTranscriber(engine, scheduler, models)
        """The one path by which the words are heard before the turn is committed."""
        self.early.on_heard = self._heard_early
        self.early.on_partial = self._heard_partial
        self._pending = pending
        self.heard_ms = 0
        """Audio heard since turn detection was (re)configured."""
        self.clock = HeardClock(lambda: self.heard_ms)
        """What a turn end's waits are measured in: the audio heard meanwhile."""
        self._detection: dict | None = None
        self.detector: TurnDetector | None = None
        self.read_turns = True
        """semantic_vad (but eagerness high): a turn Smart Turn ends must also read finished."""
        self._tell: Callable[..., Awaitable[None]] | None = None
        self._lock, self._on_late_turns = lock, on_late_turns
        self._deciding: asyncio.Task | None = None
        """A pause being judged: waiting for its answer, then Smart Turn and the words."""
        self._judging: asyncio.Future | None = None
        """Smart Turn asked about that pause beside the early transcript."""

    def on_heard(self, tell: Callable[..., Awaitable[None]]) -> None:
        """`tell(transcript, begin=...)` gets each transcript heard before a commit, as it is
        ready: the turn heard in a pause (`begin`: an answer may be begun on it), or the words
        so far while the user still speaks (not `begin`: to be read only)."""
        self._tell = tell

    @property
    def detecting(self) -> dict | None:
        """The session's turn detection (None: the client commits)."""
        return self._detection

    @property
    def deciding(self) -> bool:
        """A pause is being judged (semantic_vad)."""
        return self._deciding is not None

    async def _heard_early(self, transcript: str) -> None:
        """An early transcript is ready: the thinker may read the turn ahead, and begin its answer.
        A semantic turn end waits for that before it is judged (`_ends_turn`); Smart Turn, if asked
        beside the transcript, ends first, so the answer is not begun beside it."""
        if self._tell is not None:
            if self._judging is not None:
                await asyncio.wait([self._judging])
            await self._tell(transcript, begin=True)

    async def _heard_partial(self, transcript: str) -> None:
        """The words so far, heard while the user still speaks: the thinker may read them."""
        if self._tell is not None:
            await self._tell(transcript, begin=False)

    async def _reads(self, transcript: str) -> Reading:
        """How `transcript` reads (turns/text_turn.py); no words read finished: the audio decides."""
        if not transcript.strip():
            return Reading.FINISHED
        try:
            return await asyncio.to_thread(self.models.words.reading, transcript)
        except (OmniError, RuntimeError):  # loaded with the detector; should it fail now, the audio decides
            return Reading.FINISHED

    def detect_turns(self, detection: dict | None) -> None:
        """(Re)configure turn detection (None: the client commits); positions count from here."""
        self.drop_turn_end()
        self._detection = detection
        self.detector = None

    def drop_turn_end(self) -> None:
        """The client committed or cleared the turn itself (or the detector goes): a turn end still
        being decided is moot, and what follows is a new turn."""
        if self._deciding is not None:
            self._deciding.cancel()
            self._deciding = None
            if self.detector is not None:
                self.detector.end_turn()

    @property
    def speaking(self) -> bool:
        """Whether turn detection hears the user speaking now."""
        return self.detector is not None and self.detector.speaking

    def hear(self, samples: np.ndarray) -> tuple[list[str], list[TurnEvent]]:
        """The early transcriber's verdicts on `samples` and the turns detection hears in them;
        CPU work, for a worker thread."""
        verdicts = self.early.pauses(samples)
        if self._detection is None:
            return verdicts, []
        if self.detector is None:
            self.detector = self._new_detector(self._detection)
            self.heard_ms = 0
        turns = self.detector.feed(samples)
        self.heard_ms += len(samples) * 1000 // SPEECH_RATE
        return verdicts, turns

    async def heard(self, verdicts: list[str], turns: list[TurnEvent]) -> list[TurnEvent]:
        """On the loop, after `hear`: the early transcript acts on the pauses, the voice coming back
        calls off a turn end being decided, and a pause still to be judged is taken off the turns."""
        self.early.act(verdicts, self._pending())
        self.clock.tick()
        if self._deciding is not None and self.detector is not None and self.detector.resumed:
            self._deciding.cancel()  # the user went on before the turn end was decided
            self._deciding = None
            turns += await self._confirm(Reading.UNFINISHED)
        return self._decide(turns)

    def _decide(self, turns: list[TurnEvent]) -> list[TurnEvent]:
        """`turns`, a stop pending at their end taken off to be decided later."""
        if turns and turns[-1].pending:
            turns.pop()
            self._deciding = asyncio.create_task(self._decide_late())
        return turns

    async def _decide_late(self) -> None:
        try:
            reading, probability = await self._ends_turn()
            if reading is Reading.FINISHED:
                await self._unless_resuming()
            async with self._lock:
                if self._deciding is not asyncio.current_task():
                    return  # moot meanwhile: the voice came back (`append`), or the client took the turn
                self._deciding = None
                turns = self._decide(await self._confirm(reading, probability))
                await self._on_late_turns(turns)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - nobody awaits this task: the session must hear of no crash
            log.exception("realtime: deciding a turn end failed")

    async def _confirm(self, reading: Reading, probability: float | None = None) -> list[TurnEvent]:
        """The pending stop settled: the stop if the turn ended there (words `reading` finished),
        or once the silence rule's silence is heard (maybe finished: a sentence's first half
        may read so), then what the audio held behind it holds (CPU work: Smart Turn may be
        asked again)."""
        assert self.detector is not None
        maybe = reading is Reading.MAYBE_FINISHED
        return await asyncio.to_thread(self.detector.confirm, reading is Reading.FINISHED, probability,
                                       ends_after_ms=SILENCE_RULE_MS if maybe else None)

    async def _unless_resuming(self) -> None:
        """The voice may be starting again just as the turn end is decided: the next appends tell
        (`append` calls the decision off should it be the voice coming back)."""
        detector = self.detector
        assert detector is not None
        await self.clock.wait(lambda: not detector.resuming, _RESUMING_WAIT_S)

    async def _ends_turn(self) -> tuple[Reading, float]:
        """Did the turn end at the pending pause? Smart Turn is asked at once while Whisper is
        still hearing the pause: beside it, it is nearly free (both together end well before the two
        one after the other would), and the answer is begun once both are
        done. Else it waits for the answer begun on the early transcript (the one a commit waits for
        anyway): that answer is what the listener waits for, a commit could not play it sooner, and
        a model beside it would slow it. The words must read finished too, and are read last; not
        where the pause has lasted as long as the silence rule waits by then (a slow answer): that
        rule would end the turn there whatever the words. Returns how the turn reads (unfinished
        where Smart Turn says so) and Smart Turn's verdict."""
        assert self.detector is not None
        detector = self.detector
        judging = None
        if self.early.hearing:
            judging = self._judging = asyncio.ensure_future(asyncio.to_thread(detector.judge))
            judging.add_done_callback(lambda done: done.cancelled() or done.exception())  # unread if called off
        try:
            transcript = await self.early.now(self._pending()) or ""
            told = self.early.told
            if told is not None and told[0] == transcript:  # a turn end is never held up for long by a guess
                await self.clock.wait(told[1].done, _ANSWER_WAIT_S, wake=told[1])
            probability = await (judging or asyncio.to_thread(detector.judge))
        finally:
            self._judging = None
        if probability < detector.complete_at:
            return Reading.UNFINISHED, probability
        if detector.pause_heard_ms >= SILENCE_RULE_MS:
            return Reading.FINISHED, probability  # the silence rule would end it by now: the words could only delay it
        return await self._reads(transcript), probability

    def _new_detector(self, detection: dict) -> TurnDetector:
        if detection["type"] == Detection.SEMANTIC_VAD:
            read_words = self.read_turns and EAGERNESS[detection["eagerness"]].read_words
            if read_words:
                try:
                    self.models.words.load()
                except OmniError as exc:
                    log.warning("semantic_vad without the check that the words read finished: %s", exc)
                    self.read_turns = read_words = False
            return TurnDetector(SPEECH_RATE, self.models, prefix_padding_ms=SEMANTIC_PADDING_MS, semantic=True,
                                eagerness=detection["eagerness"], confirm_stops=read_words)
        return TurnDetector(
            SPEECH_RATE, self.models, threshold=detection["threshold"], silence_ms=detection["silence_duration_ms"],
            prefix_padding_ms=detection["prefix_padding_ms"],
        )

    def close(self) -> None:
        """Stop any turn end being decided and the early transcription (the session ends)."""
        self.drop_turn_end()
        self.early.close()
