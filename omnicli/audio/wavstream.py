"""WAV over a byte stream: the header servers send before audio of unknown length, and a
decoder that turns streamed bytes (WAV with 0xFFFFFFFF sizes, back-to-back complete WAV files,
or headerless PCM16) into float32 samples as they arrive."""

import struct

import numpy as np

from omnicli.audio.pcm import pcm16_to_float

UNKNOWN_SIZE = 0xFFFFFFFF


def streaming_wav_header(rate: int, channels: int = 1) -> bytes:
    """A 44-byte PCM16 header whose size fields say 'unknown', as OpenAI and vLLM-Omni send."""
    block_align = channels * 2
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", UNKNOWN_SIZE, b"WAVE", b"fmt ", 16, 1, channels, rate,
        rate * block_align, block_align, 16, b"data", UNKNOWN_SIZE,
    )


class WavStreamDecoder:
    """Feed bytes, get float32 mono samples. `rate` is known once a header (or `pcm_rate`) is.

    With `pcm_rate` set the stream is headerless PCM16 unless it starts with 'RIFF'.
    """

    def __init__(self, pcm_rate: int | None = None) -> None:
        self.rate: int | None = pcm_rate
        self._channels = 1
        self._pending = b""
        self._data_left: float = 0 if pcm_rate is None else float("inf")
        self._headerless = pcm_rate is not None

    def feed(self, data: bytes) -> np.ndarray:
        """Take the next bytes; return the samples they complete (a partial frame waits for more)."""
        self._pending += data
        out: list[np.ndarray] = []
        while self._pending:
            if self._data_left == 0 or (self._headerless and self._pending[:4] == b"RIFF"):
                if not self._read_header():
                    break
                self._headerless = False
                continue
            frame = 2 * self._channels
            take = len(self._pending) - len(self._pending) % frame
            if self._data_left != float("inf"):
                take = min(take, int(self._data_left))
            if take == 0:
                break
            chunk, self._pending = self._pending[:take], self._pending[take:]
            self._data_left -= take
            samples = pcm16_to_float(chunk)
            if self._channels > 1:
                samples = samples.reshape(-1, self._channels).mean(axis=1)
            out.append(samples)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)

    def finish(self) -> None:
        """Raise ValueError when the stream ended inside a header or was never audio."""
        if self.rate is None:
            raise ValueError("the stream held no WAV header")
        if self._data_left == 0 and self._pending:
            raise ValueError("the stream ended inside a WAV header")

    def _read_header(self) -> bool:
        """Parse RIFF/WAVE chunks up to 'data'; False when more bytes are needed."""
        buf = self._pending
        if len(buf) < 12:
            return False
        if buf[:4] != b"RIFF" or buf[8:12] != b"WAVE":
            raise ValueError("the stream is not WAV audio")
        offset = 12
        while True:
            if len(buf) < offset + 8:
                return False
            chunk_id, size = struct.unpack_from("<4sI", buf, offset)
            offset += 8
            if chunk_id == b"data":
                self._pending = buf[offset:]
                self._data_left = float("inf") if size == UNKNOWN_SIZE else size
                return True
            if len(buf) < offset + size:
                return False
            if chunk_id == b"fmt ":
                tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", buf, offset)
                if tag not in (1, 0xFFFE) or bits != 16:
                    raise ValueError(f"streamed WAV must be PCM16, got format {tag}/{bits}-bit")
                self._channels, self.rate = channels, rate
            offset += size + (size & 1)
