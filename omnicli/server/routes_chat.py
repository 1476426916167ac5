"""`/v1/chat/completions` in OpenAI's shape, whole or streamed over SSE.

With audio, the answer's text is the audio transcript (`message.audio.transcript`,
`delta.audio.transcript`) as OpenAI sends it. Streamed audio goes out chunk by chunk: raw PCM16
for `pcm16`/`pcm`, otherwise each chunk a complete file in the requested format.
"""

import base64
import json
import time
import uuid
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from omnicli.audio.formats import AudioFormat, encode, parse_format
from omnicli.engine.base import (
    SPEECH_RATE,
    AudioDelta,
    AudioPart,
    ChatDone,
    ChatRequest,
    ImagePart,
    Message,
    TextDelta,
    TextPart,
)
from omnicli.errors import OmniError
from omnicli.protocol.chat import ChatBody
from omnicli.server.app import DISCONNECTED, error_body, until_disconnected

router = APIRouter()
DEFAULT_MAX_TOKENS = 256


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatBody, request: Request) -> Response:
    try:
        req = _chat_request(body)
    except ValueError as exc:
        return JSONResponse(error_body(str(exc), param="messages"), status_code=400)
    engine, metrics = request.app.state.engine, request.app.state.metrics
    fmt = parse_format(body.audio.format if body.audio else "wav")
    model = body.model or request.app.state.model_id
    answer_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    deltas = metrics.tracked("chat", engine.chat(req))
    # The first delta comes before any answer bytes: a refusal is a 400, not a broken stream.
    try:
        first = await until_disconnected(request, anext(deltas, None))
    except OmniError as exc:
        return JSONResponse(error_body(str(exc)), status_code=400)
    if first is DISCONNECTED:
        return Response(status_code=499)

    async def all_deltas():
        if first is not None:
            yield first
        async for delta in deltas:
            yield delta

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        stream = _stream(all_deltas(), req, fmt, model, answer_id, include_usage, metrics)
        return StreamingResponse(stream, media_type="text/event-stream")
    answer = await until_disconnected(request, _collect(all_deltas()))
    if answer is DISCONNECTED:
        return Response(status_code=499)
    text, audio, done = answer
    metrics.observe_stages(done.metrics)
    message: dict = {"role": "assistant", "content": text}
    if req.wants_audio:
        import numpy as np

        samples = np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)
        message["content"] = None
        message["audio"] = {
            "id": f"audio_{uuid.uuid4().hex[:24]}",
            "data": base64.b64encode(encode(samples, SPEECH_RATE, fmt)).decode(),
            "transcript": text,
            "expires_at": int(time.time()) + 3600,
        }
    return JSONResponse({
        "id": answer_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": done.finish_reason}],
        "usage": done.usage,
    })


def _chat_request(body: ChatBody) -> ChatRequest:
    messages = []
    for message in body.messages:
        role = "system" if message.role == "developer" else message.role
        if message.content is None or isinstance(message.content, str):
            messages.append(Message(role, [TextPart(message.content or "")]))
            continue
        parts = []
        for part in message.content:
            if part.type == "text":
                parts.append(TextPart(part.text or ""))
            elif part.type == "input_audio" and part.input_audio is not None:
                parts.append(AudioPart(base64.b64decode(part.input_audio.data), part.input_audio.format))
            elif part.type == "image_url" and part.image_url is not None:
                parts.append(_image(part.image_url.url))
            else:
                raise ValueError(f"a '{part.type}' content part needs its '{part.type}' field")
        messages.append(Message(role, parts))
    voice = (body.audio.voice if body.audio else None) or body.voice
    return ChatRequest(
        messages=messages,
        modalities=tuple(body.modalities),
        voice=voice,
        model=body.model,
        max_tokens=body.max_completion_tokens or body.max_tokens or DEFAULT_MAX_TOKENS,
        temperature=body.temperature,
    )


def _image(url: str) -> ImagePart:
    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError("image_url must be a base64 data URI; this server fetches nothing")
    header, data = url[len("data:"):].split(";base64,", 1)
    return ImagePart(base64.b64decode(data), header or "image/png")


async def _collect(deltas) -> tuple[str, list, ChatDone]:
    text, audio, done = [], [], None
    async for delta in deltas:
        match delta:
            case TextDelta(text=piece):
                text.append(piece)
            case AudioDelta(chunk=chunk):
                audio.append(chunk.samples)
            case ChatDone():
                done = delta
    if done is None:
        raise OmniError("the engine ended without an answer")
    return "".join(text), audio, done


async def _stream(deltas, req: ChatRequest, fmt: AudioFormat, model: str, answer_id: str,
                  include_usage: bool, metrics) -> AsyncIterator[str]:
    created = int(time.time())
    audio_id = f"audio_{uuid.uuid4().hex[:24]}"

    def chunk(delta: dict, finish_reason=None, **extra) -> str:
        payload = {
            "id": answer_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra,
        }
        return f"data: {json.dumps(payload)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    try:
        async for delta in deltas:
            match delta:
                case TextDelta(text=piece) if req.wants_audio:
                    yield chunk({"audio": {"id": audio_id, "transcript": piece}})
                case TextDelta(text=piece):
                    yield chunk({"content": piece})
                case AudioDelta(chunk=audio):
                    data = base64.b64encode(encode(audio.samples, SPEECH_RATE, fmt)).decode()
                    yield chunk({"audio": {"id": audio_id, "data": data}})
                case ChatDone() as done:
                    metrics.observe_stages(done.metrics)
                    yield chunk({}, done.finish_reason)
                    if include_usage:
                        payload = {"id": answer_id, "object": "chat.completion.chunk", "created": created,
                                   "model": model, "choices": [], "usage": done.usage}
                        yield f"data: {json.dumps(payload)}\n\n"
    except OmniError as exc:
        yield f"data: {json.dumps(error_body(str(exc), kind='server_error'))}\n\n"
    yield "data: [DONE]\n\n"
