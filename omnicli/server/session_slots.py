"""How many turn-based realtime sessions a server holds at once (`--max-realtime-sessions`).

Each session can buffer 64 MiB of audio and keeps Silero and Whisper busy; past what the cores
can serve, keepalives go unanswered and sessions already admitted are dropped. A session over the
limit is refused at the door instead: an `error` event (`realtime_session_busy`), then the socket
is closed with 1013, "try again later".
"""

import os

BUSY_CLOSE = 1013
BUSY_CODE = "realtime_session_busy"


def default_limit() -> int:
    """Sized to the machine: two sessions a core."""
    return 2 * (os.cpu_count() or 1)


class SessionSlots:
    """A count of admitted sessions against a limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.taken = 0

    def take(self) -> bool:
        """Admit one session; False when the server is full."""
        if self.taken >= self.limit:
            return False
        self.taken += 1
        return True

    def release(self) -> None:
        """An admitted session ended."""
        self.taken = max(0, self.taken - 1)

    def refusal(self) -> str:
        """The `error` event's message for a session turned away."""
        return f"this server holds at most {self.limit} realtime sessions at once (--max-realtime-sessions); try again later"
