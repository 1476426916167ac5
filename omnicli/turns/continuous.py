"""Continuous listening for the duplex lane: the realtime input buffer (Silero, Smart Turn, early
ASR) fed at the client's input rate (16 kHz by default, 24 kHz too), and told apart: a pause Smart
Turn judged unfinished (the server answers `response.listen`) from a turn end.
"""

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import float_to_pcm16, pcm16_to_float, resample
from omnicli.audio.resampler import StreamResampler
from omnicli.engine.base import Engine
from omnicli.errors import EventError
from omnicli.protocol.duplex import INPUT_RATES
from omnicli.turns.input_buffer import InputBuffer, decode_pcm16
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.smart_turn import RATE as SMART_TURN_RATE
from omnicli.turns.smart_turn import SmartTurn
from omnicli.turns.vad import TurnDetector, TurnEvent

COMMIT_COMPLETE_AT = 0.5
"""A commit that leaves the decision to the server is answered when Smart Turn gives the turn at
least this (its own cut-off); pauses inside a turn use the stricter eagerness thresholds."""


@dataclass(frozen=True)
class Heard:
    """What one append told the duplex lane: the turns heard, and pauses judged not a turn end."""

    turns: list[TurnEvent]
    unfinished_pauses: int
    """Pauses Smart Turn was asked about and judged not the end of the turn."""


class DuplexInput(InputBuffer):
    """The input buffer fed continuously at the client's rate, counting pauses that ended no turn."""

    def __init__(self, engine: Engine, lock: asyncio.Lock, on_late_turns: Callable[[list[TurnEvent]], Awaitable[None]],
                 scheduler: AnswerScheduler, models: TurnModels) -> None:
        super().__init__(engine, lock, on_late_turns, scheduler, models)
        self._resamplers: dict[int, StreamResampler] = {}
        self._rate = SPEECH_RATE
        self.voiced = False
        """Speech was heard since the last commit or clear."""
        self._counted: tuple[TurnDetector | None, int] = (None, 0)
        """Smart Turn's asks already told of (`heard`), by the detector that made them."""

    @property
    def voiced_until_ms(self) -> int:
        """Where the speech heard so far ends: where the pause being judged began, else the input
        position less the silence since."""
        detector = self.turn_end.detector
        if detector is None:
            return self.turn_end.heard_ms
        if (pending := detector.pending_stop) is not None:
            return pending.ms
        return self.turn_end.heard_ms - detector.trailing_silence_ms

    async def hear(self, audio: str, rate: int) -> Heard:
        """Take base64 PCM16 at `rate` (16 or 24 kHz); what it told about turns."""
        if rate not in INPUT_RATES:
            raise EventError(f"sample_rate_hz must be one of {', '.join(map(str, INPUT_RATES))}, got {rate}",
                             "unsupported_audio_format", param="sample_rate_hz")
        self._rate = rate
        return self.heard(await self.append(audio))

    def heard(self, turns: list[TurnEvent]) -> Heard:
        """`turns` (of an append, or decided later), with the pauses asked about since last time
        that ended no turn: Smart Turn's "unfinished", or a turn end the words or the voice coming
        back overruled. A turn end still being decided, or waiting for the silence rule's end, is
        not counted yet."""
        if any(turn.kind == "started" for turn in turns):
            self.voiced = True
        detector = self.turn_end.detector
        if detector is None or not detector.semantic:
            return Heard(turns, 0)
        if detector is not self._counted[0]:
            self._counted = (detector, 0)
        deciding = int(self.turn_end.deciding or detector.ending_at_silence_rule)
        decided = sum(1 for turn in turns if turn.kind == "stopped" and turn.probability is not None)
        pauses = max(0, detector.calls - self._counted[1] - decided - deciding)
        self._counted = (detector, detector.calls - deciding)
        return Heard(turns, pauses)

    def _append(self, audio: str) -> tuple[list[str], list[TurnEvent]]:  # runs in a worker thread
        if self._rate != SPEECH_RATE:
            resampler = self._resamplers.setdefault(self._rate, StreamResampler(self._rate, SPEECH_RATE))
            samples = resampler.process(pcm16_to_float(decode_pcm16(audio)))
            audio = base64.b64encode(float_to_pcm16(samples)).decode()
        return super()._append(audio)

    def clear(self, cancel_early: bool = True) -> None:
        """Empty the buffer; speech still under way stays heard."""
        super().clear(cancel_early)
        self.voiced = self.turn_end.speaking

    def end_turn(self) -> None:
        """A client's commit ended the turn the detector was still in: it must not end it again."""
        self.turn_end.drop_turn_end()
        if self.turn_end.detector is not None:
            self.turn_end.detector.end_turn()
        self.voiced = False


async def sounds_finished(samples: np.ndarray, smart_turn: SmartTurn) -> bool:
    """Smart Turn on a committed turn (24 kHz): does it sound finished? True when it cannot tell."""
    from omnicli.errors import OmniError

    def judge() -> float:
        """Smart Turn's probability that the committed turn is finished (CPU work, in a worker thread)."""
        return smart_turn.completion_probability(resample(samples, SPEECH_RATE, SMART_TURN_RATE))

    try:
        return await asyncio.to_thread(judge) >= COMMIT_COMPLETE_AT
    except OmniError:
        return True
