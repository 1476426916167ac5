"""What `omni speak` shows on a terminal (stderr) while it works.

Speech going only to a file shows how much of the text is synthesized. Speech going to the
speaker shows what the listener is waiting for: seconds played of the seconds made so far (the
total grows while synthesis runs, and says so), until the last sample is out; synthesis is
usually done long before playback is.
"""

import contextlib
from collections.abc import Callable, Iterator
from typing import Protocol

from rich.progress import BarColumn, Progress, TextColumn


class Clock(Protocol):
    """What the bar reads from the speaker (audio.player.Player)."""

    played_frames: int
    device_rate: int


class Bar:
    """No display: the calls a bar gets, doing nothing (piped stderr, short text)."""

    def spoken(self, characters: int) -> None:
        """`characters` more of the text are synthesized."""

    def made(self, seconds: float) -> None:
        """`seconds` more of audio are synthesized."""

    def synthesized(self) -> None:
        """Synthesis is over; only playback (if any) is left."""


class SynthesisBar(Bar):
    """Characters synthesized of the whole text, while speech goes only to a file."""

    def __init__(self, progress: Progress, characters: int) -> None:
        self._progress = progress
        self._task = progress.add_task("speaking", total=characters)

    def spoken(self, characters: int) -> None:
        """Advance the bar by `characters` more of the text synthesized."""
        self._progress.advance(self._task, characters)


class PlaybackBar(Bar):
    """`playing ━━━━━━╸━━━━━━━━  12.3 / 45.6 s  synthesizing 40%`, then `12.3 / 61.2 s`."""

    def __init__(self, progress: "_PolledProgress", clock: Clock, characters: int) -> None:
        self._progress = progress
        self._clock = clock
        self._characters = max(characters, 1)
        self._spoken = 0
        self._seconds = 0.0
        self._synthesizing = True
        self._task = progress.add_task("playing", total=None, clock="", state="")
        progress.before_drawing = self.poll
        self.poll()

    def spoken(self, characters: int) -> None:
        """Count `characters` more of the text synthesized, for the percentage shown."""
        self._spoken += characters

    def made(self, seconds: float) -> None:
        """Count `seconds` more of audio made: the total the bar plays towards."""
        self._seconds += seconds

    def synthesized(self) -> None:
        """Synthesis is over: stop showing its percentage."""
        self._synthesizing = False

    @property
    def played_seconds(self) -> float:
        """Seconds handed to the speaker, never more than were made (the tail's padding)."""
        return min(self._clock.played_frames / self._clock.device_rate, self._seconds)

    def poll(self) -> None:
        """Bring the bar up to the speaker's position (called before every refresh)."""
        played, made = self.played_seconds, self._seconds
        state = f"synthesizing {min(99, 100 * self._spoken // self._characters)}%" if self._synthesizing else ""
        self._progress.update(self._task, completed=played, total=made or None,
                              clock=f"{played:.1f} / {made:.1f} s", state=state)


class _PolledProgress(Progress):
    """A Progress that asks for fresh figures each time it draws, so the bar keeps moving while
    the event loop is busy or only waiting for the speaker to finish."""

    before_drawing: Callable[[], None] = staticmethod(lambda: None)

    def get_renderables(self):
        """What rich draws, after `before_drawing` has updated the figures."""
        self.before_drawing()
        yield from super().get_renderables()


@contextlib.contextmanager
def synthesis_bar(console, characters: int) -> Iterator[Bar]:
    """A synthesis bar shown on `console` for as long as the block runs, erased after."""
    with Progress(console=console, transient=True, redirect_stdout=False) as progress:
        yield SynthesisBar(progress, characters)


def playback_progress(console) -> _PolledProgress:
    """The rich display a playback bar draws in, refreshed from the speaker's position."""
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[clock]}"),
               TextColumn("{task.fields[state]}", style="dim"))
    return _PolledProgress(*columns, console=console, transient=True, redirect_stdout=False)


@contextlib.contextmanager
def playback_bar(console, clock: Clock, characters: int) -> Iterator[PlaybackBar]:
    """A playback bar shown on `console` for as long as the block runs, erased after."""
    with playback_progress(console) as progress:
        yield PlaybackBar(progress, clock, characters)
