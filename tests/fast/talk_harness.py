"""Stand-ins for the talk client's edges in the fast tests: a voice the test speaks into, a speaker
with a device's buffer, an event log to wait on, and a view that keeps quiet."""

import asyncio

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.realtime.speakers import FileSpeaker

FRAME = SPEECH_RATE * 40 // 1000


class Voice:
    """The microphone's stand-in: frames the test puts in, as fast as it likes."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue = asyncio.Queue()

    async def start(self) -> None: ...
    async def stop(self) -> None: ...

    def say(self, samples: np.ndarray) -> None:
        for start in range(0, len(samples), FRAME):
            self.frames.put_nowait(samples[start:start + FRAME])


class Device(FileSpeaker):
    """A speaker with a device's buffer: what was written is 'playing' until the test plays it."""

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
