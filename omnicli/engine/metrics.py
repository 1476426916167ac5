"""Per-stage measurements: time to first output, busy time, and what the stage consumed or made.

RTF is busy time over seconds of audio (heard by ASR, spoken by the talker); the thinker counts
tokens instead. They feed `--verbose`, the server's /metrics and the benchmarks.
"""

import time
from dataclasses import dataclass, field


@dataclass
class StageMetrics:
    """One stage's measurements for one request: its timings, busy time, audio and tokens."""

    name: str
    started: float = field(default_factory=time.perf_counter)
    first_output: float | None = None
    finished: float | None = None
    busy_seconds: float = 0.0
    audio_seconds: float = 0.0
    tokens: int = 0

    def output(self) -> None:
        """Note that the stage made something; the first call marks its first output."""
        if self.first_output is None:
            self.first_output = time.perf_counter()

    def finish(self) -> None:
        """Note when the stage ended."""
        self.finished = time.perf_counter()

    @property
    def time_to_first_output(self) -> float | None:
        """Seconds from the stage's start to its first output; None before any."""
        return None if self.first_output is None else self.first_output - self.started

    @property
    def rtf(self) -> float | None:
        """The real-time factor: busy time over seconds of audio; None without audio."""
        return self.busy_seconds / self.audio_seconds if self.audio_seconds else None

    @property
    def tokens_per_second(self) -> float | None:
        """Tokens over busy time; None without either."""
        return self.tokens / self.busy_seconds if self.tokens and self.busy_seconds else None

    def as_dict(self) -> dict:
        """The measurements that have a value, by name (for --verbose, /metrics and the benchmarks)."""
        values = {
            "started": self.started,
            "first_output": self.first_output,
            "finished": self.finished,
            "time_to_first_output": self.time_to_first_output,
            "busy_seconds": self.busy_seconds,
            "audio_seconds": self.audio_seconds or None,
            "rtf": self.rtf,
            "tokens": self.tokens or None,
            "tokens_per_second": self.tokens_per_second,
        }
        return {key: value for key, value in values.items() if value is not None}


class Timer:
    """Adds the wall time of a block to a stage's busy time."""

    def __init__(self, stage: StageMetrics) -> None:
        self.stage = stage

    def __enter__(self) -> "Timer":
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.stage.busy_seconds += time.perf_counter() - self._start
