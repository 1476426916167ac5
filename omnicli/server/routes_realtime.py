"""`GET /v1/realtime`: the realtime session behind a WebSocket.

Auth as the rest of the server: `Authorization: Bearer KEY`, or, for browsers that cannot set
headers, the key as an `openai-insecure-api-key.KEY` subprotocol (as OpenAI accepts it).
"""

import hmac
import json

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from omnicli.realtime.session import RealtimeSession

router = APIRouter()
_KEY_PROTOCOL = "openai-insecure-api-key."


def _offered_key(ws: WebSocket) -> str | None:
    scheme, _, token = ws.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token:
        return token
    for protocol in ws.scope.get("subprotocols", []):
        if protocol.startswith(_KEY_PROTOCOL):
            return protocol[len(_KEY_PROTOCOL):]
    return None


@router.websocket("/v1/realtime")
async def realtime(ws: WebSocket) -> None:
    api_key = ws.app.state.api_key
    if api_key is not None:
        offered = _offered_key(ws) or ""
        if not hmac.compare_digest(offered.encode(), api_key.encode()):
            await ws.close(code=1008, reason="missing or wrong API key")
            return
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
