"""The live progress line of a benchmark run: done/failed, running WER, ETA (terminal only)."""

import statistics
import sys
from typing import Any


class BenchProgress:
    """The progress line on a terminal, and nothing elsewhere; used as a context manager."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._wers: list[float] = []
        self._failed = 0
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> "BenchProgress":
        if sys.stderr.isatty() and self.total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("bench-wer"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"), TimeRemainingColumn(),
                console=Console(stderr=True), transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("bench", total=self.total, status="")
        return self

    def update(self, record: dict) -> None:
        """Count one finished record into the bar and the running WER."""
        if record["status"] == "ok":
            self._wers.append(record["wer"])
        else:
            self._failed += 1
        if self._progress is not None:
            wer = f"WER {statistics.fmean(self._wers) * 100:.2f} %" if self._wers else "WER –"
            self._progress.update(self._task, advance=1, status=f"{wer}, failed {self._failed}")

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
