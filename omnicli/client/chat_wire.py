"""`POST /v1/chat/completions` on the wire: building the request, and reading every answer shape.

Shapes a client meets (docs/protocols.md):
- OpenAI: `choices[0].message.audio = {data, transcript}`; streamed `choices[0].delta.audio
  .{data, transcript}` (PCM16 24 kHz) beside `delta.content`.
- vLLM-Omni: text and audio as separate choices (`choices[1].message.audio.data`); streamed chunks
  carry a top-level `modality` and the audio is base64 in `delta.content`, each chunk a complete
  file in the requested format.
"""

import base64
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from omnicli.audio.formats import PCM_RATE, AudioFormat, decode
from omnicli.engine.base import AudioPart, ChatRequest, Message, Part, TextPart
from omnicli.errors import UsageError
from omnicli.protocol.chat import AudioOptions, ChatBody, ChatMessage, ContentPart, ImageUrl, InputAudio, StreamOptions


def request_json(req: ChatRequest, model: str | None, *, stream: bool) -> dict:
    """The request body, built through the protocol's model: the one shape our server validates.
    Without a `model` the field is left out: the server's default answers."""
    audio = None
    if req.wants_audio:
        # Streamed audio must be PCM16 for OpenAI; whole answers come as WAV (rate in the header).
        audio = AudioOptions(voice=req.voice, format="pcm16" if stream else "wav")
    try:
        body = ChatBody(
            model=model,
            messages=[_message(m) for m in req.messages],
            modalities=list(req.modalities),  # type: ignore[arg-type]
            audio=audio,
            voice=req.voice if req.wants_audio else None,  # vLLM-Omni reads the voice from the top level
            stream=stream,
            stream_options=StreamOptions(include_usage=True) if stream else None,
            max_tokens=req.max_tokens,
            temperature=req.temperature,
        )
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise UsageError(f"cannot send this chat request: {where}: {problem['msg']}") from None
    return body.model_dump(exclude_none=True)


def _message(message: Message) -> ChatMessage:
    """Text-only messages carry a plain string: some servers (llama-cpp-python's) refuse a list."""
    if all(isinstance(p, TextPart) for p in message.parts):
        return ChatMessage(role=message.role, content=message.text)
    return ChatMessage(role=message.role, content=[_part(p) for p in message.parts])


def _part(part: Part) -> ContentPart:
    if isinstance(part, TextPart):
        return ContentPart(type="text", text=part.text)
    if isinstance(part, AudioPart):
        data = base64.b64encode(part.data).decode()
        return ContentPart(type="input_audio", input_audio=InputAudio(data=data, format=part.format))
    url = f"data:{part.mime};base64,{base64.b64encode(part.data).decode()}"
    return ContentPart(type="image_url", image_url=ImageUrl(url=url))


@dataclass
class Piece:
    """One thing read off a response: text, decoded audio, or the final usage."""

    text: str = ""
    audio: tuple | None = None  # (float32 samples, rate)
    usage: dict | None = None
    finish_reason: str | None = None


def decode_audio_b64(data: str):
    """A base64 audio payload, as we request it: a WAV file, or headerless PCM16 at 24 kHz."""
    raw = base64.b64decode(data)
    if raw[:4] == b"RIFF":
        return decode(raw)
    return decode(raw, fmt=AudioFormat.PCM, pcm_rate=PCM_RATE)


def read_response(body: dict) -> Iterator[Piece]:
    """Pieces from a whole (non-streamed) completion, either shape.

    The text is the message content; OpenAI leaves it empty when speaking and puts it in the
    audio transcript instead, so transcripts count only where no choice has content.
    """
    choices = body.get("choices") or []
    contents = [c.get("message", {}).get("content") for c in choices]
    texts = [t for t in contents if isinstance(t, str) and t]
    if not texts:
        texts = [t for c in choices if (t := ((c.get("message") or {}).get("audio") or {}).get("transcript"))]
    yield Piece(text="".join(texts))
    for choice in choices:
        audio = (choice.get("message") or {}).get("audio") or {}
        if audio.get("data"):
            yield Piece(audio=decode_audio_b64(audio["data"]))
    reasons = [c["finish_reason"] for c in choices if c.get("finish_reason")]
    yield Piece(usage=body.get("usage"), finish_reason=reasons[0] if reasons else None)


def read_chunk(chunk: dict) -> Iterator[Piece]:
    """Pieces from one streamed chunk, either shape."""
    modality = chunk.get("modality")
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        content = delta.get("content")
        audio = delta.get("audio") or {}
        if modality == "audio":
            if content:
                yield Piece(audio=decode_audio_b64(content))
        else:
            text = (content or "") + (audio.get("transcript") or "")
            samples = decode_audio_b64(audio["data"]) if audio.get("data") else None
            if text or samples is not None:
                yield Piece(text=text, audio=samples)
        if choice.get("finish_reason"):
            yield Piece(finish_reason=choice["finish_reason"])
    if chunk.get("usage"):
        yield Piece(usage=chunk["usage"])
