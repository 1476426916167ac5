"""`/v1/audio/speech` (whole, SSE or raw streamed) and `/v1/audio/transcriptions`."""

import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Form, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from omnicli.audio.formats import AudioFormat, decode, encode
from omnicli.audio.pcm import float_to_pcm16
from omnicli.audio.wavstream import streaming_wav_header
from omnicli.engine.base import SPEECH_RATE, SpeechRequest
from omnicli.engine.metrics import StageMetrics, Timer
from omnicli.protocol.speech import SpeechBody
from omnicli.server.app import DISCONNECTED, error_body, until_disconnected

router = APIRouter()
TRANSCRIPTION_FORMATS = ("json", "text", "verbose_json")


@router.post("/v1/audio/speech")
async def speech(body: SpeechBody, request: Request) -> Response:
    engine, metrics = request.app.state.engine, request.app.state.metrics
    req = SpeechRequest(
        text=body.input, voice=body.voice, speed=body.speed, instructions=body.instructions,
        language=body.language, model=body.model, ref_audio=body.ref_audio, ref_text=body.ref_text,
    )
    fmt = AudioFormat(body.response_format)
    stage = StageMetrics("speech")
    chunks = _measured(metrics.tracked("speech", engine.speech(req)), stage, metrics)
    # Pull the first chunk before answering: a refusal becomes a 400, not a broken stream.
    first = await until_disconnected(request, anext(chunks, None))
    if first is DISCONNECTED:
        return Response(status_code=499)
    if body.streaming:
        pieces = _pcm_pieces(first, chunks, fmt)
        if body.sse:
            return StreamingResponse(_sse(pieces), media_type="text/event-stream")
        return StreamingResponse(pieces, media_type=fmt.content_type)

    async def rest() -> list[np.ndarray]:
        return [chunk.samples async for chunk in chunks]

    tail = await until_disconnected(request, rest())
    if tail is DISCONNECTED:
        return Response(status_code=499)
    parts = ([first.samples] if first is not None else []) + tail
    audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    headers = {"x-omni-audio-seconds": f"{len(audio) / SPEECH_RATE:.3f}", "x-omni-input-characters": str(len(body.input))}
    return Response(encode(audio, SPEECH_RATE, fmt), media_type=fmt.content_type, headers=headers)


async def _measured(chunks, stage: StageMetrics, metrics) -> AsyncIterator:
    async for chunk in chunks:
        stage.output()
        stage.audio_seconds += chunk.seconds
        yield chunk
    stage.finish()
    stage.busy_seconds = stage.finished - stage.started
    metrics.observe_stages({"speech": stage.as_dict()})


async def _pcm_pieces(first, chunks, fmt: AudioFormat) -> AsyncIterator[bytes]:
    """A streamed WAV (header with unknown sizes) or raw PCM16, one piece per engine chunk."""
    if fmt is AudioFormat.WAV:
        yield streaming_wav_header(SPEECH_RATE)
    if first is not None:
        yield float_to_pcm16(first.samples)
    async for chunk in chunks:
        yield float_to_pcm16(chunk.samples)


async def _sse(pieces: AsyncIterator[bytes]) -> AsyncIterator[str]:
    started = time.monotonic()
    async for piece in pieces:
        event = {"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode()}
        yield f"data: {json.dumps(event)}\n\n"
    done = {"type": "speech.audio.done", "usage": None, "seconds": round(time.monotonic() - started, 3)}
    yield f"data: {json.dumps(done)}\n\n"


@router.post("/v1/audio/transcriptions")
async def transcriptions(
    request: Request,
    file: UploadFile,
    model: Annotated[str | None, Form()] = None,
    language: Annotated[str | None, Form()] = None,
    response_format: Annotated[str, Form()] = "json",
    temperature: Annotated[float | None, Form()] = None,
) -> Response:
    if response_format not in TRANSCRIPTION_FORMATS:
        message = f"response_format must be one of {', '.join(TRANSCRIPTION_FORMATS)}, got '{response_format}'"
        return JSONResponse(error_body(message, param="response_format"), status_code=400)
    data = await file.read()
    try:
        samples, rate = decode(data)
    except ValueError:
        return JSONResponse(error_body("file is not a readable audio file", param="file"), status_code=400)
    if len(samples) == 0:
        return JSONResponse(error_body("file holds no audio", param="file"), status_code=400)
    engine = request.app.state.engine
    stage = StageMetrics("asr")
    with Timer(stage):
        transcript = await until_disconnected(request, engine.transcribe(samples, rate, language=language))
    if transcript is DISCONNECTED:
        return Response(status_code=499)
    stage.output()
    stage.audio_seconds = transcript.seconds
    request.app.state.metrics.observe_stages({"asr": stage.as_dict()})
    if response_format == "text":
        return PlainTextResponse(transcript.text + "\n")
    if response_format == "verbose_json":
        return JSONResponse({
            "task": "transcribe", "language": transcript.language, "duration": transcript.seconds,
            "text": transcript.text,
            "segments": [{"id": i, **segment} for i, segment in enumerate(transcript.segments)],
        })
    return JSONResponse({"text": transcript.text})
