"""The real omni ASGI app over a scripted engine, reached in process: through httpx's
ASGITransport, driven message by message where a test needs a client that hangs up, or served
by uvicorn on 127.0.0.1 in a thread where a test needs a real socket."""

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import httpx

from omnicli.server.app import create_app
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine


def serve(engine: ScriptedEngine | None = None, **options) -> tuple[httpx.AsyncClient, object]:
    """(client, app): an httpx client wired to a fresh app over `engine`."""
    app = create_app(engine or ScriptedEngine(), preload=False, turn_models=TURN_MODELS, **options)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://omni.test")
    return client, app


def run(test: Callable[[httpx.AsyncClient, object], Awaitable], engine: ScriptedEngine | None = None, **options):
    """Run an async test body against a fresh app, closing its client afterwards."""

    async def main():
        client, app = serve(engine, **options)
        async with client:
            return await test(client, app)

    return asyncio.run(main())


def sse_events(response: httpx.Response) -> list:
    """Every `data:` payload in order, JSON decoded (`[DONE]` stays a string)."""
    events = []
    for block in response.text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                data = line[len("data: "):]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def openai_error(response: httpx.Response, status: int, kind: str = "invalid_request_error") -> str:
    """Assert OpenAI's error shape with this status and type; the message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == kind
    return error["message"]


def raw_json(text: str) -> bytes:
    """A JSON body written by hand, so it can hold what json.dumps cannot encode (lone surrogates)."""
    return text.encode("ascii")


class HangingUpClient:
    """Drives the app's ASGI interface directly: sends one request, and hangs up on `hang_up()`.

    httpx's ASGITransport never reports a disconnect; this client's receive() does.
    """

    def __init__(self, app, method: str, path: str, body: dict) -> None:
        self.app = app
        self.scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"host", b"omni.test"), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 1), "server": ("omni.test", 80),
        }
        self.body = json.dumps(body).encode()
        self.sent: list[dict] = []
        self._gone = asyncio.Event()
        self._body_sent = False

    def hang_up(self) -> None:
        self._gone.set()

    async def _receive(self) -> dict:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict) -> None:
        self.sent.append(message)

    async def __call__(self) -> int:
        """Run the request to its end; the status the app answered with."""
        await self.app(self.scope, self._receive, self._send)
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def uvicorn_server(app):
    """(uvicorn server, its socket, already bound to a free loopback port: `server.serve(sockets=[it])`)."""
    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=listener.getsockname()[1], log_level="error",
                                           loop="asyncio", http="h11", ws="websockets-sansio"))
    return server, listener


@contextlib.contextmanager
def uvicorn_thread(app) -> Iterator[str]:
    """`app` served by uvicorn in a thread of its own, on a free port; its URL."""
    server, listener = uvicorn_server(app)
    port = listener.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
