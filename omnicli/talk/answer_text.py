"""One answer as the listener met it: its text, how much audio came with it, and, when the user
cut it off, an estimate of the words they actually heard.

The estimate: speech runs at an even pace through the text it speaks. The fraction of the
answer's received audio that the speaker played is taken as the fraction of the text that came
with that audio which was heard: all the text once the answer is complete, else the text that
had arrived by its latest audio delta. The cut falls on a word boundary, so a half-heard word is
left out. Servers send the text ahead of its audio (omni's own by a sentence or more), so while an
answer is still being made the estimate can run a little ahead of what was said.
"""

from dataclasses import dataclass

from omnicli.talk.latency import TurnTiming

INTERRUPTED = "—[interrupted]"


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

    def add_text(self, piece: str) -> None:
        """A piece of the answer's text arrived."""
        self.text += piece

    def add_audio(self, samples: int) -> None:
        """`samples` of the answer's audio arrived; the text so far counts as spoken with it."""
        self.audio += samples
        self.text_with_audio = len(self.text)

    def heard(self, played: int) -> str:
        """The words heard after `played` samples of this answer's audio."""
        if self.audio <= 0 or played <= 0:
            return ""
        covered = len(self.text) if self.done else self.text_with_audio
        chars = round(covered * min(1.0, played / self.audio))
        if chars >= len(self.text):
            return self.text.strip()
        cut = self.text[:chars]
        if not self.text[chars].isspace() and not cut[-1:].isspace():
            cut = cut[: max(cut.rfind(" "), 0)]  # the word the cut fell in was not heard whole
        return cut.strip()

    def cut_at(self, played: int) -> str:
        """The answer's line in the transcript after an interruption: what was heard, marked."""
        heard = self.heard(played)
        return f"{heard} {INTERRUPTED}" if heard else INTERRUPTED
