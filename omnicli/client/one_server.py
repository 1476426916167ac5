"""A realtime session stays on the server it starts on: its conversation lives there.

Given several servers (`omni talk --server A --server B`), talk opens its session on the first
that passes a health check, says once which one, and never moves: a session cannot be carried
to another server mid-conversation, so spreading is for the request-per-answer commands.
"""

from collections.abc import AsyncIterator, Callable
from typing import Any

from omnicli.client.http import ServerDown
from omnicli.client.remote import RemoteEngine
from omnicli.errors import ServerError, capped


class FirstServerTransport:
    """A WebSocket transport to the first of `servers` that is up (health-checked on open)."""

    def __init__(self, servers: list[RemoteEngine], api_key: str | None, model: str | None, *,
                 say: Callable[[str], None]) -> None:
        self.servers = servers
        self._api_key = api_key
        self._model = model
        self._say = say
        self._inner: Any = None
        self.chosen: str | None = None

    async def choose(self) -> str:
        """The first server that answers its health check; each one skipped is a warning."""
        reasons = []
        for server in self.servers:
            try:
                await server.health()
            except ServerDown as exc:
                reasons.append(f"{server.base_url} ({capped(str(exc))})")
                self._say(f"omni: warning: skipping {server.base_url}: {capped(str(exc))}")
                continue
            self.chosen = server.base_url
            self._say(f"omni: talk uses {self.chosen}, the first of {len(self.servers)} servers that answers "
                      "(a realtime session stays on the server it starts on)")
            return self.chosen
        raise ServerError(capped(f"none of the {len(self.servers)} servers answers: {'; '.join(reasons)}"))

    async def open(self) -> None:
        """Choose the server and open the session's WebSocket to it."""
        from omnicli.talk.transport import WebSocketTransport

        self._inner = WebSocketTransport(await self.choose(), self._api_key, self._model)
        await self._inner.open()

    async def send(self, event: dict) -> None:
        """Send one client event to the chosen server."""
        assert self._inner is not None, "send before open"
        await self._inner.send(event)

    async def events(self) -> AsyncIterator[dict]:
        """The chosen server's events, as they arrive."""
        assert self._inner is not None, "events before open"
        async for event in self._inner.events():
            yield event

    async def close(self) -> None:
        """Close the WebSocket, if open, and every server's connections."""
        if self._inner is not None:
            await self._inner.close()
        for server in self.servers:
            await server.aclose()
