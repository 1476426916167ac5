"""Where `omni talk` plays the answer: `audio.player.Player` on a device, or `FileSpeaker`
headless. Both offer what the talk loop needs (`Speaker`), so barge-in can measure what was heard."""

from typing import Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE


class Speaker(Protocol):
    """What the talk loop plays answers through and reads playback progress from."""

    device_rate: int
    played_frames: int
    """Frames the listener has heard so far, at `device_rate`."""
    realtime: bool
    """It plays at the listener's pace (a device): when it runs dry inside an answer, they hear a gap."""
    underruns: int
    """Times the device itself ran dry (its callback came late), so far."""

    @property
    def buffered_seconds(self) -> float:
        """Seconds of audio written but not yet played."""

    def write(self, samples: np.ndarray) -> None:
        """Queue answer audio (24 kHz float32) to be played."""

    def start(self) -> None:
        """Begin playing, once the models have loaded."""

    def flush(self) -> None:
        """Drop everything not yet played (the user talked over it)."""

    def close(self) -> None:
        """Stop playing and release the device."""


class FileSpeaker:
    """The headless speaker: audio counts as heard the moment it arrives."""

    device_rate = SPEECH_RATE
    buffered_seconds = 0.0
    realtime = False
    underruns = 0

    def __init__(self) -> None:
        self.played_frames = 0

    def write(self, samples: np.ndarray) -> None:
        """Count the audio as played at once."""
        self.played_frames += len(samples)

    def start(self) -> None:
        """Nothing to start headless."""

    def flush(self) -> None:
        """Nothing is held back headless, so nothing to drop."""

    def close(self) -> None:
        """Nothing to release headless."""
