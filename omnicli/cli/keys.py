"""Keys for `omni talk`. On a terminal each key acts at once and is not echoed (cbreak mode): an
echoed key moves the cursor under the live panel, whose next redraw then leaves a stale copy of
itself above. The terminal's own settings come back on every way out (the `with` block ends on
q, Ctrl-C and errors alike); Ctrl-C still sends SIGINT, but no longer throws away output still on
its way to the screen (which would leave the panel's last redraw, and its erasure at exit, astray
over the transcript). A stdin that is not a terminal is not read (push-to-talk needs one).
"""

import asyncio
import os
import sys
from collections.abc import Callable

ACTIONS = {" ": "talk", "\r": "talk", "\n": "talk", "m": "mute", "M": "mute", "q": "quit", "Q": "quit",
           "\x04": "quit"}
"""Space or Enter: start or send a push-to-talk turn; m: mute or unmute the mic; q or Ctrl-D: quit.
Esc, alone (not the start of an arrow key's sequence): stop the answer, and nothing else."""
ESC = b"\x1b"

OnKey = Callable[[str], None]


class TerminalKeys:
    """Single keys from the terminal on `fd`, while the `with` block lasts; `on_key(action)` is
    called on the event loop for each key in `ACTIONS` (others are ignored), "quit" at end of input."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_key: OnKey, fd: int | None = None) -> None:
        self._loop = loop
        self._on_key = on_key
        self._fd = sys.stdin.fileno() if fd is None else fd
        self._saved: list | None = None

    def __enter__(self) -> "TerminalKeys":
        import termios
        import tty

        self._saved = termios.tcgetattr(self._fd)
        try:
            tty.setcbreak(self._fd, termios.TCSANOW)
            mode = termios.tcgetattr(self._fd)
            mode[3] |= termios.NOFLSH  # Ctrl-C must not drop output on its way: the panel's redraw would go astray
            termios.tcsetattr(self._fd, termios.TCSANOW, mode)
            self._loop.add_reader(self._fd, self._read)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._loop.remove_reader(self._fd)
        self._restore()

    def _restore(self) -> None:
        import termios

        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def _read(self) -> None:
        try:
            data = os.read(self._fd, 64)
        except OSError:
            data = b""
        if not data:  # the terminal went away
            self._loop.remove_reader(self._fd)
            self._on_key("quit")
            return
        if data == ESC:
            self._on_key("interrupt")
            return
        if data.startswith(ESC):
            return  # an arrow or function key's escape sequence, not a letter
        for char in data.decode(errors="ignore"):
            if (action := ACTIONS.get(char)) is not None:
                self._on_key(action)

