"""What `omni talk` shows, kept as facts: whether the session is ready, whether the user's turn is
being recorded, whether an answer is on its way or being heard, how loud the microphone is, and
this turn's wait. The talk client tells it what happened; the view only reads it.

The state a person sees follows what actually happens, above all what the speaker plays: an
answer is `speaking` from its first played sample until it is complete and played out (or cut
off), not from when its text was made. Finished lines (you: ..., omni: ...) go to the display as
they are final, to stay in the terminal's scrollback.
"""

import math
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.protocol.duplex import OverlapAction
from omnicli.talk.answer_text import Answer
from omnicli.talk.latency import TurnTiming, summary
from omnicli.turns.modes import TurnMode

LOADING = "loading models…"
HEARING = "hearing you"
SPEAKING = "speaking"
THINKING = "thinking"
INTERRUPTED = "interrupted"
MUTED = "muted"
IDLE = "press Space to talk"
LISTENING = "listening"
NOT_CAUGHT = "didn't catch that"

_FLOOR_DB, _TOP_DB = -60.0, -6.0
"""The meter's range: silence at the bottom, a loud voice close to the mic at the top."""
_METER_FALL = 0.6
"""Each frame the meter keeps this much of its last level, so a syllable stays readable."""


class Display(Protocol):
    """Where the state's news goes: the live terminal view, or plain lines."""

    def said(self, who: str, text: str, detail: str = "") -> None:
        """A finished line of the conversation (who: "you" or "omni")."""

    def hint(self, text: str) -> None:
        """Something the user should know about their last turn (e.g. it was not caught)."""


def level_of(frame: np.ndarray) -> float:
    """A frame's loudness on the meter's scale, 0 (silence) to 1 (loud)."""
    if not len(frame):
        return 0.0
    rms = float(np.sqrt(np.mean(np.square(frame, dtype=np.float64))))
    db = 20 * math.log10(max(rms, 1e-9))
    return min(1.0, max(0.0, (db - _FLOOR_DB) / (_TOP_DB - _FLOOR_DB)))


class TalkState:
    """What `omni talk` shows, as facts the talk client updates and the view reads."""

    def __init__(self, turns: TurnMode, display: Display, clock: Callable[[], float] = time.monotonic) -> None:
        self.turns = turns
        """How turns end (the client may fall back to CLIENT)."""
        self.display = display
        self.clock = clock
        self.ready = False
        self.muted = False
        self.recording = False
        self.recorded = 0.0
        """Seconds of the user's turn recorded so far."""
        self.level = 0.0
        self.awaiting = False
        """A turn was sent and nothing of its answer has been heard yet."""
        self.interrupted = False
        self.hint = ""
        self.answer: Answer | None = None
        self.timing: TurnTiming | None = None
        """This turn's wait (cleared when the next turn starts)."""
        self.timings: list[TurnTiming] = []
        """Every turn sent, in order."""
        self.decision: str | None = None
        """Duplex: the model's latest choice, "speak" or "listen" (response.speak / response.listen)."""
        self.overlap: str | None = None
        """Duplex: how the server took the user's latest speech over the answer (overlap.decision)."""

    # ---- what the view shows -------------------------------------------------------------

    @property
    def label(self) -> str:
        """The state's word for the view: loading, hearing you, speaking, thinking and the like."""
        if not self.ready:
            return LOADING
        if self.recording and not self.muted:
            return HEARING
        if self.answer is not None and self.answer.audible:
            return SPEAKING
        if self.awaiting or self.answer is not None:
            return THINKING
        if self.interrupted:
            return INTERRUPTED
        if self.muted:
            return MUTED
        return IDLE if self.turns == TurnMode.PUSH_TO_TALK else LISTENING

    @property
    def badges(self) -> list[str]:
        """Facts worth a word next to the state's label."""
        label = self.label
        out = []
        if self.interrupted and label != INTERRUPTED:
            out.append(INTERRUPTED)
        if self.muted and label not in (MUTED, LOADING):
            out.append("mic muted")
        if self.decision is not None:
            out.append(f"model {self.decision}s")
        if self.overlap is not None:
            out.append(f"overlap: {self.overlap}")
        return out

    def summary(self) -> str | None:
        """The exit line: turns answered aloud and the median wait; None if there were none."""
        return summary(self.timings)

    # ---- what happened -------------------------------------------------------------------

    def session_ready(self) -> None:
        """The session is up: the user is heard from now on."""
        self.ready = True

    def mic(self, frame: np.ndarray) -> None:
        """A frame from the microphone (after muting)."""
        self.level = max(level_of(frame), self.level * _METER_FALL)
        if self.recording:
            self.recorded += len(frame) / SPEECH_RATE

    def set_muted(self, muted: bool) -> None:
        """The user muted or unmuted the mic; a muted meter reads zero."""
        self.muted = muted
        if muted:
            self.level = 0.0

    def turn_started(self) -> None:
        """The user's turn began (key pressed, or speech heard): a new turn, a new wait."""
        self.recording = True
        self.recorded = 0.0
        self.hint = ""
        self.timing = None

    def turn_skipped(self, why: str = NOT_CAUGHT) -> None:
        """The turn held no speech (or the server got none): nothing was asked."""
        self.recording = False
        self.awaiting = False
        self.interrupted = False
        self.timing = None
        self.tell(why)

    def tell(self, text: str) -> None:
        """A word for the user about what they just did, shown until their next turn."""
        self.hint = text
        self.display.hint(text)

    def asked(self, started_at: float, by_key: bool) -> None:
        """The turn was sent; `started_at`: the key press, or the end of speech."""
        self.recording = False
        self.awaiting = True
        self.interrupted = False
        self.hint = ""
        self.timing = TurnTiming(started_at, self.clock(), by_key)
        self.timings.append(self.timing)

    def user_text(self, text: str) -> None:
        """The server's transcript of the user's turn: a transcript line, and the ASR stage's end."""
        if self.timing is not None:
            self.timing.mark("heard_at", self.clock())
        if text.strip():
            self.display.said("you", text.strip())

    def answer_started(self) -> None:
        """The server began a new answer; one still open goes to the transcript first."""
        if self.answer is not None:
            self._close(self.answer.text.strip())
        self.answer = Answer(timing=self.timing)
        self.overlap = None

    def answer_text(self, piece: str) -> None:
        """A piece of the answer's text arrived."""
        answer = self._open()
        answer.add_text(piece)
        self._mark(answer, "first_text_at")

    def answer_audio(self, samples: int) -> None:
        """`samples` of the answer's audio (24 kHz) arrived."""
        answer = self._open()
        answer.add_audio(samples)
        self._mark(answer, "first_audio_at")

    def playback(self, played: int, buffered: float) -> None:
        """Where the speaker is: `played` samples (24 kHz) of this answer heard, `buffered`
        seconds still to play."""
        answer = self.answer
        if answer is None:
            return
        if played > 0 and not answer.audible:
            answer.audible = True
            self.awaiting = False
            self._mark(answer, "first_played_at")
        if answer.done and buffered <= 0:
            self._finish(answer)

    def answer_done(self, status: str | None, buffered: float) -> None:
        """The server finished the answer (it may still be playing)."""
        self.awaiting = False
        answer = self.answer
        if answer is None:
            return
        answer.done, answer.status = True, status
        if buffered <= 0:
            self._finish(answer)

    def cut_off(self, played: int) -> None:
        """The user spoke over the answer: it ends at what they heard."""
        self.interrupted = True
        self.awaiting = False
        if self.answer is not None:
            self._close(self.answer.cut_at(played))

    def model_decision(self, decision: str) -> None:
        """Duplex: the model chose to speak or to keep listening; a turn it listens on past is
        not waiting for an answer."""
        self.decision = decision
        if decision == "listen":
            self.awaiting = False

    def overlap_decision(self, action: str) -> None:
        """Duplex: the server's word on speech over the answer (drop, listen or barge_in)."""
        self.overlap = action

    def remark_dropped(self) -> None:
        """Duplex: the user's remark over the answer was a backchannel; the answer plays on."""
        self.recording = False
        self.overlap = OverlapAction.DROP.value

    def server_got_no_audio(self) -> None:
        """The server found the committed turn empty: nothing was asked."""
        self.turn_skipped(f"{NOT_CAUGHT}: no audio reached the server")

    # ---- helpers -------------------------------------------------------------------------

    def _open(self) -> Answer:
        if self.answer is None:
            self.answer = Answer(timing=self.timing)
        return self.answer

    def _mark(self, answer: Answer, name: str) -> None:
        if answer.timing is not None:
            answer.timing.mark(name, self.clock())

    def _finish(self, answer: Answer) -> None:
        suffix = "" if answer.status in (None, "completed") else f" [{answer.status}]"
        self._close(answer.text.strip() + suffix)

    def _close(self, line: str) -> None:
        """The answer is over: its line goes to the transcript with its turn's wait."""
        timing = self.answer.timing if self.answer is not None else None
        self.answer = None
        detail = f"{timing.waited:.2f} s" if timing is not None and timing.waited is not None else ""
        if line.strip():
            self.display.said("omni", line.strip(), detail)
