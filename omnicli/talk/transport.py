"""How `omni talk` reaches a realtime session: a WebSocket to a server, or the same session
object in memory (no socket) on the embedded engine."""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from omnicli.config import CONNECT_TIMEOUT
from omnicli.errors import ServerError
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler


class LocalTransport:
    """The session runs in this process; events cross as dicts through a queue."""

    def __init__(self, engine, scheduler: AnswerScheduler | None = None, models: TurnModels | None = None) -> None:
        """`scheduler` and `models`: shared with the other sessions and talks of this process; a
        session alone gets its own."""
        from omnicli.session.turn_based import RealtimeSession

        self._events: asyncio.Queue = asyncio.Queue()
        self.session = RealtimeSession(engine, self._events.put, scheduler=scheduler or AnswerScheduler(),
                                       models=models or TurnModels(), served=False)

    async def open(self) -> None:
        """Load the engine's models and start the session."""
        await self.session.engine.preload()
        await self.session.start()

    async def send(self, event: dict) -> None:
        """Hand an event to the session as JSON text, as a socket would."""
        await self.session.handle(json.dumps(event))

    async def events(self) -> AsyncIterator[dict]:
        """The session's events in order, until the transport is closed."""
        while (event := await self._events.get()) is not None:
            yield event

    async def close(self) -> None:
        """Close the session and end `events()`."""
        await self.session.close()
        await self._events.put(None)


class WebSocketTransport:
    """OpenAI Realtime over a WebSocket: `Authorization: Bearer` plus the `realtime` subprotocol."""

    def __init__(self, base_url: str, api_key: str | None, model: str | None) -> None:
        scheme = "wss" if base_url.startswith("https") else "ws"
        self.http_url = f"{base_url.rstrip('/')}/v1/realtime"
        self.url = f"{scheme}://{self.http_url.split('://', 1)[1]}"
        if model:
            self.url += f"?model={quote(model, safe='/')}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._ws: Any = None

    async def open(self) -> None:
        """Connect; a refusal or an unreachable server raises ServerError in one line."""
        import websockets
        from websockets.asyncio.client import connect
        from websockets.typing import Subprotocol

        try:
            self._ws = await connect(self.url, additional_headers=self._headers, subprotocols=[Subprotocol("realtime")],
                                     max_size=None, open_timeout=CONNECT_TIMEOUT)
        except websockets.InvalidStatus as exc:
            raise await self._refused(exc.response.status_code) from exc
        except websockets.InvalidMessage as exc:
            raise await self._refused(None) from exc
        except TimeoutError as exc:
            raise ServerError(f"the realtime endpoint {self.url} did not answer within {CONNECT_TIMEOUT:g} s") from exc
        except (OSError, websockets.InvalidHandshake) as exc:
            raise ServerError(f"cannot reach the realtime endpoint {self.url}: {exc}") from exc

    async def _refused(self, status: int | None) -> ServerError:
        """The server answered the upgrade with plain HTTP. Its status says why, but a server
        without WebSockets may send 403 or an answer websockets cannot parse; a plain GET then
        tells the cause (404: no such endpoint)."""
        if status is None or status == 403:
            plain = await self._plain_status()
            if status is None or plain == 404:
                status = plain
        if status == 404:
            return ServerError(f"the server answered HTTP 404 at {self.http_url}: it has no realtime endpoint there")
        if status is None:
            return ServerError(f"the server at {self.http_url} answered the WebSocket upgrade with something that is not HTTP")
        hint = " (missing or wrong API key?)" if status in (401, 403) else ""
        return ServerError(f"the server answered HTTP {status} at {self.http_url} instead of opening the realtime connection{hint}")

    async def _plain_status(self) -> int | None:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT) as http:
                return (await http.get(self.http_url, headers=self._headers)).status_code
        except httpx.HTTPError:
            return None

    async def send(self, event: dict) -> None:
        """Send an event as JSON; a closed connection raises ServerError."""
        import websockets

        try:
            await self._ws.send(json.dumps(event))
        except websockets.ConnectionClosed as exc:
            raise ServerError(_closed(exc)) from exc

    async def events(self) -> AsyncIterator[dict]:
        """The server's events; messages that are not JSON objects are skipped."""
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
            raise ServerError(_closed(exc)) from exc

    async def close(self) -> None:
        """Close the WebSocket, if one is open."""
        if self._ws is not None:
            await self._ws.close()


def _closed(exc) -> str:
    """`ConnectionClosed` in words: the server's close code and reason, when it sent them."""
    if exc.rcvd is None:
        return "the realtime connection broke off"
    reason = f": {exc.rcvd.reason}" if exc.rcvd.reason else ""
    return f"the server closed the realtime connection (code {exc.rcvd.code}{reason})"
