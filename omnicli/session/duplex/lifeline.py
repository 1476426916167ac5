"""What makes a duplex session outlive its socket: the socket attached now (a resume attaches
another, and the one before hears `session.replaced`), the journal that numbers every event out
(`server_event_seq`) and replays what a dropped socket missed, the lease (no client event for
`idle_timeout_s`: `session.expired`) and the detach grace (no resume within `grace_s`: expired too).
`DuplexSession` builds the conversation on top of it.
"""

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable

from omnicli.protocol.duplex import (
    ClosedReason,
    ErrorCode,
    ExpiredReason,
    ResyncReason,
    ServerEvent,
    handshake_error,
    realtime_error,
)
from omnicli.session.conversation import new_id
from omnicli.session.duplex.journal import Journal

log = logging.getLogger("omni")

Send = Callable[[dict], Awaitable[None]]


class Attachment:
    """One socket attached to a session: how to send to it and how to close it."""

    def __init__(self, send: Send, close: Callable[[int, str], Awaitable[None]]) -> None:
        self.send = send
        self._close = close
        self.generation = 0
        self.closed = False

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the socket once; a socket already gone is not an error."""
        if self.closed:
            return
        self.closed = True
        try:
            await self._close(code, reason)
        except Exception as exc:  # noqa: BLE001 - already gone
            log.debug("duplex: closing a socket: %s", exc)



class Lifeline:
    """A duplex session's life apart from its socket: attachment, journal, resume, lease and grace."""

    def __init__(self, session_id: str, *, grace_s: float, on_end: Callable[["Lifeline"], None]) -> None:
        self.id = session_id
        self.grace_s = grace_s
        self.incarnation = 0
        self.generation = 0
        self.resume_token = _token()
        self.journal = Journal()
        self.closed = False
        self._on_end = on_end
        self._attachment: Attachment | None = None
        self._lock = asyncio.Lock()
        """Client events are carried out one at a time, in order; expiry waits its turn too."""
        self._send_lock = asyncio.Lock()
        self._last_activity = time.monotonic()
        self._detached_at: float | None = None
        self._poke = asyncio.Event()
        self._watchdog: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def idle_timeout_s(self) -> float:
        """The lease: seconds without a client event before the session expires (the subclass says)."""
        raise NotImplementedError

    async def _stop(self, reason: str) -> None:
        """Stop whatever the session is doing (the answer under way), saying why."""

    def _released(self) -> None:
        """The session is over: let go of what it holds."""

    async def attach_first(self, attachment: Attachment) -> None:
        """Attach the session's first socket and start watching the lease."""
        self.generation = attachment.generation = 1
        self._attachment = attachment
        self._watchdog = asyncio.create_task(self._watch())

    async def resume(self, attachment: Attachment, event: dict) -> bool:
        """`session.resume` on a new socket: re-attach and replay, or refuse (flat error) / resync."""
        last = event.get("last_received_server_event_seq", 0)
        if self.closed:
            await _send_quietly(attachment, handshake_error(ErrorCode.RESUME_EXPIRED, f"Unknown or expired duplex session: {self.id}"))
            return False
        if event.get("resume_token") != self.resume_token or event.get("incarnation", self.incarnation) != self.incarnation:
            await _send_quietly(attachment, handshake_error(ErrorCode.RESUME_INVALID, "resume_token or incarnation does not match the session"))
            return False
        if isinstance(last, bool) or not isinstance(last, int):
            await _send_quietly(attachment, handshake_error(ErrorCode.INVALID_EVENT, "last_received_server_event_seq must be an integer"))
            return False
        async with self._send_lock:
            replay = self.journal.after(last)
            if isinstance(replay, ResyncReason):
                await _send_quietly(attachment, {"type": ServerEvent.RESYNC_REQUIRED.value, "session_id": self.id, "reason": replay.value})
            else:
                old, self._attachment = self._attachment, None
                if old is not None:
                    await _send_quietly(old, {"type": ServerEvent.SESSION_REPLACED.value, "session_id": self.id,
                                              "attachment_generation": old.generation})
                    self._spawn(old.close(4000, "session.replaced"))
                self.generation += 1
                attachment.generation, self.resume_token = self.generation, _token()
                try:
                    await attachment.send({"type": ServerEvent.SESSION_RESUMED.value, "session_id": self.id,
                                           "incarnation": self.incarnation, "attachment_generation": self.generation,
                                           "resume_token": self.resume_token, "last_server_event_seq": self.journal.last_seq})
                    for stamped in replay:
                        await attachment.send(stamped)
                except Exception as exc:  # noqa: BLE001 - the new socket broke too: detached, the grace runs
                    log.debug("duplex: resume replay failed: %s", exc)
                    self._detached_at = time.monotonic()
                    self._poke.set()
                    return False
                self._attachment, self._detached_at = attachment, None
        if isinstance(replay, ResyncReason):
            await self._end()
            return False
        self._touch()
        return True

    def detach(self, attachment: Attachment) -> None:
        """The socket is gone; the session waits `grace_s` for a resume."""
        if self._attachment is attachment:
            self._attachment = None
            self._detached_at = time.monotonic()
            self._poke.set()

    def _touch(self) -> None:
        self._last_activity = time.monotonic()
        self._poke.set()

    async def _watch(self) -> None:
        """The lease (no client event for idle_timeout_s) and the detach grace."""
        while not self.closed:
            if self._attachment is None and self._detached_at is not None:
                deadline, reason = self._detached_at + self.grace_s, ExpiredReason.DISCONNECT_GRACE
            else:
                deadline, reason = self._last_activity + self.idle_timeout_s, ExpiredReason.IDLE_TTL
            delay = deadline - time.monotonic()
            if delay <= 0:
                await self._expire(reason)
                return
            self._poke.clear()
            try:
                await asyncio.wait_for(self._poke.wait(), delay)
            except TimeoutError:
                pass

    async def _expire(self, reason: ExpiredReason) -> None:
        async with self._lock:
            if self.closed:
                return
            await self._stop("session_expired")
            await self.emit(ServerEvent.SESSION_EXPIRED, session_id=self.id, incarnation=self.incarnation, reason=reason.value)
            await self._end()

    async def close(self, reason: ClosedReason = ClosedReason.SESSION_CLOSE) -> None:
        """End the session: `session.closed` with `reason`, then its socket closes."""
        await self._stop("client_cancelled")
        await self.emit(ServerEvent.SESSION_CLOSED, session_id=self.id, reason=reason.value)
        await self._end()

    async def _end(self) -> None:
        self.closed = True
        self._released()
        self._on_end(self)
        if self._attachment is not None:
            self._spawn(self._attachment.close(1000, "session ended"))
        if self._watchdog is not None and self._watchdog is not asyncio.current_task():
            self._watchdog.cancel()

    async def shutdown(self) -> None:
        """The server stops: end without a word."""
        if not self.closed:
            await self._stop("session_expired")
            await self._end()

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- events out ----------------------------------------------------------------------

    async def emit(self, kind: str, **fields) -> None:
        """Journal one server event and send it; a dead socket detaches, the journal keeps the event."""
        if self.closed:
            return
        event = {"type": str(kind), "event_id": new_id("event"), **fields}
        async with self._send_lock:
            stamped = self.journal.record(event)
            attachment = self._attachment
            if attachment is not None:
                try:
                    await attachment.send(stamped)
                except Exception as exc:  # noqa: BLE001 - the socket is gone; the journal keeps the event
                    log.debug("duplex: cannot send %s: %s", kind, exc)
                    self.detach(attachment)

    async def error(self, message: str, code: str, *, event_id=None, param=None) -> None:
        """Send an `error` event; the session goes on."""
        error = realtime_error(code, message, event_id=event_id, param=param)
        await self.emit(ServerEvent.ERROR, error=error["error"])


def _token() -> str:
    return "rt_" + secrets.token_urlsafe(24)


async def _send_quietly(attachment: Attachment, event: dict) -> None:
    try:
        await attachment.send(event)
    except Exception as exc:  # noqa: BLE001 - a socket that is gone hears nothing
        log.debug("duplex: cannot send %s: %s", event.get("type"), exc)

