"""The unit of audio inside omni: float32 mono samples with their rate.

`SPEECH_RATE` is the one rate every engine speaks in and every realtime session carries
(OpenAI Realtime's PCM16 is 24 kHz too), so callers never care where speech came from.
"""

from dataclasses import dataclass

import numpy as np

SPEECH_RATE = 24000


@dataclass
class AudioChunk:
    """A piece of speech as it is made or heard, with the words it speaks when known."""

    samples: np.ndarray
    rate: int = SPEECH_RATE
    text: str | None = None
    """The words this chunk speaks, when the engine knows them."""

    @property
    def seconds(self) -> float:
        """How long the chunk plays."""
        return len(self.samples) / self.rate
