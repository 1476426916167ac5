"""Where `omni talk` plays the answer: `audio.player.Player` on a device, or `FileSpeaker`
headless. Both offer what the talk loop needs (`Speaker`), so barge-in can measure what was heard."""

from typing import Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE


class Speaker(Protocol):
    device_rate: int
    played_frames: int
    """Frames the listener has heard so far, at `device_rate`."""

    @property
    def buffered_seconds(self) -> float: ...
    def write(self, samples: np.ndarray) -> None: ...
    def start(self) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class FileSpeaker:
    """The headless speaker: audio counts as heard the moment it arrives."""

    device_rate = SPEECH_RATE
    buffered_seconds = 0.0

    def __init__(self) -> None:
        self.played_frames = 0

    def write(self, samples: np.ndarray) -> None:
        self.played_frames += len(samples)

    def start(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
