"""`GET /v1/realtime`: the realtime session behind a WebSocket.

The key is checked before this route runs (server/auth.py), as for every other route.
"""

import json

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from omnicli.realtime.session import RealtimeSession

router = APIRouter()


@router.websocket("/v1/realtime")
async def realtime(ws: WebSocket) -> None:
    subprotocol = "realtime" if "realtime" in ws.scope.get("subprotocols", []) else None
    await ws.accept(subprotocol=subprotocol)

    async def send(event: dict) -> None:
        await ws.send_text(json.dumps(event))

    session = RealtimeSession(ws.app.state.engine, send, model_id=ws.app.state.model_id)
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
