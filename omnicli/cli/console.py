"""The one output sink: data goes to stdout, everything a person reads goes to stderr.

rich is imported on first use, not at start-up, so `omni --help` stays fast.
"""

import functools
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.status import Status


@functools.cache
def stderr():
    """The rich console on stderr, made once on first use."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def note(message: str) -> None:
    """Tell the person at the terminal something, on stderr, never mixed into the data on stdout."""
    print(message, file=sys.stderr)


class Thinking:
    """A "thinking…" spinner on a terminal (stderr) from sending a request until its first
    output; stop() erases it, leaving the cursor where it was, at the start of the line."""

    def __init__(self) -> None:
        self._status: Status | None = None

    def start(self) -> None:
        """Show the spinner (on a terminal only)."""
        if sys.stderr.isatty():
            status = stderr().status("thinking…", spinner="dots")
            status.start()
            self._status = status

    def stop(self) -> None:
        """Erase the spinner if it shows; safe to call more than once."""
        if self._status is not None:
            status, self._status = self._status, None
            status.stop()
