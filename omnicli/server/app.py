"""An OpenAI-compatible ASGI app over any engine.

Every request is validated before the engine does any work. The middleware, outermost first:
the access log and metrics, the key (so nothing but /health answers without it, before any body
is read), the body cap (413), and the crash guard (any unhandled error a JSON 500). Routes live
in routes_*; they import the small modules beside this one, never this one.
"""

import asyncio
import contextlib

from fastapi import FastAPI

from omnicli import __version__
from omnicli.engine.base import Engine
from omnicli.protocol.duplex import DISCONNECT_GRACE_S
from omnicli.server import routes_audio, routes_chat, routes_info, routes_realtime
from omnicli.server.auth import RequireKey
from omnicli.server.body_limit import BodyLimit
from omnicli.server.errors import CrashGuard, install_error_handlers
from omnicli.server.heap import HeapTrimmer
from omnicli.server.loop_lag import LoopLag
from omnicli.server.observability import AccessLog, ServerMetrics
from omnicli.server.session_slots import SessionSlots, default_limit
from omnicli.session.duplex.registry import MAX_SESSIONS, DuplexRegistry
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler

MODEL_ID = "omni-embedded"
DEFAULT_MAX_BODY = 64 * 1024 * 1024


def create_app(
    engine: Engine, *, api_key: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY, preload: bool = True,
    max_duplex_sessions: int = MAX_SESSIONS, duplex_grace_s: float = DISCONNECT_GRACE_S,
    max_realtime_sessions: int | None = None, turn_models: TurnModels | None = None,
) -> FastAPI:
    """The server's app; `max_realtime_sessions` None: sized to the machine (server/session_slots.py);
    `turn_models` None: Silero, Smart Turn and the words check, each loaded on first use."""
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if preload:
            await engine.preload()  # /health answers once every model is in memory
        lag = asyncio.create_task(LoopLag(observe=app.state.metrics.loop_lag.observe).run())
        yield
        lag.cancel()
        await app.state.duplex.aclose()
        await engine.aclose()

    app = FastAPI(title="omni", version=__version__, lifespan=lifespan)
    app.state.engine = engine
    app.state.metrics = ServerMetrics()
    app.state.model_id = MODEL_ID
    app.state.realtime_slots = SessionSlots(default_limit() if max_realtime_sessions is None else max_realtime_sessions)
    app.state.heap = HeapTrimmer()
    app.state.scheduler = AnswerScheduler()
    app.state.turn_models = turn_models or TurnModels()
    app.state.duplex = DuplexRegistry(engine, model_id=MODEL_ID, max_sessions=max_duplex_sessions,
                                      scheduler=app.state.scheduler, models=app.state.turn_models, grace_s=duplex_grace_s)
    install_error_handlers(app)
    routers = [module.router for module in (routes_info, routes_audio, routes_chat, routes_realtime)]
    for router in routers:
        app.include_router(router)
    templates = [route for route in app.routes if hasattr(route, "path")]  # /docs, /openapi.json
    templates += [route for router in routers for route in router.routes]
    # add_middleware wraps what was added before: the last added runs first.
    app.add_middleware(CrashGuard)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(RequireKey, api_key=api_key)
    app.add_middleware(AccessLog, metrics=app.state.metrics, routes=templates)
    return app
