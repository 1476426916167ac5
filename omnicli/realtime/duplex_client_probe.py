"""Whether a server `omni talk` meets without `--duplex` is a duplex one: its greeting
(`session.created`) says so by carrying duplex `capabilities`. The greeting is read here, before
the turn-based client starts; a server that is not duplex gets the same socket back with its
greeting still to be read, so nothing is lost and nothing is asked twice."""

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
    """An opened transport whose first event was already read: it comes first from `events()`."""

    def __init__(self, inner, first: dict | None) -> None:
        self.inner = inner
        self._first = first

    async def open(self) -> None:
        """Already open."""

    async def send(self, event: dict) -> None:
        await self.inner.send(event)

    async def events(self) -> AsyncIterator[dict]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        async for event in self.inner.events():
            yield event

    async def close(self) -> None:
        await self.inner.close()


async def greeting(transport, seconds: float = GREETING_SECONDS) -> tuple[bool, Greeted | None]:
    """Open `transport` and read its greeting. (True, None): the server is duplex, and the
    turn-based socket was closed; (False, transport to use instead) otherwise."""
    await transport.open()
    events = aiter(transport.events())
    try:
        first = await asyncio.wait_for(anext(events), seconds)
    except (TimeoutError, StopAsyncIteration):
        first = None
    if not offers_duplex(first):
        return False, Greeted(transport, first)
    try:
        await transport.send({"type": ClientEvent.SESSION_CLOSE.value})  # the session it made for us
    except Exception:  # noqa: BLE001 - leaving anyway
        pass
    await transport.close()
    return True, None
