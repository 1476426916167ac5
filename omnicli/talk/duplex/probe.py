"""Whether a server `omni talk` meets without `--duplex` is a duplex one: its greeting
(`session.created`) says so by carrying duplex `capabilities`. The greeting is read here, before
the turn-based client starts; a server that is not duplex gets the same socket back with its
greeting still to be read, so nothing is lost and nothing is asked twice.

A silent server is either vLLM-Omni's legacy realtime path, which waits for `session.update
{model}`, or vLLM-Omni's own duplex route, which opens a session at the client's first event and
only then greets. So a silent one is sent that legacy opener: the duplex route answers it with a
duplex greeting; otherwise the turn-based client gets the socket, and its own opener (the same
event) is not sent again."""

import asyncio
from collections.abc import AsyncIterator

from omnicli.protocol.duplex import ClientEvent, ServerEvent

GREETING_SECONDS = 1.5
"""As long as the turn-based client waits for a greeting (a silent server is another dialect)."""


def offers_duplex(event: dict | None) -> bool:
    """A `session.created` whose session advertises a duplex implementation level."""
    if not isinstance(event, dict) or event.get("type") != ServerEvent.SESSION_CREATED:
        return False
    capabilities = (event.get("session") or {}).get("capabilities")
    return isinstance(capabilities, dict) and bool(capabilities.get("implementation_level"))


class Greeted:
    """An opened transport whose first event was already read: it comes first from `events()`;
    and the opener the probe already sent, if any, is not sent a second time."""

    def __init__(self, inner, first: dict | None, opener: dict | None = None) -> None:
        self.inner = inner
        self._first = first
        self._opener = opener

    async def open(self) -> None:
        """Already open."""

    async def send(self, event: dict) -> None:
        """Send an event, except the opener the probe already sent (skipped once)."""
        if self._opener is not None and event == self._opener:
            self._opener = None
            return
        await self.inner.send(event)

    async def events(self) -> AsyncIterator[dict]:
        """The greeting the probe read first, then the transport's own events."""
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        async for event in self.inner.events():
            yield event

    async def close(self) -> None:
        """Close the transport underneath."""
        await self.inner.close()


async def greeting(transport, model: str | None = None, seconds: float = GREETING_SECONDS) -> tuple[bool, Greeted | None]:
    """Open `transport` and read its greeting (a silent server is sent the legacy opener for
    `model` first). (True, None): the server is duplex, and the turn-based socket was closed;
    (False, transport to use instead) otherwise."""
    await transport.open()
    reading = asyncio.ensure_future(anext(aiter(transport.events())))  # one read, not cancelled between waits
    first, opener = await _within(reading, seconds), None
    if first is None and not reading.done():
        opener = {"type": ClientEvent.SESSION_UPDATE.value, "model": model}  # what dialects.Legacy opens with
        await transport.send(opener)
        first = await _within(reading, seconds)
    reading.cancel()
    if not offers_duplex(first):
        return False, Greeted(transport, first, opener)
    try:
        await transport.send({"type": ClientEvent.SESSION_CLOSE.value})  # the session it made for us
    except Exception:  # noqa: BLE001 - leaving anyway
        pass
    await transport.close()
    return True, None


async def _within(reading: asyncio.Future, seconds: float) -> dict | None:
    """The event `reading` got within `seconds`, or None (still waiting, or the socket ended)."""
    await asyncio.wait({reading}, timeout=seconds)
    if not reading.done() or reading.cancelled() or reading.exception() is not None:
        return None
    return reading.result()
