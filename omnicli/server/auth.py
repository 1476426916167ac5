"""Bearer-key checking for every route, HTTP and WebSocket, in one place.

A pure ASGI middleware outermost, so with a key set nothing but /health answers without it:
not the docs, not the schema, not unknown routes or methods, and not before a body is parsed
or measured (a 401 comes before a 400 or a 413). Browsers that cannot set headers on a
WebSocket may offer the key as an `openai-insecure-api-key.KEY` subprotocol, as OpenAI accepts it.
"""

import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from omnicli.server.errors import error_json

OPEN_PATHS = frozenset({"/health"})
_KEY_PROTOCOL = "openai-insecure-api-key."


def offered_key(scope: Scope) -> str | None:
    """The key a request offers: `Authorization: Bearer KEY`, or the WebSocket subprotocol."""
    scheme, _, token = Headers(scope=scope).get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token:
        return token.strip()
    if scope["type"] == "websocket":
        for protocol in scope.get("subprotocols", []):
            if protocol.startswith(_KEY_PROTOCOL):
                return protocol[len(_KEY_PROTOCOL):]
    return None


def key_matches(offered: str | None, api_key: str) -> bool:
    """Constant-time, so a wrong key's timing says nothing about the right one."""
    return hmac.compare_digest((offered or "").encode(), api_key.encode())


class RequireKey:
    """ASGI middleware that refuses, with a 401, every request without the server's key."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.api_key is None
            or scope["type"] not in ("http", "websocket")
            or scope["path"] in OPEN_PATHS
            or key_matches(offered_key(scope), self.api_key)
        ):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await receive()  # websocket.connect; closing before accepting refuses the handshake (403)
            await send({"type": "websocket.close", "code": 1008, "reason": "missing or wrong API key"})
            return
        response = error_json("missing or wrong API key (Authorization: Bearer KEY)", 401,
                              kind="invalid_request_error", code="invalid_api_key",
                              headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)
