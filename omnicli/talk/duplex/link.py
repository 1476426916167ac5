"""One duplex session (`/v1/realtime?duplex=1`) over as many sockets as it takes.

The link opens the session (`session.update` -> `session.created`), keeps its lease
(`session.heartbeat` on an interval the session's `idle_timeout_s` sets), acknowledges every
numbered server event (`session.event_ack`), and when the socket drops, resumes on a new one
(`session.resume` with the last `server_event_seq` seen, jittered exponential backoff) where the
server's capabilities say it can; replayed events that were already seen are dropped by their
sequence number, so the conversation above sees each event once. Endings the session cannot
recover from (`session.replaced`, `session.expired`, `session.resync_required`, an error in the
handshake) raise `ServerError` with one line saying which.
"""

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import NoReturn, Protocol

from omnicli.errors import OmniError, ServerError, capped
from omnicli.protocol.duplex import (
    HEARTBEAT_INTERVAL_S,
    SEQ,
    Capabilities,
    ClientEvent,
    ServerEvent,
    error_code_and_message,
    resume_event,
)
from omnicli.talk.transport import WebSocketTransport

log = logging.getLogger("omni")
_HANDSHAKE_SECONDS = 15.0
_CLOSE_SECONDS = 5.0
"""How long `session.close` waits for `session.closed` before the socket is closed anyway."""


class Socket(Protocol):
    """What the link speaks over: a WebSocket (`DuplexSocket`), or the session in this process
    (`duplex_local.LocalDuplexSocket`)."""

    async def open(self) -> None:
        """Connect, before the first event is sent."""

    async def send(self, event: dict) -> None:
        """Send one client event; a lost connection raises ServerError."""

    def events(self) -> AsyncIterator[dict]:
        """The server's events as they arrive, until the connection ends."""

    async def close(self) -> None:
        """End the connection and free what it holds."""


@dataclass(frozen=True)
class Backoff:
    """Jittered exponential backoff between resume attempts: attempt n (from 0) waits a random
    time between `low` and min(`high`, `low` * 2**(n+1)) seconds, the first too, so clients dropped
    together do not all come back at once."""

    attempts: int = 5
    low: float = 0.25
    high: float = 4.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before resume attempt `attempt` (from 0), jittered."""
        return random.uniform(self.low, max(self.low, min(self.high, self.low * 2 ** (attempt + 1))))


class DuplexSocket(WebSocketTransport):
    """omni's realtime WebSocket, at the duplex lane. `autostart=0` (as vLLM-Omni's own client
    connects) so the server never makes a bare session, without our voice clip, before our
    `session.update` arrives."""

    def __init__(self, base_url: str, api_key: str | None, model: str | None) -> None:
        super().__init__(base_url, api_key, model)
        self.url += ("&" if "?" in self.url else "?") + "duplex=1&autostart=0"


def heartbeat_seconds(session: dict) -> float:
    """The lease the server gives (`idle_timeout_s`), renewed three times within it."""
    idle = session.get("idle_timeout_s")
    if isinstance(idle, int | float) and idle > 0:
        return min(HEARTBEAT_INTERVAL_S, idle / 3)
    return HEARTBEAT_INTERVAL_S


def ending(event: dict) -> str | None:
    """What a session-ending server event says, in one line; None for any other event."""
    kind, reason = event.get("type"), event.get("reason")
    because = f" ({reason})" if reason else ""
    if kind == ServerEvent.SESSION_REPLACED:
        return "the duplex session was taken over by another connection (session.replaced)"
    if kind == ServerEvent.SESSION_EXPIRED:
        return f"the duplex session expired on the server{because}"
    if kind == ServerEvent.RESYNC_REQUIRED:
        return f"the server can no longer replay the duplex session{because}; start a new one"
    if kind == ServerEvent.ERROR and not isinstance(event.get("error"), dict):  # the flat handshake shape
        code, message = error_code_and_message(event)
        return f"the server ended the duplex session: {capped(message)}" + (f" ({code})" if code else "")
    return None


class SessionRefused(ServerError):
    """The server answered the opening `session.update` with an error; `code` is its error code."""

    def __init__(self, message: str, code: str | None) -> None:
        super().__init__(message)
        self.code = code


class DuplexLink:
    """`open(session)`, then `events()` (one reader) and `send()` from anywhere; `close()` ends it."""

    def __init__(self, base_url: str, api_key: str | None, model: str | None, *,
                 log: Callable[[str, dict], None] = lambda direction, event: None, backoff: Backoff = Backoff(),
                 socket: Callable[[], Socket] | None = None) -> None:
        self._socket_factory = socket or (lambda: DuplexSocket(base_url, api_key, model))
        self._log = log
        self.backoff = backoff
        self.capabilities = Capabilities()
        self.session: dict = {}
        self.session_id: str | None = None
        self.resume_token: str | None = None
        self.incarnation = 0
        self.last_seq: int | None = None
        self.resumes = 0
        """Times the session was resumed on a new socket."""
        self.duplicates = 0
        """Replayed events dropped because they had been seen."""
        self.heartbeat_s = HEARTBEAT_INTERVAL_S
        self.closed = asyncio.Event()
        """The server said `session.closed` (or the session is otherwise over)."""
        self._sock: Socket | None = None
        self._stream: AsyncIterator[dict] | None = None
        self._pending: list[dict] = []
        self._up = asyncio.Event()
        self._ended: OmniError | None = None
        self._closing = False
        self._reading = False
        self._heartbeat: asyncio.Task | None = None

    @property
    def closing(self) -> bool:
        """`close()` was called: a `session.closed` now is the answer to ours."""
        return self._closing

    # ---- opening --------------------------------------------------------------------------

    async def open(self, session: dict) -> dict:
        """Create the session; its `session.created`. A refusal raises ServerError in one line."""
        sock = self._socket_factory()
        await sock.open()
        self._use(sock)
        await self._write(sock, {"type": ClientEvent.SESSION_UPDATE.value, "session": session})
        while True:
            event = await self._first(sock, "session.created")
            if event.get("type") == ServerEvent.ERROR:
                code, message = error_code_and_message(event)
                self._log("in", event)
                await _close_quietly(sock)
                raise SessionRefused(f"the server refused the duplex session: {capped(message)}" + (f" ({code})" if code else ""),
                                     code)
            await self._take(event)
            if event.get("type") == ServerEvent.SESSION_CREATED:
                break
        self._up.set()
        self._heartbeat = asyncio.create_task(self._beat())
        return event

    def _use(self, sock: Socket) -> None:
        self._sock, self._stream = sock, aiter(sock.events())

    async def _first(self, sock: Socket, awaited: str) -> dict:
        """The next event on a socket being set up (nothing else reads it yet)."""
        assert self._stream is not None
        try:
            event = await asyncio.wait_for(anext(self._stream), _HANDSHAKE_SECONDS)
        except StopAsyncIteration:
            raise ServerError(f"the server closed the duplex connection before {awaited}") from None
        except TimeoutError:
            raise ServerError(f"the server sent no {awaited} within {_HANDSHAKE_SECONDS:g} s") from None
        return event

    def _adopt(self, event: dict) -> None:
        """Identity and resume credentials from `session.created` / `session.resumed`."""
        session = event.get("session") if isinstance(event.get("session"), dict) else None
        if session is not None:
            self.session = session
            self.capabilities = Capabilities.of(event)
            self.heartbeat_s = heartbeat_seconds(session)
        self.session_id = (session or {}).get("id") or event.get("session_id") or self.session_id
        self.resume_token = event.get("resume_token") or self.resume_token
        if isinstance(event.get("incarnation"), int):
            self.incarnation = event["incarnation"]

    # ---- sending --------------------------------------------------------------------------

    async def send(self, event: dict) -> None:
        """Send on the current socket; while the link is resuming, wait for the new one."""
        while True:
            await self._up.wait()
            if self._ended is not None:
                raise self._ended
            sock = self._sock
            assert sock is not None
            try:
                await self._write(sock, event)
                return
            except ServerError:
                if self._closing:
                    raise
                if sock is self._sock:
                    self._up.clear()  # the reader notices the drop and resumes (or ends the link)
                await asyncio.sleep(0)

    async def _write(self, sock: Socket, event: dict) -> None:
        await sock.send(event)
        self._log("out", event)

    async def _beat(self) -> None:
        """The lease: a heartbeat every `heartbeat_s` (held back while the link resumes)."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.send({"type": ClientEvent.SESSION_HEARTBEAT.value})
            except OmniError:
                return  # the link ended; its reader says why

    # ---- receiving ------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[dict]:
        """Every server event once, in order, across resumes; ends after `session.closed` or
        when the socket closes while the link is closing."""
        self._reading = True
        try:
            while True:
                while self._pending:
                    if (event := await self._take(self._pending.pop(0))) is not None:
                        yield event
                why = "the connection closed"
                assert self._stream is not None
                try:
                    async for raw in self._stream:
                        if (event := await self._take(raw)) is not None:
                            yield event
                        if self.closed.is_set():
                            return
                except ServerError as exc:
                    if self._ended is not None:
                        raise  # the session is over, not just the socket
                    why = str(exc)
                if self._closing:
                    self.closed.set()
                    return
                await self._resume(why)
        finally:
            self._reading = False

    async def _take(self, event: dict) -> dict | None:
        """An event as the conversation should see it (and the log), or None for one already seen."""
        kind = event.get("type")
        seq = event.get(SEQ)
        if isinstance(seq, int) and kind != ServerEvent.SESSION_RESUMED:
            if self.last_seq is not None and seq <= self.last_seq:
                self.duplicates += 1
                return None
            self.last_seq = seq
        self._log("in", event)
        if (line := ending(event)) is not None:
            self._end(ServerError(line))  # nothing to acknowledge: the session is gone
        self._accept(event)
        if isinstance(seq, int) and kind not in (ServerEvent.SESSION_RESUMED, ServerEvent.SESSION_CLOSED):
            await self._ack(seq)
        return event

    def _accept(self, event: dict) -> None:
        kind = event.get("type")
        if kind in (ServerEvent.SESSION_CREATED, ServerEvent.SESSION_RESUMED):
            self._adopt(event)
        elif kind == ServerEvent.SESSION_CLOSED:
            self.closed.set()

    async def _ack(self, seq: int) -> None:
        """Straight on the socket the event came from: a dropped one is resumed from `last_seq` anyway."""
        if self._sock is None:
            return
        try:
            await self._write(self._sock, {"type": ClientEvent.SESSION_EVENT_ACK.value, SEQ: seq})
        except ServerError:
            pass

    def _end(self, failure: OmniError) -> NoReturn:
        self._ended = failure
        self._up.set()  # senders wake up to the failure
        raise failure

    # ---- resuming -------------------------------------------------------------------------

    async def _resume(self, why: str) -> None:
        """A new socket for the same session, or ServerError saying why there is none."""
        self._up.clear()
        if not (self.capabilities.supports_session_resume and self.resume_token and self.session_id):
            self._end(ServerError(f"the duplex connection was lost ({why}) and the server does not resume sessions"))
        assert self.session_id is not None and self.resume_token is not None
        for attempt in range(self.backoff.attempts):
            await asyncio.sleep(self.backoff.delay(attempt))
            sock = self._socket_factory()
            try:
                await sock.open()
                self._use(sock)
                await self._write(sock, resume_event(self.session_id, self.resume_token, self.incarnation,
                                                     self.last_seq or 0))
                while (event := await self._first(sock, "session.resumed")).get("type") != ServerEvent.SESSION_RESUMED:
                    if event.get("type") == ServerEvent.ERROR or ending(event) is not None:
                        self._log("in", event)
                    if event.get("type") == ServerEvent.ERROR:
                        code, message = error_code_and_message(event)
                        self._end(ServerError(f"the duplex session could not be resumed: {capped(message)}"
                                              + (f" ({code})" if code else "")))
                    if (line := ending(event)) is not None:
                        self._end(ServerError(line))
                    self._pending.append(event)
            except ServerError as exc:
                if self._ended is not None:
                    await _close_quietly(sock)
                    raise
                why = str(exc)
                await _close_quietly(sock)
                continue
            self._log("in", event)
            self._adopt(event)
            self.resumes += 1
            self._up.set()
            return
        self._end(ServerError(f"the duplex connection was lost and {self.backoff.attempts} attempts to resume "
                              f"the session failed ({why})"))

    # ---- closing --------------------------------------------------------------------------

    async def close(self) -> None:
        """`session.close`, then wait (a little) for `session.closed` while `events()` reads on."""
        self._closing = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        sock = self._sock
        if sock is None:
            return
        if self._ended is None and self._up.is_set() and not self.closed.is_set():
            try:
                await self._write(sock, {"type": ClientEvent.SESSION_CLOSE.value})
                if self._reading:
                    await asyncio.wait_for(self.closed.wait(), _CLOSE_SECONDS)
            except (ServerError, TimeoutError):
                pass
        await _close_quietly(sock)


async def _close_quietly(sock: Socket) -> None:
    try:
        await sock.close()
    except Exception:  # noqa: BLE001 - a socket that is already gone closes as well as it can
        pass
