"""With a key set, nothing but /health answers without it: docs, schema, unknown routes and
methods, bad and oversized bodies, and the realtime WebSocket all meet the 401 (or 403) first."""

import asyncio
import json

import pytest

from tests.helpers.scripted import ScriptedEngine
from tests.helpers.server_harness import openai_error, run

KEY = "s3cret"
UNAUTHORIZED = "missing or wrong API key (Authorization: Bearer KEY)"


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/docs", None),
        ("GET", "/redoc", None),
        ("GET", "/openapi.json", None),
        ("GET", "/docs/oauth2-redirect", None),
        ("GET", "/metrics", None),
        ("GET", "/v1/models", None),
        ("GET", "/v1/audio/voices", None),
        ("GET", "/v1/does-not-exist", None),
        ("DELETE", "/v1/models", None),
        ("PATCH", "/health/../v1/models", None),
        ("POST", "/v1/audio/speech", b'{"input": '),
        ("POST", "/v1/audio/speech", b'{"input": "hi", "speed": 99}'),
        ("POST", "/v1/chat/completions", b"x" * 5000),
        ("POST", "/v1/audio/transcriptions", b"x" * 5000),
    ],
)
@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic czNjcmV0", "Bearer", f"Bearer {KEY}x"])
def test_everything_but_health_needs_the_key_first(method, path, body, header):
    engine = ScriptedEngine()

    async def test(client, app):
        headers = {"content-type": "application/json"} | ({"authorization": header} if header else {})
        response = await client.request(method, path, content=body, headers=headers)
        assert openai_error(response, 401) == UNAUTHORIZED
        assert response.json()["error"]["code"] == "invalid_api_key"
        assert response.headers["www-authenticate"] == "Bearer"

    run(test, engine, api_key=KEY, max_body_bytes=1000)
    assert engine.requests == []


def test_health_answers_without_a_key():
    async def test(client, app):
        response = await client.get("/health")
        assert (response.status_code, response.json()) == (200, {"status": "ok"})

    run(test, api_key=KEY)


def test_the_right_key_opens_everything_and_limits_still_apply():
    async def test(client, app):
        for scheme in ("Bearer", "bearer"):
            client.headers["authorization"] = f"{scheme} {KEY}"
            assert (await client.get("/v1/models")).json()["data"][0]["id"] == "omni-embedded"
            assert (await client.get("/openapi.json")).status_code == 200
        assert openai_error(await client.get("/v1/nope"), 404)
        assert openai_error(await client.post("/v1/chat/completions", content=b"x" * 5000), 413)

    run(test, api_key=KEY, max_body_bytes=1000)


async def _websocket(app, headers: list, subprotocols: list[str]) -> list[dict]:
    """Open /v1/realtime at the ASGI level, hang up at once; what the app sent."""
    scope = {
        "type": "websocket", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "ws",
        "path": "/v1/realtime", "raw_path": b"/v1/realtime", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"omni.test"), *headers], "subprotocols": subprotocols,
        "client": ("127.0.0.1", 1), "server": ("omni.test", 80),
    }
    inbox = [{"type": "websocket.connect"}]
    sent: list[dict] = []
    accepted = asyncio.Event()

    async def receive() -> dict:
        if inbox:
            return inbox.pop(0)
        await accepted.wait()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "websocket.send":
            accepted.set()  # the session said hello: hang up

    await asyncio.wait_for(app(scope, receive, send), 10)  # a bound for a broken build, not a timing
    return sent


def test_realtime_without_the_key_is_refused_before_the_handshake():
    async def test(client, app):
        for headers, protocols in [([], ["realtime"]), ([(b"authorization", b"Bearer nope")], []),
                                   ([], ["realtime", "openai-insecure-api-key.nope"])]:
            sent = await _websocket(app, headers, protocols)
            assert sent == [{"type": "websocket.close", "code": 1008, "reason": "missing or wrong API key"}]

    run(test, api_key=KEY)


@pytest.mark.parametrize(
    "headers, protocols",
    [([(b"authorization", f"Bearer {KEY}".encode())], []), ([], ["realtime", f"openai-insecure-api-key.{KEY}"])],
)
def test_realtime_with_the_key_in_a_header_or_a_subprotocol_is_accepted(headers, protocols):
    async def test(client, app):
        sent = await _websocket(app, headers, protocols)
        assert sent[0] == {"type": "websocket.accept", "subprotocol": "realtime" if protocols else None,
                           "headers": []}
        assert json.loads(sent[1]["text"])["type"] == "session.created"

    run(test, api_key=KEY)
