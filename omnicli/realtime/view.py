"""What `omni talk` shows on stderr: state, what the user said, the answer as it streams, and
the latency of each turn. A live rich panel on a terminal; plain lines otherwise."""

import sys
import time
from typing import TextIO

from omnicli.errors import UsageError


class TalkView:
    def __init__(self) -> None:
        self.state = "listening"
        self.user = ""
        self.answer = ""
        self.latencies: list[float] = []
        self._live = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._render(), console=Console(stderr=True), refresh_per_second=10, transient=False)

    def __enter__(self) -> "TalkView":
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def _render(self):
        from rich.panel import Panel
        from rich.text import Text

        body = Text()
        body.append(f"{self.state}\n", style="bold cyan")
        if self.user:
            body.append("you:  ", style="bold")
            body.append(self.user + "\n")
        if self.answer:
            body.append("omni: ", style="bold green")
            body.append(self.answer + "\n")
        if self.latencies:
            body.append(f"last turn: {self.latencies[-1] * 1000:.0f} ms from end of speech to first audio", style="dim")
        return Panel(body, title="omni talk", subtitle="Ctrl-C to quit")

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def set_state(self, state: str) -> None:
        self.state = state
        self._refresh()

    def heard(self, text: str) -> None:
        self.user = text
        if self._live is None:
            print(f"you:  {text}", file=sys.stderr)
        self._refresh()

    def answer_delta(self, text: str) -> None:
        self.answer += text
        self._refresh()

    def new_answer(self) -> None:
        self.answer = ""
        self._refresh()

    def turn_latency(self, seconds: float) -> None:
        self.latencies.append(seconds)
        self._refresh()

    def answer_done(self, status: str | None) -> None:
        if self._live is None:
            suffix = "" if status in (None, "completed") else f" [{status}]"
            latency = f" ({self.latencies[-1] * 1000:.0f} ms)" if self.latencies else ""
            print(f"omni: {self.answer.strip()}{suffix}{latency}", file=sys.stderr)
        self._refresh()

    def note(self, text: str) -> None:
        """Something the user should know once (e.g. a fallback omni chose)."""
        if self._live is not None:
            self._live.console.print(f"[yellow]omni talk: {text}[/yellow]")
        else:
            print(f"omni talk: {text}", file=sys.stderr)

    def problem(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(f"[red]server: {text}[/red]")
        else:
            print(f"omni: server error: {text}", file=sys.stderr)


class EventLog:
    """`--transcript PATH`: every event in and out as JSON lines, audio replaced by its size.
    The file is made with the first event, so a talk that never connected leaves none behind."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._handle: TextIO | None = None
        self._start = time.monotonic()

    def write(self, direction: str, event: dict) -> None:
        if self._path is None:
            return
        import json

        if self._handle is None:
            try:
                self._handle = open(self._path, "w", encoding="utf-8")
            except OSError as exc:
                path, self._path = self._path, None  # said once; the talk ends with it
                raise UsageError(f"cannot write --transcript {path}: {exc.strerror or exc}") from exc

        slim = {k: ({"bytes": len(v) * 3 // 4} if k in ("audio", "delta") and event.get("type", "").endswith(("audio.delta", "append")) else v)
                for k, v in event.items()}
        self._handle.write(json.dumps({"t": round(time.monotonic() - self._start, 3), "dir": direction, "event": slim}) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
