"""One error policy at the HTTP boundary, mapped by type in one place.

    validation, bad JSON, UsageError, UnsupportedError  -> 400 invalid_request_error (the caller's)
    ServerTimeout (a stage server that did not answer in time)   -> 504 server_error, upstream_timeout
    other ServerError (a stage server that refused or broke off)  -> 502 server_error, upstream_error
    other OmniError (a model that fails to load, an engine fault)  -> 500 server_error (ours)
    anything else                                        -> 500 server_error, traceback logged
    401, 404, 405, 413                                   -> their status, OpenAI's shape
    a client that hung up before its answer              -> 499, for the log

Every answer is OpenAI's JSON shape {"error": {message, type, param, code}}, never plain text,
and a handled error never costs the client its keep-alive connection.
"""

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omnicli.errors import OmniError, ServerError, ServerTimeout, UnsupportedError, UsageError
from omnicli.server.disconnect import HUNG_UP, ClientHungUp

log = logging.getLogger("omni.server")
INTERNAL = "the server failed while answering; its log has the details"


def error_body(message: str, *, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    """OpenAI's error body."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_json(message: str, status: int, *, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """OpenAI's error body as a response with `status`."""
    return JSONResponse(error_body(message, kind=kind, param=param, code=code), status_code=status, headers=headers)


def classify(exc: BaseException) -> tuple[int, dict]:
    """(status, body) for an exception raised while answering; unexpected ones are logged."""
    if isinstance(exc, (UsageError, UnsupportedError)):
        return 400, error_body(str(exc))
    if isinstance(exc, ServerTimeout):
        return 504, error_body(str(exc), kind="server_error", code="upstream_timeout")
    if isinstance(exc, ServerError):
        return 502, error_body(str(exc), kind="server_error", code="upstream_error")
    if isinstance(exc, OmniError):
        return 500, error_body(str(exc), kind="server_error")
    log.error("unexpected error while answering", exc_info=exc)
    return 500, error_body(INTERNAL, kind="server_error")


def install_error_handlers(app: FastAPI) -> None:
    """Validation and HTTP errors, answered where FastAPI raises them; every other exception
    reaches CrashGuard, which classifies it."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Of a union's failed branches, the deepest error says most (content[0].input_audio.data).
        first: dict = max(exc.errors(), key=lambda e: len(e.get("loc", ())), default={})
        location = [str(p) for p in first.get("loc", ()) if p != "body" and not _is_branch_label(p)]
        param = ".".join(location) or None
        message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        if first.get("type") == "json_invalid":
            param, message = None, "the body is not valid JSON"
        elif param and not message.startswith(param):
            message = f"{param}: {message}"
        return error_json(message, 400, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        match exc.status_code:
            case 404:
                message = f"Invalid URL ({request.method} {request.url.path})"
            case 405:
                message = f"method {request.method} is not allowed on {request.url.path}"
            case _:
                message = str(exc.detail)
        return error_json(message, exc.status_code, headers=exc.headers)

    @app.exception_handler(ClientHungUp)
    async def _hung_up(request: Request, exc: ClientHungUp) -> Response:
        return Response(status_code=HUNG_UP)  # for the log: nobody is left to read it


def _is_branch_label(part) -> bool:
    """pydantic names union branches in error locations ('str', 'list[ContentPart]')."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)


class CrashGuard:
    """Pure ASGI middleware: an exception nobody handled becomes a JSON 500 (logged with its
    traceback) and goes no further, so the server keeps the connection alive. Once a response has
    started nothing can be said any more: the error goes on and the connection is dropped, which
    is how a client learns that a raw audio stream broke off."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except Exception as exc:
            if started:
                raise
            status, body = classify(exc)
            await JSONResponse(body, status_code=status)(scope, receive, send)
