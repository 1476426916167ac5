"""What `omni talk` shows, kept as facts: whether the session is ready, whether the user's turn is
being recorded, whether an answer is on its way or being heard, how loud the microphone is, and
this turn's wait. The talk client tells it what happened; the view only reads it.

The state a person sees follows what actually happens, above all what the speaker plays: an
answer is `speaking` from its first played sample until it is complete and played out (or cut
off), not from when its text was made, and `waiting for audio` while the speaker has run dry inside
it; its words are shown as far as they were heard. Finished lines (you: ..., omni: ...) go to the
display as they are final, to stay in the terminal's scrollback. A word about the last turn and its
wait stay a few seconds once all is quiet, then go (at once when the mic is muted).
"""

import math
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import rms
from omnicli.protocol.duplex import OverlapAction
from omnicli.talk.answer_text import Answer
from omnicli.talk.latency import TurnTiming, summary
from omnicli.turns.modes import TurnMode

LOADING = "loading models…"
HEARING = "hearing you"
SPEAKING = "speaking"
WAITING = "waiting for audio"
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
LINGER_S = 4.0
"""How long a word about the last turn, and its wait, stay on the panel once all is quiet."""
PACE = 15.0
"""Characters a second of speech, until the answers heard tell the voice's own pace."""


class Display(Protocol):
    """Where the state's news goes: the live terminal view, or plain lines."""

    def said(self, who: str, text: str, detail: str = "") -> None:
        """A finished line of the conversation (who: "you" or "omni")."""

    def hint(self, text: str) -> None:
        """Something the user should know about their last turn (e.g. it was not caught)."""

    def listening(self, label: str) -> None:
        """The session is ready; `label`: what the panel says now (listening, press Space to talk)."""


def level_of(frame: np.ndarray) -> float:
    """A frame's loudness on the meter's scale, 0 (silence) to 1 (loud)."""
    db = 20 * math.log10(max(rms(frame), 1e-9))
    return min(1.0, max(0.0, (db - _FLOOR_DB) / (_TOP_DB - _FLOOR_DB)))


class TalkState:
    """What `omni talk` shows, as facts the talk client updates and the view reads."""

    def __init__(self, turns: TurnMode, display: Display, clock: Callable[[], float] = time.monotonic, *,
                 realtime_speaker: bool = True, notes: Callable[[dict], None] | None = None) -> None:
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
        self.realtime_speaker = realtime_speaker
        """The speaker plays at the listener's pace (a device), so its running dry is heard."""
        self.notes = notes
        """Where each answer's playing (gaps, underruns) is written: the event log (`--transcript`)."""
        self._hint_at = 0.0
        self._settled_at: float | None = None
        """When the last answer was over (the panel's wait stays LINGER_S past it)."""
        self._underruns = 0
        self._spoken_chars = 0
        self._spoken_seconds = 0.0

    # ---- what the view shows -------------------------------------------------------------

    @property
    def label(self) -> str:
        """The state's word for the view: loading, hearing you, speaking, thinking and the like."""
        if not self.ready:
            return LOADING
        if self.recording and not self.muted:
            return HEARING
        if self.answer is not None and self.answer.audible:
            return WAITING if self.answer.dry_since is not None else SPEAKING
        if self.awaiting or self.answer is not None:
            return THINKING
        if self.interrupted and self._fresh(self._settled_at):
            return INTERRUPTED
        if self.muted:
            return MUTED
        return IDLE if self.turns == TurnMode.PUSH_TO_TALK else LISTENING

    @property
    def badges(self) -> list[str]:
        """Facts worth a word next to the state's label."""
        label = self.label
        out = []
        if self.interrupted and label != INTERRUPTED and (self.recording or self._fresh(self._settled_at)):
            out.append(INTERRUPTED)
        if self.muted and label not in (MUTED, LOADING):
            out.append("mic muted")
        if self.decision is not None:
            out.append(f"model {self.decision}s")
        if self.overlap is not None:
            out.append(f"overlap: {self.overlap}")
        return out

    @property
    def pace(self) -> float:
        """Characters a second of the voice's speech, from the answers played out so far."""
        return self._spoken_chars / self._spoken_seconds if self._spoken_seconds >= 1.0 else PACE

    def spoken(self) -> str:
        """The current answer's words as far as the listener has heard them."""
        answer = self.answer
        return answer.heard(answer.played, self.pace) if answer is not None else ""

    def shown_hint(self) -> str:
        """The word about the last turn, while it is fresh."""
        return self.hint if self._fresh(self._hint_at) else ""

    def shown_timing(self) -> TurnTiming | None:
        """This turn's wait while it runs, and a few seconds past its answer (not while muted)."""
        if self.timing is None or self.awaiting or self.answer is not None:
            return self.timing
        return None if self.muted or not self._fresh(self._settled_at) else self.timing

    def _fresh(self, since: float | None) -> bool:
        return since is not None and self.clock() - since < LINGER_S

    def summary(self) -> str | None:
        """The exit line: turns answered aloud, turns interrupted, and the median wait; None if none was heard."""
        return summary(self.timings)

    # ---- what happened -------------------------------------------------------------------

    def session_ready(self) -> None:
        """The session is up: the user is heard from now on."""
        self.ready = True
        self.display.listening(self.label)

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
            self.hint = ""

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
        """A word for the user about what they just did, shown a few seconds (or until their next turn)."""
        self.hint = text
        self._hint_at = self.clock()
        self.display.hint(text)

    def asked(self, started_at: float, by_key: bool) -> None:
        """The turn was sent; `started_at`: the key press, or the end of speech."""
        self.recording = False
        self.awaiting = True
        self.interrupted = False
        self.hint = ""
        self._settled_at = None
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
        answer.refilled(self.clock())
        answer.add_audio(samples)
        self._mark(answer, "first_audio_at")

    def playback(self, played: int, buffered: float, underruns: int = 0) -> None:
        """Where the speaker is: `played` samples (24 kHz) of this answer heard, `buffered`
        seconds still to play, `underruns` the device's count of its own dropouts so far."""
        answer = self.answer
        new_underruns, self._underruns = underruns - self._underruns, underruns
        if answer is None:
            return
        answer.played = played
        if played > 0 and not answer.audible:
            answer.audible = True
            self.awaiting = False
            self._mark(answer, "first_played_at")
        if answer.audible:
            answer.underruns += max(0, new_underruns)
            if self.realtime_speaker and not answer.done and buffered <= 0:
                answer.ran_dry(self.clock())
        if answer.done and buffered <= 0:
            self._finish(answer)

    def answer_done(self, status: str | None, buffered: float) -> None:
        """The server finished the answer (it may still be playing)."""
        self.awaiting = False
        answer = self.answer
        if answer is None:
            return
        answer.done, answer.status = True, status
        answer.dry_since = None  # all of it came: the end of its audio is no gap
        if buffered <= 0:
            self._finish(answer)

    def cut_off(self, played: int) -> None:
        """The user spoke over the answer: it ends at what they heard."""
        self.interrupted = True
        self.awaiting = False
        self._settled_at = self.clock()
        if self.answer is not None:
            self.answer.played = played
            if self.answer.timing is not None:
                self.answer.timing.interrupted = True
            self._close(self.answer.cut_at(played, self.pace))

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
        if answer.status in (None, "completed") and answer.text.strip():
            self._spoken_chars += len(answer.text.strip())
            self._spoken_seconds += answer.audio / SPEECH_RATE
        self._close(answer.text.strip() + suffix)

    def _close(self, line: str) -> None:
        """The answer is over: its line goes to the transcript with its turn's wait and how its
        playing went; the event log gets the playing's figures."""
        answer, self.answer = self.answer, None
        self._settled_at = self.clock()
        if answer is None:
            return
        timing = answer.timing
        details = [f"{timing.waited:.2f} s"] if timing is not None and timing.waited is not None else []
        if report := answer.playing_report():
            details.append(report)
        if self.notes is not None and answer.audible:
            self.notes({"type": "omni.answer.played", "audio_ms": answer.audio * 1000 // SPEECH_RATE,
                        "heard_ms": answer.played * 1000 // SPEECH_RATE, "gaps": len(answer.gaps),
                        "longest_gap_ms": round(max(answer.gaps, default=0.0) * 1000), "underruns": answer.underruns})
        if line.strip():
            self.display.said("omni", line.strip(), " · ".join(details))
