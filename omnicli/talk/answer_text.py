"""One answer as the listener met it: its text, how much audio came with it, and, when the user
cut it off, an estimate of the words they actually heard.

The estimate: speech runs at an even pace through the text it speaks. The fraction of the
answer's received audio that the speaker played is taken as the fraction of the text that came
with that audio which was heard: all the text once the answer is complete, else the text that
had arrived by its latest audio delta. The cut falls on a word boundary, so a half-heard word is
left out. Servers send the text ahead of its audio (omni's own by a sentence or more), so while an
answer is still being made the estimate is also held to the voice's pace (characters a second of
speech, learned from the answers before): the screen never says more than was heard.

An answer also keeps how its playing went: the gaps where the speaker ran dry before the answer was
all in (the next piece came late), and the device's own underruns meanwhile.
"""

from dataclasses import dataclass, field

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.talk.latency import TurnTiming

INTERRUPTED = "—[interrupted]"
GAP_S = 0.1
"""A wait for audio this long inside an answer is a gap the listener hears (vLLM-Omni's continuity check)."""


@dataclass
class Answer:
    """One answer's text and audio as received, and how much of it the listener heard."""

    text: str = ""
    audio: int = 0
    """Samples of audio received (24 kHz)."""
    text_with_audio: int = 0
    """Characters of text that had arrived by the latest audio delta."""
    done: bool = False
    """The server finished making it (all its text and audio arrived)."""
    status: str | None = None
    audible: bool = False
    """The speaker has played some of it."""
    timing: TurnTiming | None = None
    """The wait of the turn it answers (the user may have begun the next turn meanwhile)."""
    played: int = 0
    """Samples (24 kHz) of it the listener has heard so far."""
    dry_since: float | None = None
    """When the speaker ran out of this answer's audio while more was still to come; None while it plays."""
    gaps: list[float] = field(default_factory=list)
    """Seconds of each wait for audio inside the answer that the listener heard (at least GAP_S)."""
    underruns: int = 0
    """Times the device itself ran dry while the answer played."""

    def add_text(self, piece: str) -> None:
        """A piece of the answer's text arrived."""
        self.text += piece

    def add_audio(self, samples: int) -> None:
        """`samples` of the answer's audio arrived; the text so far counts as spoken with it."""
        self.audio += samples
        self.text_with_audio = len(self.text)

    def heard(self, played: int, pace: float | None = None) -> str:
        """The words heard after `played` samples of this answer's audio; while it is still being
        made, no more than `pace` characters a second of played speech."""
        if self.audio <= 0 or played <= 0:
            return ""
        covered = len(self.text) if self.done else self.text_with_audio
        chars = round(covered * min(1.0, played / self.audio))
        if pace is not None and not self.done:
            chars = min(chars, round(pace * played / SPEECH_RATE))
        if chars >= len(self.text):
            return self.text.strip()
        cut = self.text[:chars]
        if not self.text[chars].isspace() and not cut[-1:].isspace():
            cut = cut[: max(cut.rfind(" "), 0)]  # the word the cut fell in was not heard whole
        return cut.strip()

    def cut_at(self, played: int, pace: float | None = None) -> str:
        """The answer's line in the transcript after an interruption: what was heard, marked."""
        heard = self.heard(played, pace)
        return f"{heard} {INTERRUPTED}" if heard else INTERRUPTED

    def ran_dry(self, at: float) -> None:
        """The speaker has played all of it that came, and more is to come."""
        if self.dry_since is None:
            self.dry_since = at

    def refilled(self, at: float) -> None:
        """More of its audio came: a wait for it long enough to hear was a gap."""
        if self.dry_since is not None and at - self.dry_since >= GAP_S:
            self.gaps.append(at - self.dry_since)
        self.dry_since = None

    def playing_report(self) -> str:
        """How its playing went, in words for the transcript line; empty when it went smoothly."""
        parts = []
        if self.gaps:
            count = len(self.gaps)
            parts.append(f"{count} gap{'' if count == 1 else 's'} up to {max(self.gaps):.1f} s")
        if self.underruns:
            parts.append(f"{self.underruns} underrun{'' if self.underruns == 1 else 's'}")
        return ", ".join(parts)
