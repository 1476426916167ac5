"""An engine that lives behind an OpenAI-compatible HTTP server (omni serve, vLLM-Omni, OpenAI).

Speech is always requested as WAV (lossless, and the header carries the rate), decoded and
resampled to the engine contract's 24 kHz; the caller encodes once, in the format it wants.
A server may decline to stream (a whole WAV, a whole JSON answer): that answer is taken as it is.
What the server offers (its model list) is asked once per engine and kept.
"""

import base64
from collections.abc import AsyncIterator

import httpx
import numpy as np
from pydantic import ValidationError

from omnicli.audio.formats import AudioFormat, decode, encode
from omnicli.audio.resampler import StreamResampler
from omnicli.audio.wavstream import WavStreamDecoder
from omnicli.client import chat_wire
from omnicli.client.http import (
    EmptyStream,
    content_type,
    fetch,
    opened,
    raise_for_status,
    sse_json,
    translated_errors,
)
from omnicli.config import CONNECT_TIMEOUT, DEFAULT_TIMEOUT
from omnicli.engine.base import (
    SPEECH_RATE,
    AudioChunk,
    AudioDelta,
    ChatDelta,
    ChatDone,
    ChatRequest,
    Engine,
    SpeechRequest,
    TextDelta,
    Transcript,
    Voice,
)
from omnicli.errors import ServerError, UsageError, capped
from omnicli.protocol.speech import SpeechBody


class RemoteEngine(Engine):
    """The Engine contract over an OpenAI-compatible server (omni serve, vLLM-Omni, llama.cpp, OpenAI)."""

    name = "remote"

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        stream: str | None = None,
        chat_stream: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        model: str | None = None,
    ) -> None:
        """Speech `stream`: None (one response), "sse" (speech.audio.delta events) or "audio"
        (raw bytes). Chat streams over SSE unless `chat_stream` is False. `timeout`: seconds to
        wait for the server's answer; a server that does not accept the connection fails sooner."""
        self.base_url = base_url
        self.stream = stream
        self.chat_stream = chat_stream
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url, headers=headers, transport=transport,
            timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
        )
        self._model: str | None = model  # asked for when a request names none; else the server's first
        self._probed = False

    async def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """Ask `/v1/audio/speech` and yield 24 kHz chunks, streamed or whole as the server answers."""
        body = self._speech_body(req)
        async with translated_errors(self.base_url):
            if self.stream is None:
                async for chunk in self._speech_whole(body):
                    yield chunk
            else:
                async for chunk in self._speech_streamed(body):
                    yield chunk

    def _speech_body(self, req: SpeechRequest) -> dict:
        """The request through the protocol's model: the shape our server validates."""
        try:
            body = SpeechBody.model_validate({
                "input": req.text, "model": req.model, "voice": req.voice, "response_format": "wav",
                "speed": req.speed, "instructions": req.instructions, "language": req.language,
                "task_type": "Base" if req.ref_audio else None, "ref_audio": req.ref_audio,
                "ref_text": req.ref_text, "stream": self.stream == "sse", "stream_format": self.stream,
            })
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise UsageError(f"cannot send this speech request: {problem['loc'][0]}: {problem['msg']}") from None
        return body.model_dump(exclude_none=True)

    async def _speech_whole(self, body: dict) -> AsyncIterator[AudioChunk]:
        response = await fetch(self._client, "POST", "/v1/audio/speech", json=body)
        await raise_for_status(response)
        yield _whole_audio(response, body["input"])

    async def _speech_streamed(self, body: dict) -> AsyncIterator[AudioChunk]:
        decoder = WavStreamDecoder()
        resampler: StreamResampler | None = None
        async with opened(self._client, "POST", "/v1/audio/speech", json=body) as response:
            await raise_for_status(response)
            kind = content_type(response)
            if kind == "text/event-stream":
                pieces = _sse_audio(response)
            elif self.stream == "audio" and kind in _WAV_TYPES:
                pieces = response.aiter_bytes()
            else:  # the server chose not to stream (or not WAV): its whole answer
                await response.aread()
                yield _whole_audio(response, body["input"])
                return
            async for piece in pieces:
                try:
                    samples = decoder.feed(piece)
                except ValueError as exc:
                    raise ServerError(f"the server's stream is not audio: {exc}") from exc
                if decoder.rate is not None and resampler is None:
                    resampler = StreamResampler(decoder.rate, SPEECH_RATE)
                if len(samples) and resampler is not None:
                    yield AudioChunk(resampler.process(samples), SPEECH_RATE)
        try:
            decoder.finish()
        except ValueError as exc:
            raise ServerError(f"the server's stream is not audio: {exc}") from exc
        if resampler is not None:
            tail = resampler.process(decoder.feed(b""), last=True)
            if len(tail):
                yield AudioChunk(tail, SPEECH_RATE)

    async def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        """Chat completions over SSE, or one whole answer when `chat_stream` is False."""
        async with translated_errors(self.base_url):
            model = req.model or await self._default_model()
            if self.chat_stream:
                pieces = self._chat_streamed(req, model)
            else:
                pieces = self._chat_whole(chat_wire.request_json(req, model, stream=False))
            text: list[str] = []
            usage: dict = {}
            reason: str | None = None
            try:
                async for piece in pieces:
                    if piece.text:
                        text.append(piece.text)
                        yield TextDelta(piece.text)
                    if piece.audio is not None:
                        samples, rate = piece.audio
                        chunk = StreamResampler(rate, SPEECH_RATE).process(samples, last=True)
                        yield AudioDelta(AudioChunk(chunk, SPEECH_RATE))
                    usage = piece.usage or usage
                    reason = piece.finish_reason or reason
            except ServerError as exc:
                if model is None and "model" in str(exc).lower() and exc.hint is None:
                    exc.hint = f"the server at {self.base_url} lists no model; name one with --model"
                raise
        yield ChatDone(text="".join(text), finish_reason=reason or "stop", usage=usage)

    async def _chat_whole(self, body: dict):
        response = await fetch(self._client, "POST", "/v1/chat/completions", json=body)
        await raise_for_status(response)
        for piece in _whole_chat(response):
            yield piece

    async def _chat_streamed(self, req: ChatRequest, model: str | None):
        body = chat_wire.request_json(req, model, stream=True)
        try:
            async with opened(self._client, "POST", "/v1/chat/completions", json=body) as response:
                await raise_for_status(response)
                if content_type(response) == "application/json":  # the server chose not to stream
                    await response.aread()
                    for piece in _whole_chat(response):
                        yield piece
                    return
                async for chunk in sse_json(response):
                    for piece in _read(chat_wire.read_chunk, chunk):
                        yield piece
        except EmptyStream:
            # Nothing was said yet: the same request, unstreamed, gets the answer or the real error.
            async for piece in self._chat_whole(chat_wire.request_json(req, model, stream=False)):
                yield piece

    async def _default_model(self) -> str | None:
        """The server's first listed model, asked once: omni serve and vLLM-Omni serve one.
        A server with no list (faster-whisper-server) is sent requests without a model, and
        says itself when it needs one; a wrong key or a dead server fails here."""
        if self._model is None and not self._probed:
            await self._probe()
        return self._model

    async def _probe(self) -> httpx.Response:
        response = await fetch(self._client, "GET", "/v1/models")
        if response.status_code in (401, 403):
            await raise_for_status(response)
        if self._model is None and response.status_code == 200:
            self._model = _first_model(response)
        self._probed = True
        return response

    async def health(self) -> None:
        """Whether the server is up: `GET /health` where it has one (omni serve, vLLM), else its
        model list (OpenAI). Unreachable or HTTP 5xx raises ServerDown; a refused key ServerError."""
        async with translated_errors(self.base_url):
            response = await fetch(self._client, "GET", "/health")
            if response.status_code in (404, 405):
                response = await self._probe()
            if response.status_code >= 500:
                await raise_for_status(response)

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """`/v1/audio/transcriptions`: segments (and words) from verbose_json where the server
        gives it, else the plain json answer. `quick` is the server's business."""
        wav = encode(samples, rate, AudioFormat.WAV)
        seconds = len(samples) / rate
        async with translated_errors(self.base_url):
            fields = {"response_format": "verbose_json"}
            model = await self._default_model()
            if model:
                fields["model"] = model
            if language:
                fields["language"] = language
            if words:
                fields["timestamp_granularities[]"] = ["segment", "word"]  # type: ignore[assignment]
            response = await self._post_audio(fields, wav)
            if response.status_code in (400, 422):  # a server that only answers json
                fields["response_format"] = "json"
                fields.pop("timestamp_granularities[]", None)
                response = await self._post_audio(fields, wav)
            await raise_for_status(response)
        try:
            payload = response.json()
            return Transcript(
                text=str(payload["text"]).strip(),
                language=payload.get("language") or language,
                seconds=float(payload.get("duration") or seconds),
                segments=[{"start": float(s["start"]), "end": float(s["end"]), "text": str(s["text"]).strip()}
                          for s in payload.get("segments") or []],
                words=[{"start": float(w["start"]), "end": float(w["end"]), "word": str(w["word"]).strip()}
                       for w in payload.get("words") or []],
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ServerError(f"the server's transcription could not be read: {exc!r}"[:300]) from exc

    async def _post_audio(self, fields: dict, wav: bytes) -> httpx.Response:
        return await fetch(self._client, "POST", "/v1/audio/transcriptions", data=fields,
                           files={"file": ("audio.wav", wav, "audio/wav")})

    async def check(self) -> None:
        """Fail fast, with one clear line, when the server cannot be reached at all (or refuses
        the key); the model list it answers with is kept for the requests to come."""
        async with translated_errors(self.base_url):
            if not self._probed:
                await self._probe()

    async def voices(self) -> list[Voice]:
        """The server's voice list from `/v1/audio/voices`; a server without one is an error."""
        async with translated_errors(self.base_url):
            response = await fetch(self._client, "GET", "/v1/audio/voices")
            if response.status_code == 404:
                raise ServerError(f"the server at {self.base_url} has no voice list")
            await raise_for_status(response)
        try:
            return _parse_voices(response.json())
        except ValueError:
            kind = capped(content_type(response) or "no content type")
            raise ServerError(f"the server's voice list is not JSON (got {kind})") from None

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.aclose()


def _read(reader, payload):
    """Run a response-shape reader; audio that will not decode is the server's fault."""
    try:
        return list(reader(payload))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ServerError(f"the server's chat answer could not be read: {exc}") from exc


_WAV_TYPES = ("audio/wav", "audio/x-wav", "audio/wave", "")
"""Answers read as a WAV byte stream (a server that names no type gets the benefit of the doubt)."""


def _whole_audio(response: httpx.Response, text: str) -> AudioChunk:
    """A whole audio file (read already) as one chunk at the engine's rate."""
    kind = content_type(response)
    if kind.startswith(("text/", "application/json")):
        raise ServerError(f"the server answered {capped(kind)}, not audio")
    try:
        samples, rate = decode(response.content)
    except ValueError as exc:
        raise ServerError(f"the server's answer is not audio: {capped(str(exc))}") from exc
    return AudioChunk(StreamResampler(rate, SPEECH_RATE).process(samples, last=True), SPEECH_RATE, text=text)


def _whole_chat(response: httpx.Response) -> list:
    try:
        payload = response.json()
    except ValueError as exc:
        raise ServerError("the server's chat answer is not JSON") from exc
    return _read(chat_wire.read_response, payload)


def _first_model(response: httpx.Response) -> str | None:
    """The first id of a `/v1/models` answer; None for anything else (an HTML page, an empty list)."""
    try:
        models = response.json().get("data") or []
    except (ValueError, AttributeError):
        return None
    if models and isinstance(models, list) and isinstance(models[0], dict) and models[0].get("id"):
        return str(models[0]["id"])
    return None


async def _sse_audio(response: httpx.Response) -> AsyncIterator[bytes]:
    """Audio bytes from `speech.audio.delta` events, until `speech.audio.done` or [DONE]."""
    async for event in sse_json(response, ends_with="speech.audio.done"):
        if event.get("type") == "speech.audio.delta":
            yield base64.b64decode(event.get("audio") or event.get("delta") or "")


def _parse_voices(payload) -> list[Voice]:
    """Read the voice lists servers send: a list, or {voices|data: [...]}, of names or objects."""
    items = payload
    if isinstance(payload, dict):
        items = payload.get("data") or payload.get("voices") or payload.get("speakers") or []
    voices = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            voices.append(Voice(item))
        elif isinstance(item, dict):
            name = item.get("name") or item.get("id") or item.get("voice_id") or item.get("voice")
            if name:
                description = item.get("description") or item.get("language") or ""
                voices.append(Voice(str(name), str(description), item, language=str(item.get("language") or ""),
                                    gender=str(item.get("gender") or ""), quality=str(item.get("quality") or "")))
    return voices
