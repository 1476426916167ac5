"""An OpenAI-compatible ASGI app over any in-process engine.

Every request is validated before the engine does any work; invalid input is a 400 in OpenAI's
error shape, an oversized body a 413, a missing or wrong key a 401. Bodies are capped at
`max_body_bytes`; a client that hangs up cancels its generation.
"""

import asyncio
import contextlib
import hmac

from fastapi import Depends, FastAPI, Request
from starlette.requests import HTTPConnection
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from omnicli import __version__
from omnicli.engine.base import Engine
from omnicli.errors import OmniError
from omnicli.server.observability import AccessLog, ServerMetrics

MODEL_ID = "omni-embedded"
DEFAULT_MAX_BODY = 64 * 1024 * 1024
OPEN_PATHS = {"/health"}


def error_body(message: str, *, kind: str = "invalid_request_error", param: str | None = None, code=None):
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def create_app(
    engine: Engine, *, api_key: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY, preload: bool = True
) -> FastAPI:
    async def authorize(request: HTTPConnection) -> None:
        if api_key is None or request.url.path in OPEN_PATHS or request.scope["type"] == "websocket":
            return  # the realtime route checks its own key (header or subprotocol)
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), api_key.encode()):
            raise StarletteHTTPException(401, "missing or wrong API key (Authorization: Bearer KEY)")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if preload and hasattr(engine, "preload"):
            await engine.preload()  # /health answers once every model is in memory
        yield
        await engine.aclose()

    app = FastAPI(
        title="omni",
        version=__version__,
        max_body_size=max_body_bytes,
        dependencies=[Depends(authorize)],
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.metrics = ServerMetrics()
    app.state.model_id = MODEL_ID
    app.state.api_key = api_key
    app.add_middleware(AccessLog, metrics=app.state.metrics)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Of a union's failed branches, the deepest error says most (content[0].input_audio.data).
        first = max(exc.errors(), key=lambda e: len(e.get("loc", ())), default={})
        location = [str(p) for p in first.get("loc", ()) if p != "body" and not _is_branch_label(p)]
        param = ".".join(location) or None
        message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        if param:
            message = f"{param}: {message}"
        return JSONResponse(error_body(message, param=param), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "authentication_error" if exc.status_code == 401 else "invalid_request_error"
        message = exc.detail if exc.status_code != 413 else "request body too large"
        return JSONResponse(error_body(str(message), kind=kind), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(OmniError)
    async def _refused(request: Request, exc: OmniError) -> JSONResponse:
        return JSONResponse(error_body(str(exc)), status_code=400)

    from omnicli.server import routes_audio, routes_chat, routes_info, routes_realtime

    app.include_router(routes_info.router)
    app.include_router(routes_audio.router)
    app.include_router(routes_chat.router)
    app.include_router(routes_realtime.router)
    return app


def _is_branch_label(part) -> bool:
    """pydantic names union branches in error locations ('str', 'list[ContentPart]')."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)


DISCONNECTED = object()


async def until_disconnected(request: Request, work):
    """Run `work`; if the client hangs up first, cancel it (and the generation behind it) and
    return DISCONNECTED. Streamed responses need no such watch: Starlette cancels them itself."""
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=0.25)
        if done:
            return task.result()
        if await request.is_disconnected():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return DISCONNECTED
