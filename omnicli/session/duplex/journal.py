"""The outbound journal of a duplex session: every server event gets the next `server_event_seq`
and is kept until the client acknowledges it (`session.event_ack`), so a client that lost its
socket can resume and have everything after its last received event replayed, once, in order.

The journal is bounded (events and bytes): when it overflows, the oldest unacknowledged events go
and a resume from before them can only be answered with `session.resync_required`.
"""

from collections import deque

from omnicli.protocol.duplex import SEQ, ResyncReason

MAX_EVENTS = 20000
MAX_BYTES = 32 * 1024 * 1024
"""About 8 minutes of 24 kHz PCM16 in base64: far more than a socket drop needs."""


class Journal:
    """Numbers and keeps a session's outbound events until acknowledged, for replay on resume."""

    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.last_seq = 0
        """The seq of the newest event (0: none yet)."""
        self._events: deque[tuple[int, dict, int]] = deque()
        self._bytes = 0
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._acked = 0
        self._overflowed_to = 0
        """Events up to this seq were dropped unacknowledged."""

    def record(self, event: dict) -> dict:
        """Stamp `event` with the next seq and keep it; returns the stamped event."""
        self.last_seq += 1
        stamped = {**event, SEQ: self.last_seq}
        size = _size(stamped)
        self._events.append((self.last_seq, stamped, size))
        self._bytes += size
        while len(self._events) > self._max_events or (self._bytes > self._max_bytes and len(self._events) > 1):
            seq, _, dropped = self._events.popleft()
            self._bytes -= dropped
            if seq > self._acked:
                self._overflowed_to = seq
        return stamped

    def ack(self, seq: int) -> None:
        """The client holds every event up to `seq`: they need no replay."""
        self._acked = max(self._acked, min(seq, self.last_seq))
        while self._events and self._events[0][0] <= self._acked:
            _, _, size = self._events.popleft()
            self._bytes -= size

    def after(self, seq: int) -> list[dict] | ResyncReason:
        """The events after `seq`, in order; or why they cannot all be replayed."""
        if seq < 0 or seq > self.last_seq:
            return ResyncReason.JOURNAL_GAP
        if seq < self._overflowed_to:
            return ResyncReason.JOURNAL_OVERFLOW
        oldest = self._events[0][0] if self._events else self.last_seq + 1
        if seq + 1 < oldest:
            return ResyncReason.JOURNAL_GAP  # acknowledged, then asked for again
        return [event for s, event, _ in self._events if s > seq]


def _size(event: dict) -> int:
    """About how many bytes the event holds: its audio, if any, and a little for the rest."""
    audio = event.get("delta")
    return 1024 + (len(audio) if isinstance(audio, str) else 0)
