"""Chunk-by-chunk resampling for streams whose pieces arrive at arbitrary boundaries."""

import numpy as np


class StreamResampler:
    """soxr's streaming resampler, or a pass-through when the rates already match."""

    def __init__(self, from_rate: int, to_rate: int) -> None:
        self._stream = None
        if from_rate != to_rate:
            import soxr

            self._stream = soxr.ResampleStream(from_rate, to_rate, 1, dtype="float32")

    def close(self) -> None:
        """Let go of soxr's stream now. One still alive when the interpreter exits (held in a
        reference cycle, as a device callback makes) is reported by nanobind as leaked, on the
        user's terminal."""
        self._stream = None

    def process(self, samples: np.ndarray, last: bool = False) -> np.ndarray:
        """The next piece of the resampled stream; `last` flushes what soxr still holds."""
        samples = np.asarray(samples, dtype=np.float32)
        if self._stream is None:
            return samples
        return self._stream.resample_chunk(samples, last=last)
