"""Server-sent events, framed one way for every streamed route: FastAPI's EventSourceResponse
and its encoder, each event a JSON object (or the literal `[DONE]` chat clients wait for)."""

import json
from collections.abc import AsyncIterator

from fastapi.sse import EventSourceResponse, format_sse_event


def event_stream(events: AsyncIterator[dict | str]) -> EventSourceResponse:
    """A streamed response sending each event as one SSE `data:` frame (dicts as JSON)."""
    async def framed() -> AsyncIterator[bytes]:
        async for event in events:
            yield format_sse_event(data_str=event if isinstance(event, str) else json.dumps(event))

    return EventSourceResponse(framed(), headers={"Cache-Control": "no-cache"})
