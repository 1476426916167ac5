"""`/v1/audio/speech` (whole, SSE or raw streamed) and `/v1/audio/transcriptions`."""

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Form, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.formats import AudioFormat, decode, encode
from omnicli.audio.pcm import float_to_pcm16
from omnicli.audio.wavstream import streaming_wav_header
from omnicli.engine.base import SpeechRequest
from omnicli.engine.metrics import StageMetrics, Timer
from omnicli.engine.voices import served_voice
from omnicli.protocol.transcription import TRANSCRIPTION_FORMATS, subtitles, verbose_json
from omnicli.server.bodies import ServedSpeechBody
from omnicli.server.disconnect import until_disconnected
from omnicli.server.errors import classify, error_json
from omnicli.server.sse import event_stream

router = APIRouter()


@router.post("/v1/audio/speech")
async def speech(body: ServedSpeechBody, request: Request) -> Response:
    """Text to speech: the whole file, or streamed (raw PCM/WAV or SSE)."""
    engine, metrics = request.app.state.engine, request.app.state.metrics
    voice = await served_voice(engine, body.voice)
    req = SpeechRequest(
        text=body.input, voice=voice, speed=body.speed, instructions=body.instructions,
        language=body.language, model=body.model, ref_audio=body.ref_audio, ref_text=body.ref_text,
    )
    fmt = AudioFormat(body.response_format)
    stage = StageMetrics("speech")
    chunks = _measured(metrics.tracked("speech", engine.speech(req)), stage, metrics)
    # Pull the first chunk before answering: a refusal becomes a 400, not a broken stream.
    first = await until_disconnected(request, anext(chunks, None))
    if body.streaming:
        pieces = _pcm_pieces(first, chunks, fmt)
        if body.sse:
            return event_stream(_speech_events(pieces))
        return StreamingResponse(pieces, media_type=fmt.content_type)

    async def rest() -> list[np.ndarray]:
        return [chunk.samples async for chunk in chunks]

    tail = await until_disconnected(request, rest())
    parts = ([first.samples] if first is not None else []) + tail
    audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    encoded = await asyncio.to_thread(encode, audio, SPEECH_RATE, fmt)
    headers = {"x-omni-audio-seconds": f"{len(audio) / SPEECH_RATE:.3f}", "x-omni-input-characters": str(len(body.input))}
    return Response(encoded, media_type=fmt.content_type, headers=headers)


async def _measured(chunks, stage: StageMetrics, metrics) -> AsyncIterator:
    async for chunk in chunks:
        stage.output()
        stage.audio_seconds += chunk.seconds
        yield chunk
    stage.finish()
    stage.busy_seconds = time.perf_counter() - stage.started
    metrics.observe_stages({"speech": stage.as_dict()})


async def _pcm_pieces(first, chunks, fmt: AudioFormat) -> AsyncIterator[bytes]:
    """A streamed WAV (header with unknown sizes) or raw PCM16, one piece per engine chunk."""
    if fmt is AudioFormat.WAV:
        yield streaming_wav_header(SPEECH_RATE)
    if first is not None:
        yield float_to_pcm16(first.samples)
    async for chunk in chunks:
        yield float_to_pcm16(chunk.samples)


async def _speech_events(pieces: AsyncIterator[bytes]) -> AsyncIterator[dict]:
    """`speech.audio.delta` per piece, then one terminal event: `speech.audio.done`, or an
    `error` event when the engine fails mid-way, whatever it raised."""
    started = time.monotonic()
    try:
        async for piece in pieces:
            yield {"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode()}
    except Exception as exc:
        _, body = classify(exc)
        yield {"type": "error", **body}
        return
    yield {"type": "speech.audio.done", "usage": None, "seconds": round(time.monotonic() - started, 3)}


@router.post("/v1/audio/transcriptions")
async def transcriptions(
    request: Request,
    file: UploadFile,
    model: Annotated[str | None, Form()] = None,
    language: Annotated[str | None, Form()] = None,
    response_format: Annotated[str, Form()] = "json",
    temperature: Annotated[float | None, Form()] = None,
    granularities: Annotated[list[str] | None, Form(alias="timestamp_granularities[]")] = None,
) -> Response:
    """Speech to text: the uploaded file's transcript as JSON, text, verbose JSON or subtitles."""
    if response_format not in TRANSCRIPTION_FORMATS:
        message = f"response_format must be one of {', '.join(TRANSCRIPTION_FORMATS)}, got '{response_format}'"
        return error_json(message, 400, param="response_format")
    try:
        samples, rate = await asyncio.to_thread(decode, await file.read())
    except ValueError:
        return error_json("file is not a readable audio file", 400, param="file")
    if len(samples) == 0:
        return error_json("file holds no audio", 400, param="file")
    engine = request.app.state.engine
    stage = StageMetrics("asr")
    with Timer(stage):
        words = response_format == "verbose_json" and "word" in (granularities or [])
        transcript = await until_disconnected(request, engine.transcribe(samples, rate, language=language, words=words))
    stage.output()
    stage.audio_seconds = transcript.seconds
    request.app.state.metrics.observe_stages({"asr": stage.as_dict()})
    match response_format:
        case "text":
            return PlainTextResponse(transcript.text + "\n")
        case "srt" | "vtt":
            return PlainTextResponse(subtitles(transcript.segments, response_format))
        case "verbose_json":
            return JSONResponse(verbose_json(transcript.text, transcript.language, transcript.seconds,
                                             transcript.segments, transcript.words))
    return JSONResponse({"text": transcript.text})
