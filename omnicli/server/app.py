"""An OpenAI-compatible ASGI app over any in-process engine.

Every request is validated before the engine does any work; invalid input is a 400 with
OpenAI's error shape, so any OpenAI client shows the message.
"""

import base64
import json
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse

from omnicli import __version__
from omnicli.audio.formats import AudioFormat, encode
from omnicli.audio.pcm import float_to_pcm16
from omnicli.audio.wavstream import streaming_wav_header
from omnicli.engine.base import SPEECH_RATE, Engine, SpeechRequest
from omnicli.errors import OmniError
from omnicli.protocol.speech import SpeechBody

MODEL_ID = "omni-embedded"


def error_body(message: str, *, kind: str = "invalid_request_error", param: str | None = None):
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def create_app(engine: Engine) -> FastAPI:
    app = FastAPI(title="omni", version=__version__)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        location = [str(p) for p in first.get("loc", ()) if p != "body"]
        param = ".".join(location) or None
        message = first.get("msg", "invalid request")
        if param:
            message = f"{param}: {message}"
        return JSONResponse(error_body(message, param=param), status_code=400)

    @app.exception_handler(OmniError)
    async def _refused(request: Request, exc: OmniError) -> JSONResponse:
        return JSONResponse(error_body(str(exc)), status_code=400)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict:
        return {
            "object": "list",
            "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "omni"}],
        }

    @app.get("/v1/audio/voices")
    async def voices() -> dict:
        found = await engine.voices()
        return {
            "voices": [v.name for v in found],
            "data": [{"name": v.name, "description": v.description} for v in found],
        }

    @app.post("/v1/audio/speech")
    async def speech(body: SpeechBody) -> Response:
        req = SpeechRequest(
            text=body.input,
            voice=body.voice,
            speed=body.speed,
            instructions=body.instructions,
            language=body.language,
            model=body.model,
            ref_audio=body.ref_audio,
            ref_text=body.ref_text,
        )
        fmt = AudioFormat(body.response_format)
        chunks = engine.speech(req)
        # Pull the first chunk before answering: a refusal becomes a 400, not a broken stream.
        first = await anext(chunks, None)
        if body.streaming:
            stream = _sse(first, chunks, fmt) if body.sse else _pcm_pieces(first, chunks, fmt)
            media = "text/event-stream" if body.sse else fmt.content_type
            return StreamingResponse(stream, media_type=media)
        samples = [first.samples] if first is not None else []
        samples += [chunk.samples async for chunk in chunks]
        import numpy as np

        audio = np.concatenate(samples) if samples else np.zeros(0, dtype=np.float32)
        return Response(encode(audio, SPEECH_RATE, fmt), media_type=fmt.content_type)

    return app


async def _pcm_pieces(first, chunks, fmt: AudioFormat) -> AsyncIterator[bytes]:
    """A streamed WAV (header with unknown sizes) or raw PCM16, one piece per engine chunk."""
    if fmt is AudioFormat.WAV:
        yield streaming_wav_header(SPEECH_RATE)
    if first is not None:
        yield float_to_pcm16(first.samples)
    async for chunk in chunks:
        yield float_to_pcm16(chunk.samples)


async def _sse(first, chunks, fmt: AudioFormat) -> AsyncIterator[str]:
    started = time.monotonic()
    async for piece in _pcm_pieces(first, chunks, fmt):
        event = {"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode()}
        yield f"data: {json.dumps(event)}\n\n"
    done = {"type": "speech.audio.done", "usage": None, "seconds": time.monotonic() - started}
    yield f"data: {json.dumps(done)}\n\n"
