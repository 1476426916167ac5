"""What `omni talk` shows. On a terminal, a live panel (`LiveView`): the state, the microphone's
level and the turn's length, the answer's words as they are heard, and this turn's wait with its
stages; each finished line (you: ..., omni: ...) is printed above the panel, into the scrollback,
where it stays after the talk ends. With no terminal, plain lines on stderr (`LineView`). When
stderr is redirected but the process has a terminal, the panel is drawn on the terminal and the
plain lines go to the redirected stderr (`PanelAndLines`). All read a `TalkState`.
"""

import sys
import time
from typing import IO, TextIO

from omnicli.errors import UsageError
from omnicli.talk import state as states
from omnicli.talk.state import TalkState

_METER_CELLS = 24
_ANSWER_LINES = 3
"""The answer as it streams shows its last lines only; the whole of it goes to the scrollback."""
_COLOURS = {states.LOADING: "magenta", states.HEARING: "green", states.SPEAKING: "cyan", states.THINKING: "yellow",
            states.INTERRUPTED: "red", states.MUTED: "red", states.IDLE: "blue", states.LISTENING: "blue",
            states.WAITING: "red"}


def talk_view(keys: str):
    """The view for this process: the panel on stderr when it is a terminal; on the controlling
    terminal, with plain lines on stderr, when only stderr is redirected; plain lines with no
    terminal, or when no one is at it (stdin and stdout redirected too: a script, a test)."""
    if sys.stderr.isatty():
        return LiveView(keys)
    if not (sys.stdin.isatty() or sys.stdout.isatty()):
        return LineView()
    try:
        terminal = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115 - closed with the view
    except OSError:  # no controlling terminal (a service, a CI job)
        return LineView()
    return PanelAndLines(LiveView(keys, terminal=terminal), LineView())


class LiveView:
    """A rich `Live` panel redrawn ten times a second from the state (in rich's refresh thread,
    so a render reads each changing field once). Nothing else may write to the terminal meanwhile
    but through this console (the keys are read without echo), or the panel's redraw lands in the
    wrong place and leaves stale copies above it."""

    def __init__(self, keys: str, console=None, *, terminal: IO[str] | None = None) -> None:
        """`terminal`: a terminal opened for the panel (stderr is elsewhere), closed with the view."""
        from rich.console import Console
        from rich.live import Live

        self.keys = keys
        self._terminal = terminal
        self.console = console or (Console(file=terminal, highlight=False) if terminal else Console(stderr=True, highlight=False))
        self._state: TalkState | None = None
        self._live = Live(console=self.console, get_renderable=self._render, refresh_per_second=10, transient=True,
                          redirect_stderr=terminal is None)  # a redirected stderr keeps its own lines

    def __enter__(self) -> "LiveView":
        self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        self._live.stop()
        if self._terminal is not None:
            self._terminal.close()

    def show(self, state: TalkState) -> None:
        """Draw the panel from `state` from now on."""
        self._state = state

    def said(self, who: str, text: str, detail: str = "") -> None:
        """A line of the transcript; a long one wraps under its text, the detail stays whole at the right."""
        from rich.table import Table
        from rich.text import Text

        line = Table.grid(expand=True)
        line.add_column(width=6, no_wrap=True)
        line.add_column(ratio=1)
        line.add_column(no_wrap=True, justify="right")
        line.add_row(Text(f"{who}:", style="bold green" if who == "omni" else "bold"), Text(text),
                     Text(f"  {detail}" if detail else "", style="dim"))
        self._live.refresh()  # the panel drawn under the line shows the state that made it, not the last frame's
        self.console.print(line)

    def hint(self, text: str) -> None:
        """Redraw the panel at once, so the state's new hint shows."""
        self._live.refresh()  # shown in the panel until the next turn

    def listening(self, label: str) -> None:
        """The session is ready: the panel says so itself."""

    def note(self, text: str) -> None:
        """Something the user should know once (e.g. a fallback omni chose)."""
        self.console.print(f"omni talk: {text}", style="yellow", markup=False)

    def problem(self, text: str) -> None:
        """A server error, printed in red above the panel."""
        self.console.print(f"server: {text}", style="red", markup=False)

    def _render(self):
        from rich.console import Group
        from rich.panel import Panel
        from rich.text import Text

        state = self._state
        if state is None:
            return Text("")
        label = state.label
        status = Text("● " + label, style=f"bold {_COLOURS.get(label, 'white')}")
        for badge in state.badges:
            status.append(f" · {badge}", style="yellow")
        rows = [status]
        if state.ready:
            rows.append(self._meter(state))
        spoken, hint, timing = state.spoken(), state.shown_hint(), state.shown_timing()  # once: the loop may change them meanwhile
        if spoken:
            rows.append(Text("omni: ", style="bold green") + Text(self._tail(spoken)))
        if hint:
            rows.append(Text(hint, style="yellow"))
        if timing is not None:
            if (headline := timing.headline()) is not None:
                rows.append(Text(headline, style="bold"))
            if breakdown := timing.breakdown():
                rows.append(Text(breakdown, style="dim"))
        return Panel(Group(*rows), title="omni talk", title_align="left", subtitle=self.keys, subtitle_align="left")

    @staticmethod
    def _meter(state: TalkState):
        from rich.text import Text

        if state.muted:
            return Text("mic  muted", style="red")
        filled = round(state.level * _METER_CELLS)
        meter = Text("mic  ")
        meter.append("█" * filled, style="green")
        meter.append("░" * (_METER_CELLS - filled), style="dim")
        if state.recording:
            meter.append(f"  {state.recorded:4.1f} s", style="bold")
        return meter

    def _tail(self, text: str) -> str:
        room = max(20, (self.console.width - 10) * _ANSWER_LINES)
        return text if len(text) <= room else "…" + text[-room + 1:]


class LineView:
    """Plain lines for a stderr that is not a terminal (a log, a pipe, a test)."""

    def __enter__(self) -> "LineView":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def show(self, state: TalkState) -> None:
        """Nothing to draw: plain lines are printed as things happen."""

    def said(self, who: str, text: str, detail: str = "") -> None:
        """A finished line of the conversation, its detail in brackets."""
        print(f"{who}: ".ljust(6) + text + (f" ({detail})" if detail else ""), file=sys.stderr)

    def hint(self, text: str) -> None:
        """Something the user should know about their last turn, on a line of its own."""
        print(f"omni talk: {text}", file=sys.stderr)

    def listening(self, label: str) -> None:
        """The session is ready, said once: with no panel, the only sign that the user is heard."""
        print(f"omni talk: {label}", file=sys.stderr)

    def note(self, text: str) -> None:
        """Something the user should know once (e.g. a fallback omni chose), on a line."""
        print(f"omni talk: {text}", file=sys.stderr)

    def problem(self, text: str) -> None:
        """A server error, on a line of its own."""
        print(f"omni: server error: {text}", file=sys.stderr)


class PanelAndLines:
    """The panel on the terminal and the plain lines on the redirected stderr, told the same news."""

    def __init__(self, panel: LiveView, lines: LineView) -> None:
        self.panel, self.lines = panel, lines

    def __enter__(self) -> "PanelAndLines":
        self.panel.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.panel.__exit__(*exc)

    def show(self, state: TalkState) -> None:
        """Draw the panel from `state` from now on."""
        self.panel.show(state)

    def said(self, who: str, text: str, detail: str = "") -> None:
        """A finished line of the conversation, on both."""
        self.panel.said(who, text, detail)
        self.lines.said(who, text, detail)

    def hint(self, text: str) -> None:
        """A word about the last turn, on both."""
        self.panel.hint(text)
        self.lines.hint(text)

    def listening(self, label: str) -> None:
        """The session is ready: a line for the log (the panel says so itself)."""
        self.lines.listening(label)

    def note(self, text: str) -> None:
        """Something the user should know once, on both."""
        self.panel.note(text)
        self.lines.note(text)

    def problem(self, text: str) -> None:
        """A server error, on both."""
        self.panel.problem(text)
        self.lines.problem(text)


def _slim(key: str, value, kind: str):
    """An event's field as the log keeps it: audio and pictures by their size."""
    if key in ("audio", "delta") and kind.endswith(("audio.delta", "append")):
        return {"bytes": _decoded_size(value)}
    if key == "video_frames" and isinstance(value, list):
        return [{"bytes": _decoded_size(frame)} for frame in value]
    return value


def _decoded_size(text: str) -> int:
    """The bytes a base64 string holds, without decoding it."""
    return len(text) * 3 // 4 - text[-2:].count("=")


class EventLog:
    """`--transcript PATH`: every event in and out as JSON lines, audio and pictures replaced by their size,
    and omni talk's own notes (`note`: how each answer played, gaps and underruns). The file is made
    with the first event, so a talk that never connected leaves none behind."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._handle: TextIO | None = None
        self._start = time.monotonic()

    def write(self, direction: str, event: dict) -> None:
        """Log one event, `in`, `out` or `note`, with its time since the talk began."""
        if self._path is None:
            return
        import json

        if self._handle is None:
            try:
                self._handle = open(self._path, "w", encoding="utf-8")
            except OSError as exc:
                path, self._path = self._path, None  # said once; the talk ends with it
                raise UsageError(f"cannot write --transcript {path}: {exc.strerror or exc}") from exc

        slim = {k: _slim(k, v, event.get("type", "")) for k, v in event.items()}
        self._handle.write(json.dumps({"t": round(time.monotonic() - self._start, 3), "dir": direction, "event": slim}) + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Close the log file, if one was made."""
        if self._handle is not None:
            self._handle.close()
