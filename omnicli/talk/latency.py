"""One turn's wait, measured here from when events arrived: how long a person waited for the
answer and which stage the wait went to.

What a person waits from depends on how the turn ended: in push-to-talk from the key press that
sent it, with VAD from the end of their speech (the VAD's silence window is part of the wait).
The stages run from the commit: the user's transcript arrives (ASR), then the answer's first
words (thinker), its first audio (talker), and the first sample the speaker played (playback).
A server that sends no transcript has no ASR stage; the next stage counts from the one before.
A transcript that came with the commit was heard while the user was still speaking (omni's early
transcript): its stage reads `heard early`, not a time.
"""

import time
from dataclasses import dataclass

HEARD_EARLY_S = 0.02
"""A transcript this soon after the commit was made before it: no transcriber is that quick."""
_STAGES = (("asked_at", "turn end"), ("heard_at", "ASR"), ("first_text_at", "thinker"),
           ("first_audio_at", "talker"), ("first_played_at", "playback"))


@dataclass
class TurnTiming:
    """When each stage of one turn's wait finished, and when the wait began."""

    started_at: float
    """When the wait began: the key press (push-to-talk) or the end of speech (VAD)."""
    asked_at: float
    """When the turn was committed (push-to-talk: the key press too)."""
    by_key: bool
    heard_at: float | None = None
    first_text_at: float | None = None
    first_audio_at: float | None = None
    first_played_at: float | None = None
    interrupted: bool = False
    """The user cut its answer off (or stopped it) before it was played out."""

    @property
    def since(self) -> str:
        """What the wait counts from, in words (key press or end of speech)."""
        return "from key press" if self.by_key else "from end of speech"

    @property
    def waited(self) -> float | None:
        """Seconds from the start of the wait to the first sample played; None until then."""
        return None if self.first_played_at is None else max(0.0, self.first_played_at - self.started_at)

    def mark(self, name: str, at: float) -> None:
        """Record the first time a stage finished (later events of the same kind do not count)."""
        if getattr(self, name) is None:
            setattr(self, name, at)

    def stages(self) -> list[tuple[str, float]]:
        """(stage, seconds) for each stage measured so far, in the order they run."""
        out, previous = [], self.started_at
        for name, label in _STAGES:
            at = getattr(self, name)
            if at is None or (name == "asked_at" and self.by_key):
                continue
            out.append((label, max(0.0, at - previous)))
            previous = max(previous, at)
        return out

    def headline(self) -> str | None:
        """The wait to first audio in one line; None until the answer is heard."""
        waited = self.waited
        return None if waited is None else f"first audio {waited:.2f} s {self.since}"

    @property
    def heard_early(self) -> bool:
        """The transcript came with the commit: it was made while the user was still speaking."""
        return self.heard_at is not None and self.heard_at - self.asked_at < HEARD_EARLY_S

    def breakdown(self) -> str:
        """Each stage's share of the wait, in one line."""
        return " · ".join(f"{label} heard early" if label == "ASR" and self.heard_early else f"{label} {seconds:.2f} s"
                          for label, seconds in self.stages())


def summary(timings: list[TurnTiming]) -> str | None:
    """The exit line's figures: turns answered and turns interrupted (counted apart), and the
    median wait to first audio over both; None if nothing was heard."""
    heard = [t for t in timings if t.waited is not None]
    if not heard:
        return None
    waited = sorted(t.waited for t in heard if t.waited is not None)
    middle = len(waited) // 2
    median = waited[middle] if len(waited) % 2 else (waited[middle - 1] + waited[middle]) / 2
    since = {t.since for t in heard}
    label = since.pop() if len(since) == 1 else "from the end of the turn"
    answered = sum(not t.interrupted for t in heard)
    interrupted = sum(t.interrupted for t in timings)
    counts = f"{answered} turn{'' if answered == 1 else 's'} answered" + (f", {interrupted} interrupted" if interrupted else "")
    return f"{counts}, median {median * 1000:.0f} ms {label} to first audio"


class RecordingClock:
    """When each moment of the microphone's audio was recorded, from its position in the audio.

    A VAD, here or on the server, names where speech ended as a position in the audio heard; the
    wait begins then, not when the end was decided (Smart Turn decides after a delay) or when
    its frame was taken from the queue (frames wait there while the loop is busy). The source
    records in real time, so position 0 was recorded at the earliest `now - heard` seen."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.heard_ms = 0.0
        self._began = float("inf")

    def heard(self, frame_samples: int) -> None:
        """A frame was taken from the microphone, just now."""
        self.heard_ms += frame_samples * 1000 / self.rate
        self._began = min(self._began, time.monotonic() - self.heard_ms / 1000)

    def recorded_at(self, heard_ms: float) -> float:
        """When the audio at `heard_ms` was recorded (monotonic clock), never later than now."""
        return min(time.monotonic(), self._began + heard_ms / 1000)
