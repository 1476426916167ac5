"""A program on a pseudo-terminal, its output rendered by a terminal emulator (pyte) into the
screen a person would see, scrollback included. Tests type keys into it and wait for what the
screen shows; the waits are bounded only so a broken program fails instead of hanging."""

import fcntl
import os
import pty
import re
import select
import struct
import termios
import time

import pyte

SAFETY_S = 60


class Terminal:
    def __init__(self, argv: list[str], env: dict[str, str], *, rows: int = 30, cols: int = 100) -> None:
        self.screen = pyte.HistoryScreen(cols, rows, history=2000)
        self._stream = pyte.ByteStream(self.screen)
        self.returncode: int | None = None
        self._eof = False
        pid, fd = pty.fork()
        if pid == 0:  # the child: the terminal's size, then the program
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execve(argv[0], argv, env)
        self.pid, self.fd = pid, fd

    # ---- what a person sees --------------------------------------------------------------

    def _text(self, line) -> str:
        return "".join(line[x].data for x in range(self.screen.columns)).rstrip()

    def lines(self) -> list[str]:
        """Everything on the terminal: the scrollback, then the screen, with trailing blank lines dropped."""
        lines = [self._text(line) for line in self.screen.history.top] + [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def text(self) -> str:
        return "\n".join(self.lines())

    def line_with(self, pattern: str) -> str | None:
        """The last line matching the regular expression `pattern`."""
        found = [line for line in self.lines() if re.search(pattern, line)]
        return found[-1] if found else None

    def modes(self) -> tuple[bool, bool]:
        """(echo, canonical): how the terminal's line discipline is set now."""
        lflag = termios.tcgetattr(self.fd)[3]
        return bool(lflag & termios.ECHO), bool(lflag & termios.ICANON)

    # ---- driving it ----------------------------------------------------------------------

    def press(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def _pump(self, timeout: float) -> None:
        if self._eof:
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the program closed its side
            data = b""
        if data:
            self._stream.feed(data)
        else:
            self._eof = True

    def wait_for(self, condition, what: str) -> None:
        """Until `condition(self)` holds, or a substring `condition` is on the terminal."""
        check = (lambda t: condition in t.text()) if isinstance(condition, str) else condition
        deadline = time.monotonic() + SAFETY_S
        while not check(self):
            if self._eof or time.monotonic() > deadline:
                raise AssertionError(f"never saw {what}; the terminal shows:\n{self.text()}")
            self._pump(0.05)

    def wait_exit(self) -> int:
        deadline = time.monotonic() + SAFETY_S
        while not self._eof and time.monotonic() < deadline:
            self._pump(0.1)
        _, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def close(self) -> None:
        """Whatever happened, leave no program running."""
        if self.returncode is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)
