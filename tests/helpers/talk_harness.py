"""Stand-ins for the talk client's edges in the fast tests: a voice the test speaks into (or one
that talks on its own, in real time), a speaker with a device's buffer (played by the test, or at
a device's pace), an event log to wait on, views that keep quiet or keep what they were told, and
readers of the live panel on a pseudo-terminal (`pty_screen.Terminal`)."""

import asyncio
import re
import time

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.talk.client import TalkClient, TalkOptions
from omnicli.talk.duplex.client import DuplexTalkClient
from omnicli.talk.duplex.link import Backoff, DuplexLink
from omnicli.talk.duplex.options import DuplexOptions
from omnicli.talk.duplex.presets import PRESETS
from omnicli.talk.speakers import FileSpeaker
from omnicli.talk.transport import LocalTransport
from omnicli.turns.models import TurnModels
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine

FRAME = SPEECH_RATE * 40 // 1000


class Voice:
    """The microphone's stand-in: frames the test puts in, as fast as it likes."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue = asyncio.Queue()
        self.started = asyncio.Event()
        """The talk client opened the mic: the session is ready."""

    async def start(self) -> None:
        self.started.set()

    async def stop(self) -> None: ...

    def say(self, samples: np.ndarray) -> None:
        for start in range(0, len(samples), FRAME):
            self.frames.put_nowait(samples[start:start + FRAME])


class Device(FileSpeaker):
    """A speaker with a device's buffer: what was written is 'playing' until the test plays it."""

    realtime = True

    def __init__(self) -> None:
        super().__init__()
        self.queued = 0
        self.flushed = 0

    @property
    def buffered_seconds(self) -> float:
        return self.queued / self.device_rate

    def write(self, samples: np.ndarray) -> None:
        self.queued += len(samples)

    def play(self, frames: int) -> None:
        frames = min(frames, self.queued)
        self.queued -= frames
        self.played_frames += frames

    def flush(self) -> None:
        self.flushed += 1
        self.queued = 0


class Log:
    """The --transcript stand-in: records every event and wakes tests waiting for one."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []
        self._changed = asyncio.Event()

    def write(self, direction: str, event: dict) -> None:
        self.events.append((direction, event))
        self._changed.set()

    def close(self) -> None: ...

    def kinds(self, direction: str) -> list[str]:
        return [e["type"] for d, e in self.events if d == direction]

    def of(self, direction: str, kind: str) -> list[dict]:
        return [e for d, e in self.events if d == direction and e["type"] == kind]

    async def until(self, direction: str, kind: str, count: int = 1) -> dict:
        while len(self.of(direction, kind)) < count:
            self._changed.clear()
            await self._changed.wait()
        return self.of(direction, kind)[count - 1]


class Quiet:
    """The view's stand-in: shows nothing, keeps the notes the user would have been told."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class Recorder(Quiet):
    """A view that keeps what it was told: finished lines, hints, notes and problems."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.hints: list[str] = []
        self.problems: list[str] = []

    def said(self, who: str, text: str, detail: str = "") -> None:
        self.lines.append(f"{who}: {text}")

    def hint(self, text: str) -> None:
        self.hints.append(text)

    def problem(self, text: str) -> None:
        self.problems.append(text)


class LoopedVoice:
    """A microphone that plays `clip` over and over in real time, 40 ms a frame, from the moment
    the talk client opens it: a person who keeps talking (or, with silence, one who says nothing)."""

    def __init__(self, clip: np.ndarray) -> None:
        self.clip = clip
        self.frames: asyncio.Queue = asyncio.Queue()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._play())

    async def _play(self) -> None:
        start, n = time.monotonic(), 0
        while True:
            for offset in range(0, len(self.clip) - FRAME + 1, FRAME):
                await asyncio.sleep(max(0.0, start + n * 0.04 - time.monotonic()))
                self.frames.put_nowait(self.clip[offset:offset + FRAME])
                n += 1

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


class PacedSpeaker(FileSpeaker):
    """A speaker that plays at a device's pace: what was written is heard one second per second."""

    realtime = True

    def __init__(self) -> None:
        super().__init__()
        self._written = 0
        self._ends_at = 0.0

    @property  # type: ignore[override]
    def buffered_seconds(self) -> float:
        return max(0.0, self._ends_at - time.monotonic())

    @property  # type: ignore[override]
    def played_frames(self) -> int:
        return self._written - round(self.buffered_seconds * self.device_rate)

    @played_frames.setter
    def played_frames(self, value: int) -> None:
        self._written = value

    def write(self, samples: np.ndarray) -> None:
        self._ends_at = max(self._ends_at, time.monotonic()) + len(samples) / self.device_rate
        self._written += len(samples)

    def flush(self) -> None:
        self._written = self.played_frames
        self._ends_at = 0.0


class Talk:
    """A running TalkClient; `async with Talk(engine, turns) as t`."""

    def __init__(self, engine: ScriptedEngine, turns: str, *, speaker=None, echo_gate: bool = True, transport=None,
                 view=None) -> None:
        self.voice, self.log, self.stop = Voice(), Log(), asyncio.Event()
        self.speaker = speaker or FileSpeaker()
        self.view = view or Quiet()
        self.client = TalkClient(transport or LocalTransport(engine, models=TURN_MODELS), self.voice, self.speaker,
                                 TalkOptions(turns=turns, echo_gate=echo_gate), self.view, self.log, TURN_MODELS)

    async def __aenter__(self) -> "Talk":
        """Once the session is ready (the client opened the mic)."""
        self.task = asyncio.create_task(self.client.run(self.stop))
        started = asyncio.create_task(self.voice.started.wait())
        await asyncio.wait([started, self.task], return_when=asyncio.FIRST_COMPLETED)
        if self.task.done():
            started.cancel()
            await self.task  # it failed: say why
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop.set()
        await self.task


# ---- the live panel, as a terminal shows it ------------------------------------------------

BORDER = "╭"


def borders(term) -> int:
    return sum(BORDER in line for line in term.lines())


def status(term) -> str | None:
    """The panel's state line, without its border."""
    line = term.line_with(r"^│ ● ")
    return line.strip("│ ").removeprefix("● ").strip() if line else None


def recorded(term) -> float:
    """The timer on the panel's mic row (0 when none shows)."""
    line = term.line_with(r"^│ mic ") or ""
    found = re.search(r"(\d+\.\d) s", line)
    return float(found[1]) if found else 0.0


def meter(term) -> int:
    """How many cells of the mic meter are lit."""
    return (term.line_with(r"^│ mic ") or "").count("█")


def duplex_talker(url: str, *, echo_gate: bool = True,
                  models: TurnModels = TURN_MODELS) -> tuple[Voice, Log, DuplexLink, DuplexTalkClient]:
    """`omni talk --duplex`'s client for `url` (the default preset, quick resumes), on a voice the
    test speaks into, every event in a log to wait on. (`echo_gate=False`: the voice is heard while
    the answer plays, as with headphones; `models`: the stand-ins unless given the real ones.)"""
    voice, log = Voice(), Log()
    link = DuplexLink(url, None, None, log=log.write, backoff=Backoff(low=0.05))
    options = DuplexOptions(PRESETS["default"], echo_gate=echo_gate)
    return voice, log, link, DuplexTalkClient(link, voice, FileSpeaker(), options, Quiet(), models=models)
