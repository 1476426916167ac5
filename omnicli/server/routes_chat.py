"""`/v1/chat/completions` in OpenAI's shape, whole or streamed over SSE.

With audio, the answer's text is the audio transcript (`message.audio.transcript`,
`delta.audio.transcript`) as OpenAI sends it. Streamed audio goes out chunk by chunk: raw PCM16
for `pcm16`/`pcm`, otherwise each chunk a complete file in the requested format. What the engine
heard in attached audio (transcript deltas) has no place in OpenAI's answer and is not sent.
"""

import asyncio
import base64
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.formats import AudioFormat, encode, parse_format
from omnicli.engine.base import (
    DEFAULT_MAX_TOKENS,
    AudioDelta,
    AudioPart,
    ChatDone,
    ChatRequest,
    ImagePart,
    Message,
    Part,
    TextDelta,
    TextPart,
    TranscriptDelta,
)
from omnicli.engine.voices import served_voice
from omnicli.errors import OmniError
from omnicli.server.bodies import ServedChatBody
from omnicli.server.disconnect import until_disconnected
from omnicli.server.errors import classify, error_json
from omnicli.server.sse import event_stream

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(body: ServedChatBody, request: Request) -> Response:
    """A chat answer, text and optionally audio, whole or streamed as SSE chunks."""
    try:
        req = await asyncio.to_thread(_chat_request, body)  # base64 audio and images: CPU work, off the loop
    except ValueError as exc:
        return error_json(str(exc), 400, param="messages")
    engine, metrics = request.app.state.engine, request.app.state.metrics
    req = dataclasses.replace(req, voice=await served_voice(engine, req.voice))
    fmt = parse_format(body.audio.format if body.audio else "wav")
    model = body.model or request.app.state.model_id
    answer_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    deltas = metrics.tracked("chat", engine.chat(req))
    # Everything up to the answer's first delta comes before any bytes are sent, so a refusal
    # (a prompt over the context window, raised on the first token) is a 400, not a broken stream.
    opening = await until_disconnected(request, _opening(deltas))

    async def all_deltas():
        for delta in opening:
            yield delta
        async for delta in deltas:
            yield delta

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return event_stream(_stream(all_deltas(), req, fmt, model, answer_id, include_usage, metrics))
    answer = await until_disconnected(request, _collect(all_deltas()))
    text, audio, done = answer
    metrics.observe_stages(done.metrics)
    message: dict = {"role": "assistant", "content": text}
    if req.wants_audio:
        samples = np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)
        encoded = await asyncio.to_thread(encode, samples, SPEECH_RATE, fmt)
        message["content"] = None
        message["audio"] = {
            "id": f"audio_{uuid.uuid4().hex[:24]}",
            "data": base64.b64encode(encoded).decode(),
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


def _chat_request(body: ServedChatBody) -> ChatRequest:
    messages = []
    for message in body.messages:
        role = "system" if message.role == "developer" else message.role
        if message.content is None or isinstance(message.content, str):
            messages.append(Message(role, [TextPart(message.content or "")]))
            continue
        parts: list[Part] = []
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


async def _opening(deltas: AsyncIterator) -> list:
    """The deltas up to and including the answer's first (text, audio or done)."""
    held = []
    async for delta in deltas:
        held.append(delta)
        if not isinstance(delta, TranscriptDelta):
            break
    return held


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
                  include_usage: bool, metrics) -> AsyncIterator[dict | str]:
    """OpenAI's chunks, then `[DONE]` always: a failure mid-way is an error event before it."""
    created = int(time.time())
    audio_id = f"audio_{uuid.uuid4().hex[:24]}"

    def chunk(delta: dict, finish_reason=None) -> dict:
        return {"id": answer_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    yield chunk({"role": "assistant", "content": ""})
    try:
        done = None
        async for delta in deltas:
            match delta:
                case TextDelta(text=piece) if req.wants_audio:
                    yield chunk({"audio": {"id": audio_id, "transcript": piece}})
                case TextDelta(text=piece):
                    yield chunk({"content": piece})
                case AudioDelta(chunk=audio):
                    data = await asyncio.to_thread(encode, audio.samples, SPEECH_RATE, fmt)
                    yield chunk({"audio": {"id": audio_id, "data": base64.b64encode(data).decode()}})
                case ChatDone():
                    done = delta
                    metrics.observe_stages(done.metrics)
                    yield chunk({}, done.finish_reason)
                    if include_usage:
                        yield {**chunk({}), "choices": [], "usage": done.usage}
        if done is None:
            raise OmniError("the engine ended without an answer")
    except Exception as exc:
        yield classify(exc)[1]
    yield "[DONE]"
