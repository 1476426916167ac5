"""`GET /v1/realtime`: the realtime session behind a WebSocket; with `?duplex=1` (also `true`,
`on`), vLLM-Omni's duplex contract, whose sessions live in `app.state.duplex` and outlive the socket.

The key is checked before this route runs (server/auth.py), as for every other route.
"""

import json
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from omnicli.protocol.duplex import DUPLEX_QUERY, duplex_requested, realtime_error
from omnicli.server.session_slots import BUSY_CLOSE, BUSY_CODE, SessionSlots
from omnicli.session.conversation import new_id
from omnicli.session.turn_based import RealtimeSession

router = APIRouter()


@router.websocket("/v1/realtime")
async def realtime(ws: WebSocket) -> None:
    """A realtime socket: a duplex session with `?duplex=1`, else a turn-based one if a slot is free."""
    subprotocol = "realtime" if "realtime" in ws.scope.get("subprotocols", []) else None
    await ws.accept(subprotocol=subprotocol)
    if duplex_requested(ws.query_params.get(DUPLEX_QUERY)):
        await _duplex(ws)
        return

    slots: SessionSlots = ws.app.state.realtime_slots
    if not slots.take():
        await ws.send_text(json.dumps({**realtime_error(BUSY_CODE, slots.refusal()), "event_id": new_id("event")}))
        await ws.close(BUSY_CLOSE, BUSY_CODE)
        return
    try:
        await _turn_based(ws)
    finally:
        slots.release()
        await ws.app.state.heap.trim()


async def _turn_based(ws: WebSocket) -> None:
    """One turn-based session: events in, events out, until the socket goes."""

    async def send(event: dict) -> None:
        await ws.send_text(json.dumps(event))

    state = ws.app.state
    session = RealtimeSession(state.engine, send, scheduler=state.scheduler, models=state.turn_models, model_id=state.model_id)
    ws.app.state.metrics.active.labels("realtime").inc()
    try:
        await session.start()
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                break
            if message.get("text") is not None:
                await session.handle(message["text"])
            else:
                await session.error("send events as JSON text frames, not binary", "invalid_event")
    except WebSocketDisconnect:
        pass
    finally:
        await session.close()
        ws.app.state.metrics.active.labels("realtime").dec()


async def _duplex(ws: WebSocket) -> None:
    """The socket's first event opens or resumes a session; then events flow until the socket
    goes (the session waits for a resume) or the session ends (it closes the socket)."""
    from omnicli.session.duplex.lifeline import Attachment

    async def send(event: dict) -> None:
        await ws.send_text(json.dumps(event))

    async def close(code: int, reason: str) -> None:
        await ws.close(code, reason)

    attachment = Attachment(send, close)
    session = None
    ws.app.state.metrics.active.labels("realtime").inc()
    try:
        message = await _receive(ws)
        if message is None:
            return
        session = await ws.app.state.duplex.connect(attachment, message.get("text") or "", dict(ws.query_params))
        while session is not None and not attachment.closed:
            if (message := await _receive(ws)) is None:
                break
            if message.get("text") is not None:
                await session.handle(message["text"], attachment)
            else:
                await session.error("send events as JSON text frames, not binary", "invalid_event")
    finally:
        if session is not None:
            session.detach(attachment)
        ws.app.state.metrics.active.labels("realtime").dec()
        await ws.app.state.heap.trim()


async def _receive(ws: WebSocket) -> Mapping[str, Any] | None:
    """The next message; None once the socket is gone (or was closed by the session)."""
    try:
        message = await ws.receive()
    except (WebSocketDisconnect, RuntimeError):  # RuntimeError: the session closed this socket
        return None
    return None if message["type"] == "websocket.disconnect" else message
