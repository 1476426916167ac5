"""The microphone's frames as duplex appends (`input_audio_buffer.append`): gathered to the length
one append carries, encoded as the session's input format asks, and with `--image`'s picture on
the append that closes each of the model's input units."""

import base64
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.protocol.duplex import ClientEvent
from omnicli.talk.duplex.options import MAX_APPEND_MS, append_ms
from omnicli.talk.duplex.presets import InputEncoder


class Appends:
    """Sends the microphone's audio to a duplex session, an append at a time."""

    def __init__(self, encoder: InputEncoder, send: Callable[[dict], Awaitable[None]], picture: str | None) -> None:
        self.encoder = encoder
        self._send = send
        self._picture = picture
        self._unsent: list[np.ndarray] = []
        """Frames not yet appended."""
        self._append_ms = MAX_APPEND_MS
        self._unit_ms = 1000
        self._sent_ms = 0.0
        """Audio appended so far: where the model's input units close."""

    def fit(self, chunk_period_ms: int | None) -> None:
        """Appends as long as the model's input unit (`chunk_period_ms`), within the limit."""
        self._append_ms = append_ms(chunk_period_ms)
        self._unit_ms = chunk_period_ms or 1000

    async def add(self, frame: np.ndarray) -> None:
        """One microphone frame; sent once an append's worth is gathered."""
        self._unsent.append(frame)
        if sum(len(f) for f in self._unsent) * 1000 >= self._append_ms * SPEECH_RATE:
            await self.flush()

    async def flush(self) -> None:
        """Send what is gathered now (a turn ends, a remark is cleared)."""
        if self._unsent:
            frames, self._unsent = self._unsent, []
            await self.send_now(np.concatenate(frames))

    def drop_unsent(self) -> None:
        """Forget the frames gathered (they are sent again another way)."""
        self._unsent = []

    async def send_now(self, samples: np.ndarray) -> None:
        """Append `samples` (24 kHz) at once."""
        data = self.encoder.encode(samples)
        if not data:
            return
        event: dict[str, Any] = {"type": ClientEvent.INPUT_APPEND.value, "audio": base64.b64encode(data).decode(),
                                 "format": self.encoder.format, "sample_rate_hz": self.encoder.rate,
                                 "duration_ms": round(self.encoder.duration_ms(data))}
        before, self._sent_ms = self._sent_ms, self._sent_ms + self.encoder.duration_ms(data)
        if self._picture is not None and self._sent_ms // self._unit_ms > before // self._unit_ms:
            event["video_frames"] = [self._picture]
        await self._send(event)
