"""The one boundary where httpx errors become omni's ServerError, with the server's own words."""

import contextlib
import json
from collections.abc import AsyncIterator

import httpx

from omnicli.errors import ServerError, ServerTimeout, capped


def server_message(status: int, body: bytes) -> str:
    """The human part of an error body: OpenAI's error.message, FastAPI's detail, or the text."""
    return capped(_message_of(body.decode("utf-8", "replace").strip()) or f"HTTP {status}")


def _message_of(text: str) -> str:
    try:
        payload = json.loads(text)
    except ValueError:
        return text
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        detail = payload.get("detail") or payload.get("message")
        if isinstance(detail, list):
            return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
        if detail:
            return str(detail)
    return text


class EmptyStream(ServerError):
    """A 200 event stream that ended before its first event. llama-cpp-python (uvicorn behind
    sse-starlette) answers so when a streamed request fails, hiding its real error; the same
    request asked again without streaming gets it."""


class ServerDown(ServerError):
    """The server could not be reached, broke off the connection (`status` None), or failed
    with HTTP 5xx (`status`): the request may go to another server of a pool."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


STALE_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""How a kept-alive connection the server has closed fails when it is reused."""


async def send(client: httpx.AsyncClient, method: str, url: str, **options) -> httpx.Response:
    """Send a request; the answer's body is left to read (`aread`, `aiter_bytes`), then `aclose`.

    uvicorn closes a kept-alive connection after a failed stream or a 500 without saying so; the
    next request on it fails before a single byte of its answer arrived. Such a request goes once
    more, on a fresh connection. A failure later, mid-answer, is final.
    """
    request = client.build_request(method, url, **options)
    try:
        return await client.send(request, stream=True)
    except STALE_CONNECTION:
        return await client.send(request, stream=True)


async def fetch(client: httpx.AsyncClient, method: str, url: str, **options) -> httpx.Response:
    """`send`, with the whole answer read."""
    response = await send(client, method, url, **options)
    try:
        await response.aread()
    finally:
        await response.aclose()
    return response


@contextlib.asynccontextmanager
async def opened(client: httpx.AsyncClient, method: str, url: str, **options) -> AsyncIterator[httpx.Response]:
    """`send`, as a context that closes the answer."""
    response = await send(client, method, url, **options)
    try:
        yield response
    finally:
        await response.aclose()


def content_type(response: httpx.Response) -> str:
    """The media type alone, lower case ('' when the server sent none)."""
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


@contextlib.asynccontextmanager
async def translated_errors(url: str) -> AsyncIterator[None]:
    """Inside it, httpx's failures talking to `url` become ServerDown / ServerTimeout / ServerError."""
    try:
        yield
    except httpx.ConnectError as exc:
        raise ServerDown(f"cannot reach the server at {url}: {_reason(exc)}") from exc
    except httpx.ConnectTimeout as exc:
        raise ServerDown(f"cannot reach the server at {url}: it did not accept the connection in time") from exc
    except httpx.TimeoutException as exc:
        raise ServerTimeout(f"the server at {url} did not answer in time", hint="wait longer with --timeout SECONDS") from exc
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise ServerDown(f"the connection to {url} broke off: {_reason(exc)}") from exc
    except httpx.HTTPError as exc:
        raise ServerError(f"request to {url} failed: {_reason(exc)}") from exc


async def raise_for_status(response: httpx.Response) -> None:
    """A 4xx answer as ServerError, a 5xx as ServerDown, each with the server's own words."""
    if response.status_code >= 400:
        body = await response.aread()
        message = f"server answered {response.status_code}: {server_message(response.status_code, body)}"
        if response.status_code >= 500:
            raise ServerDown(message, status=response.status_code)
        raise ServerError(message)


def _reason(exc: Exception) -> str:
    return capped(str(exc) or type(exc).__name__)


async def sse_json(response: httpx.Response, *, ends_with: str | None = None) -> AsyncIterator[dict]:
    """The JSON payloads of a server-sent event stream, until `[DONE]` or an event of type
    `ends_with`. An `error` payload, a line that is not JSON, or a stream that just stops
    (a dropped connection looks like that) is a ServerError; one that stops before its first
    event is an EmptyStream."""
    from httpx_sse import EventSource

    empty = True
    async for event in EventSource(response).aiter_sse():
        empty = False
        if event.data.strip() == "[DONE]":
            return
        try:
            payload = json.loads(event.data)
        except ValueError as exc:
            raise ServerError(f"the server sent an event that is not JSON: {capped(event.data)[:80]!r}") from exc
        if not isinstance(payload, dict):
            raise ServerError(f"the server sent an event that is not an object: {capped(event.data)[:80]!r}")
        if payload.get("type") == "error" or "error" in payload:
            error = payload.get("error", payload)
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ServerError(f"the server reported an error mid-stream: {capped(message)}")
        if event.event and "type" not in payload:
            payload["type"] = event.event
        if ends_with is not None and payload.get("type") == ends_with:
            return
        yield payload
    if empty:
        raise EmptyStream("the server's stream ended before its first event")
    raise ServerError("the server's stream ended before it was complete")
