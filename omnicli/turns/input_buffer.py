"""The input audio buffer: PCM16 the client appended and has not committed, and the turns that
turn detection (server_vad: silence; semantic_vad: Smart Turn after a pause, then the words heard
so far, turns/text_turn.py) hears in it. A session lets a semantic turn end be decided while the
audio keeps coming (`InputBuffer`): it waits for the answer begun in the pause, and the voice
coming back first keeps the turn whole. Smart Turn is asked beside Whisper when it can be (Whisper
leaves part of two cores idle), else after that answer.

The CPU work of an append (base64, PCM conversion, both VADs) runs in a worker thread, so a
14 MiB append does not stall other sessions or /health; the session handles one event at a time,
which keeps the order of events. Positions are milliseconds of audio heard since turn detection
was (re)configured, as OpenAI's `audio_start_ms`/`audio_end_ms` count them.
"""

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import pcm16_to_float
from omnicli.engine.base import Engine
from omnicli.errors import EventError, OmniError
from omnicli.turns.early_transcript import EarlyTranscriber
from omnicli.turns.modes import Detection
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.vad import EAGERNESS, TurnDetector, TurnEvent

log = logging.getLogger("omni")

MAX_APPEND_BYTES = 15 * 1024 * 1024
MAX_BUFFER_BYTES = 64 * 1024 * 1024
_B64_SLICE = 4 * 256 * 1024
"""Base64 is decoded this many characters at a time, so the worker thread lets go of the GIL
(and the event loop runs) between slices."""
_KEEP_BETWEEN_TURNS_MS = 200
"""Between turns the buffer keeps a coming turn's prefix padding and this much more."""
_SEMANTIC_PADDING_MS = 300
"""semantic_vad has no `prefix_padding_ms`; its turns keep server_vad's default."""
_ANSWER_WAIT_S = 1.0
"""A turn end decided late waits at most this long for the answer begun on its words (time for its
first piece): meanwhile no silence is counted towards the ceiling."""
_RESUMING_WAIT_S = 0.2
"""...and, should the voice be starting again as it is decided, at most this long to tell the
voice coming back (96 ms of it) from a click or a breath."""


def decode_pcm16(audio: str, param: str = "audio") -> bytes:
    """Base64 PCM16 from a client event; CPU work, for a worker thread."""
    if len(audio) > 4 * ((MAX_APPEND_BYTES + 2) // 3):
        raise EventError("one append may carry at most 15 MiB of audio", "audio_too_large", param=param)
    try:
        data = b"".join(base64.b64decode(audio[i:i + _B64_SLICE], validate=True) for i in range(0, len(audio), _B64_SLICE))
    except (binascii.Error, ValueError):
        raise EventError("audio is not valid base64", "invalid_base64", param=param) from None
    if len(data) % 2:
        raise EventError("PCM16 audio must hold whole 2-byte samples", "invalid_audio", param=param)
    return data


@dataclass(frozen=True)
class Committed:
    """A committed turn: its PCM16, the same as float samples, and any transcript heard early."""

    pcm: bytes
    samples: np.ndarray
    transcript: str | None
    """Heard early (before the commit), or None."""


class InputBuffer:
    """A session's uncommitted input audio and the turns that turn detection hears in it."""

    def __init__(self, engine: Engine, lock: asyncio.Lock, on_late_turns: Callable[[list[TurnEvent]], Awaitable[None]],
                 scheduler: AnswerScheduler) -> None:
        """Whether a pause ends the turn (semantic_vad with the words check) is decided while more
        audio comes in: `append` returns without it; Smart Turn is asked (`_ends_turn`: beside
        Whisper, or once the answer begun on the words heard is ready, which could not play any
        sooner), the words are read after that answer, and
        `on_late_turns` gets the turns that follow, under `lock` (the session's own: no event is
        carried out meanwhile). Should the voice come back first, the pause was inside the turn,
        which goes on: a sentence with a pause in it is not cut for want of an answer."""
        self.pcm = bytearray()
        self._start_ms = 0
        """Where `pcm` starts, in the audio heard since turn detection was configured."""
        self._heard_ms = 0
        self._detection: dict | None = None
        self._detector: TurnDetector | None = None
        self._early = EarlyTranscriber(engine, scheduler)
        self._early.on_heard = self._heard_early
        self.read_turns = True
        """semantic_vad (but eagerness high): a turn Smart Turn ends must also read finished."""
        self._tell: Callable[[str], Awaitable[None]] | None = None
        self._told: tuple[str, asyncio.Future] | None = None
        """The transcript the engine was last told, and its telling (done once it was read ahead)."""
        self._lock, self._on_late_turns = lock, on_late_turns
        self._deciding: asyncio.Task | None = None
        """A pause being judged: waiting for its answer, then Smart Turn and the words."""
        self._judging: asyncio.Future | None = None
        """Smart Turn asked about that pause beside the early transcript."""

    def on_heard(self, tell: Callable[[str], Awaitable[None]]) -> None:
        """`tell` gets each transcript heard before a commit, as it is ready."""
        self._tell = tell

    async def _heard_early(self, transcript: str) -> None:
        """An early transcript is ready: the thinker may read the turn ahead, and begin its answer.
        A semantic turn end waits for that before it is judged (`_ends_turn`); Smart Turn, if asked
        beside the transcript, ends first, so the answer is not begun beside it."""
        if self._tell is not None:
            telling = asyncio.get_running_loop().create_future()
            self._told = (transcript, telling)
            try:
                if self._judging is not None:
                    await asyncio.wait([self._judging])
                await self._tell(transcript)
            finally:
                telling.set_result(None)

    @staticmethod
    async def _reads(transcript: str) -> bool:
        """Whether `transcript` reads finished (turns/text_turn.py)."""
        from omnicli.turns.text_turn import reads_finished

        try:
            return not transcript.strip() or await asyncio.to_thread(reads_finished, transcript)
        except (OmniError, RuntimeError):  # loaded with the detector; should it fail now, the audio decides
            return True

    def detect_turns(self, detection: dict | None) -> None:
        """(Re)configure server VAD; positions count from here."""
        self.drop_turn_end()
        self._detection = detection
        self._detector = None

    def drop_turn_end(self) -> None:
        """The client committed or cleared the turn itself (or the detector goes): a turn end still
        being decided is moot, and what follows is a new turn."""
        if self._deciding is not None:
            self._deciding.cancel()
            self._deciding = None
            if self._detector is not None:
                self._detector.end_turn()

    @property
    def speaking(self) -> bool:
        """Whether turn detection hears the user speaking now."""
        return self._detector is not None and self._detector.speaking

    async def append(self, audio: str) -> list[TurnEvent]:
        """Add base64 PCM16; the turns server VAD heard in it (none without turn detection)."""
        verdicts, turns = await asyncio.to_thread(self._append, audio)
        self._early.act(verdicts, self.pcm)
        if self._deciding is not None and self._detector is not None and self._detector.resumed:
            self._deciding.cancel()  # the user went on before the turn end was decided
            self._deciding = None
            turns += await self._confirm(False)
        return self._decide(turns)

    def _decide(self, turns: list[TurnEvent]) -> list[TurnEvent]:
        """`turns`, a stop pending at their end taken off to be decided later."""
        if turns and turns[-1].pending:
            turns.pop()
            self._deciding = asyncio.create_task(self._decide_late())
        return turns

    async def _decide_late(self) -> None:
        try:
            ended, probability = await self._ends_turn()
            if ended:
                await self._unless_resuming()
            async with self._lock:
                if self._deciding is not asyncio.current_task():
                    return  # moot meanwhile: the voice came back (`append`), or the client took the turn
                self._deciding = None
                turns = self._decide(await self._confirm(ended, probability))
                await self._on_late_turns(turns)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - nobody awaits this task: the session must hear of no crash
            log.exception("realtime: deciding a turn end failed")

    async def _confirm(self, ended: bool, probability: float | None = None) -> list[TurnEvent]:
        """The pending stop settled: the stop if the turn ended there, then what the audio held
        behind it holds (CPU work: Smart Turn may be asked again)."""
        assert self._detector is not None
        return await asyncio.to_thread(self._detector.confirm, ended, probability)

    async def _unless_resuming(self) -> None:
        """The voice may be starting again just as the turn end is decided: the next appends tell
        (`append` calls the decision off should it be the voice coming back)."""
        assert self._detector is not None
        loop = asyncio.get_running_loop()
        until = loop.time() + _RESUMING_WAIT_S
        while self._detector.resuming and loop.time() < until:
            await asyncio.sleep(0.01)

    async def _ends_turn(self) -> tuple[bool, float]:
        """Did the turn end at the pending pause? Smart Turn is asked at once while Whisper is
        still hearing the pause: beside it, it is nearly free (both together end well before the two
        one after the other would), and the answer is begun once both are
        done. Else it waits for the answer begun on the early transcript (the one a commit waits for
        anyway): that answer is what the listener waits for, a commit could not play it sooner, and
        a model beside it would slow it. The words must read finished too, and are read last.
        Returns the verdict and Smart Turn's."""
        assert self._detector is not None
        detector = self._detector
        judging = None
        if self._early.hearing:
            judging = self._judging = asyncio.ensure_future(asyncio.to_thread(detector.judge))
            judging.add_done_callback(lambda done: done.cancelled() or done.exception())  # unread if called off
        try:
            transcript = await self._early.now(self.pcm) or ""
            if self._told is not None and self._told[0] == transcript:
                with contextlib.suppress(TimeoutError):  # a turn end is never held up for long by a guess
                    await asyncio.wait_for(asyncio.shield(self._told[1]), _ANSWER_WAIT_S)
            probability = await (judging or asyncio.to_thread(detector.judge))
        finally:
            self._judging = None
        return probability >= detector.complete_at and await self._reads(transcript), probability

    def _append(self, audio: str) -> tuple[list[str], list[TurnEvent]]:
        data = decode_pcm16(audio)
        if len(self.pcm) + len(data) > MAX_BUFFER_BYTES:
            raise EventError("the input audio buffer may hold at most 64 MiB; commit or clear it", "buffer_full")
        self.pcm.extend(data)
        samples = pcm16_to_float(data)
        verdicts = self._early.pauses(samples)
        if self._detection is None:
            return verdicts, []
        if self._detector is None:
            self._detector = self._new_detector(self._detection)
            self._heard_ms = self._start_ms = 0
        turns = self._detector.feed(samples)
        self._heard_ms += len(samples) * 1000 // SPEECH_RATE
        return verdicts, turns

    def _new_detector(self, detection: dict) -> TurnDetector:
        if detection["type"] == Detection.SEMANTIC_VAD:
            read_words = self.read_turns and EAGERNESS[detection["eagerness"]].read_words
            if read_words:
                from omnicli.turns import text_turn

                try:
                    text_turn.load()
                except OmniError as exc:
                    log.warning("semantic_vad without the check that the words read finished: %s", exc)
                    self.read_turns = read_words = False
            return TurnDetector(SPEECH_RATE, prefix_padding_ms=_SEMANTIC_PADDING_MS, semantic=True,
                                eagerness=detection["eagerness"], confirm_stops=read_words)
        return TurnDetector(
            SPEECH_RATE, threshold=detection["threshold"], silence_ms=detection["silence_duration_ms"],
            prefix_padding_ms=detection["prefix_padding_ms"],
        )

    def settle(self) -> None:
        """Between turns keep only what a coming turn's padding could need."""
        if self._detection is not None and not self.speaking and self._deciding is None:
            padding = self._detection.get("prefix_padding_ms", _SEMANTIC_PADDING_MS)
            self.drop_before(self._heard_ms - padding - _KEEP_BETWEEN_TURNS_MS)

    def drop_before(self, ms: int) -> None:
        """Forget buffered audio before `ms` (a position in the audio heard), keeping what follows."""
        cut = min(len(self.pcm), max(0, (ms - self._start_ms) * SPEECH_RATE // 1000 * 2))
        if cut:
            del self.pcm[:cut]
            self._start_ms += cut // 2 * 1000 // SPEECH_RATE

    async def commit(self) -> Committed:
        """Take the whole buffer as the user's turn, with what was transcribed early; the buffer empties."""
        pcm = bytes(self.pcm)
        self.clear(cancel_early=False)
        samples = await asyncio.to_thread(pcm16_to_float, pcm)
        return Committed(pcm, samples, await self._early.take(pcm))

    def clear(self, cancel_early: bool = True) -> None:
        """Empty the buffer; `cancel_early` also drops the transcript being made early."""
        self._start_ms += len(self.pcm) // 2 * 1000 // SPEECH_RATE
        self.pcm.clear()
        if cancel_early:
            self._early.reset()

    def close(self) -> None:
        """Stop any turn end being decided and the early transcription (the session ends)."""
        self.drop_turn_end()
        self._early.close()
