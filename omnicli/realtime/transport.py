"""How `omni talk` reaches a realtime session: a WebSocket to a server, or the same session
object in memory (no socket) on the embedded engine."""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from omnicli.errors import ServerError


class LocalTransport:
    """The session runs in this process; events cross as dicts through a queue."""

    def __init__(self, engine) -> None:
        from omnicli.realtime.session import RealtimeSession

        self._events: asyncio.Queue = asyncio.Queue()
        self.session = RealtimeSession(engine, self._events.put, served=False)

    async def open(self) -> None:
        await self.session.engine.preload()
        await self.session.start()

    async def send(self, event: dict) -> None:
        await self.session.handle(json.dumps(event))

    async def events(self) -> AsyncIterator[dict]:
        while (event := await self._events.get()) is not None:
            yield event

    async def close(self) -> None:
        await self.session.close()
        await self._events.put(None)


class WebSocketTransport:
    """OpenAI Realtime over a WebSocket: `Authorization: Bearer` plus the `realtime` subprotocol."""

    def __init__(self, base_url: str, api_key: str | None, model: str | None) -> None:
        scheme = "wss" if base_url.startswith("https") else "ws"
        self.url = f"{scheme}://{base_url.split('://', 1)[1]}/v1/realtime"
        if model:
            self.url += f"?model={model}"
        self._api_key = api_key
        self._ws: Any = None

    async def open(self) -> None:
        import websockets
        from websockets.asyncio.client import connect
        from websockets.typing import Subprotocol

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            self._ws = await connect(self.url, additional_headers=headers, subprotocols=[Subprotocol("realtime")],
                                     max_size=None, open_timeout=15)
        except websockets.InvalidStatus as exc:
            raise ServerError(f"the server refused the realtime connection: HTTP {exc.response.status_code}") from exc
        except (TimeoutError, OSError, websockets.InvalidHandshake) as exc:
            raise ServerError(f"cannot reach the realtime endpoint {self.url}: {exc}") from exc

    async def send(self, event: dict) -> None:
        import websockets

        try:
            await self._ws.send(json.dumps(event))
        except websockets.ConnectionClosed as exc:
            raise ServerError(f"the realtime connection closed: {exc}") from exc

    async def events(self) -> AsyncIterator[dict]:
        import websockets

        try:
            async for message in self._ws:
                try:
                    event = json.loads(message)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    yield event
        except websockets.ConnectionClosedError as exc:
            raise ServerError(f"the realtime connection broke off: {exc}") from exc

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
