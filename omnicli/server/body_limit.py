"""Request bodies are capped: a declared length over the cap is refused before anything is read,
an undeclared one as soon as the bytes read pass it; either way a 413 in OpenAI's shape."""

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omnicli.server.errors import error_json


class BodyTooLarge(HTTPException):
    """The 413 for a request body over the server's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body too large (the limit is {limit} bytes)")


class BodyLimit:
    """ASGI middleware that refuses HTTP request bodies over `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            too_large = BodyTooLarge(self.max_bytes)
            return await error_json(too_large.detail, 413)(scope, receive, send)
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)  # answered by the HTTP error handler
            return message

        await self.app(scope, limited, send)
