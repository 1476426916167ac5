"""`RemoteEngine` over `httpx.MockTransport`: the exact requests it sends and how it reads every
answer shape (speech whole, SSE and raw; chat whole and streamed, OpenAI and vLLM-Omni; voices;
transcriptions) and every failure, with the server's words capped to one short line."""

import asyncio
import base64
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import (
    DEFAULT_MAX_TOKENS,
    AudioDelta,
    ChatDone,
    ChatRequest,
    ImagePart,
    Message,
    SpeechRequest,
    TextDelta,
    TextPart,
    Voice,
)
from omnicli.errors import MESSAGE_CHARS, ServerError, UsageError
from tests.helpers import chat_shapes

URL = "http://omni.test"
HUGE = "x" * 5000


def wav(seconds: float = 0.5, rate: int = 22050) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def clip() -> np.ndarray:
    t = np.arange(12000) / 24000
    return np.round(0.3 * np.sin(2 * np.pi * 220 * t) * 32767) / 32768


class Server:
    """Routes `(method, path)` to a reply; records every request it was sent."""

    def __init__(self, routes: dict) -> None:
        self.routes = {("GET", "/v1/models"): httpx.Response(200, json={"data": [{"id": "served-model"}]}), **routes}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.routes.get((request.method, request.url.path))
        if reply is None:
            return httpx.Response(404, json={"error": {"message": "no such route"}})
        return reply(request) if callable(reply) else reply

    def engine(self, **options) -> RemoteEngine:
        return RemoteEngine(URL, "key-1", transport=httpx.MockTransport(self), **options)

    def bodies(self, path: str) -> list:
        return [json.loads(r.content) for r in self.requests if r.url.path == path]


def run(engine: RemoteEngine, stream) -> list:
    async def collect():
        try:
            return [item async for item in stream]
        finally:
            await engine.aclose()

    return asyncio.run(collect())


def call(engine: RemoteEngine, coroutine):
    async def once():
        try:
            return await coroutine
        finally:
            await engine.aclose()

    return asyncio.run(once())


def error_line(exc: pytest.ExceptionInfo, prefix: str) -> None:
    message = str(exc.value)
    assert message.startswith(prefix)
    assert len(message) <= len(prefix) + MESSAGE_CHARS and "\n" not in message


# Speech


def test_whole_speech_is_requested_as_wav_and_resampled_to_24k():
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, content=wav(), headers={"content-type": "audio/wav"})})
    engine = server.engine()
    chunks = run(engine, engine.speech(SpeechRequest("Hello.", voice="amy", speed=1.25, language="en")))
    assert sum(len(c.samples) for c in chunks) == 12000 and all(c.rate == 24000 for c in chunks)
    assert server.bodies("/v1/audio/speech") == [
        {"input": "Hello.", "voice": "amy", "response_format": "wav", "speed": 1.25, "language": "en", "stream": False}]
    assert server.requests[0].headers["authorization"] == "Bearer key-1"


def sse_events(*events: dict) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


def streamed_wav_pieces() -> list[bytes]:
    data = bytearray(wav(rate=24000))
    data[4:8] = data[40:44] = b"\xff\xff\xff\xff"  # a streamed WAV does not know its size
    return [bytes(data[i : i + 3000]) for i in range(0, len(data), 3000)]


def test_sse_speech_reads_delta_events_until_done():
    events = [{"type": "speech.audio.delta", "audio": base64.b64encode(p).decode()} for p in streamed_wav_pieces()]
    body = sse_events(*events, {"type": "speech.audio.done"})
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})})
    engine = server.engine(stream="sse")
    chunks = run(engine, engine.speech(SpeechRequest("Hello.")))
    assert sum(len(c.samples) for c in chunks) == 12000 and len(chunks) > 1
    assert server.bodies("/v1/audio/speech")[0] == {
        "input": "Hello.", "response_format": "wav", "speed": 1.0, "stream": True, "stream_format": "sse"}


def test_raw_streamed_speech_reads_bytes_as_they_come():
    async def pieces():
        for piece in streamed_wav_pieces():
            yield piece

    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, content=pieces(), headers={"content-type": "audio/wav"})})
    engine = server.engine(stream="audio")
    chunks = run(engine, engine.speech(SpeechRequest("Hello.")))
    assert sum(len(c.samples) for c in chunks) == 12000 and len(chunks) > 1
    assert server.bodies("/v1/audio/speech")[0]["stream_format"] == "audio"


@pytest.mark.parametrize("stream", [None, "sse", "audio"])
def test_speech_errors_carry_the_servers_words_capped(stream):
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(400, json={"error": {"message": "bad voice " + HUGE}})})
    engine = server.engine(stream=stream)
    with pytest.raises(ServerError) as exc:
        run(engine, engine.speech(SpeechRequest("Hello.")))
    error_line(exc, "server answered 400: bad voice xxx")


def test_error_event_mid_stream_is_capped():
    body = sse_events({"type": "speech.audio.delta", "audio": base64.b64encode(streamed_wav_pieces()[0]).decode()},
                      {"type": "error", "error": {"message": "engine died " + HUGE}})
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})})
    engine = server.engine(stream="sse")
    with pytest.raises(ServerError) as exc:
        run(engine, engine.speech(SpeechRequest("Hello.")))
    error_line(exc, "the server reported an error mid-stream: engine died xxx")


def test_a_plain_text_error_page_is_capped():
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(502, text="<html>" + HUGE + "</html>")})
    engine = server.engine()
    with pytest.raises(ServerError) as exc:
        run(engine, engine.speech(SpeechRequest("Hello.")))
    error_line(exc, "server answered 502: <html>xxx")


def test_json_where_audio_belongs_is_a_server_error():
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, json={"ok": True})})
    engine = server.engine()
    with pytest.raises(ServerError, match="^the server answered application/json, not audio$"):
        run(engine, engine.speech(SpeechRequest("Hello.")))


# Chat


def chat_request(**options) -> ChatRequest:
    return ChatRequest([Message("system", [TextPart("Be brief.")]), Message("user", [TextPart("Capital of France?")])],
                       **options)


@pytest.mark.parametrize("shape, stream", [("openai_whole", False), ("vllm_whole", False),
                                           ("openai_stream", True), ("vllm_stream", True)])
def test_every_chat_shape_reads_the_same_answer(shape, stream):
    answer = getattr(chat_shapes, shape)(clip())
    reply = (httpx.Response(200, content=chat_shapes.sse(answer), headers={"content-type": "text/event-stream"})
             if stream else httpx.Response(200, json=answer))
    server = Server({("POST", "/v1/chat/completions"): reply})
    engine = server.engine(chat_stream=stream)
    deltas = run(engine, engine.chat(chat_request(modalities=("text", "audio"), voice="Ethan")))
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == chat_shapes.TEXT
    audio = np.concatenate([d.chunk.samples for d in deltas if isinstance(d, AudioDelta)])
    assert len(audio) == 12000 and np.max(np.abs(audio - clip())) < 2e-4
    assert deltas[-1] == ChatDone(text=chat_shapes.TEXT, finish_reason="stop", usage=chat_shapes.USAGE)
    body = server.bodies("/v1/chat/completions")[0]
    expected = {
        "model": "served-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
        "modalities": ["text", "audio"], "audio": {"voice": "Ethan", "format": "pcm16" if stream else "wav"},
        "voice": "Ethan", "stream": stream, "max_tokens": DEFAULT_MAX_TOKENS, "temperature": 0.7,
    }
    if stream:
        expected["stream_options"] = {"include_usage": True}
    assert body == expected


def test_attachments_go_out_as_content_parts():
    server = Server({("POST", "/v1/chat/completions"): httpx.Response(200, json=chat_shapes.vllm_whole(clip()))})
    engine = server.engine(chat_stream=False)
    message = Message("user", [ImagePart(b"\x89PNG", "image/png"), TextPart("What is it?")])
    run(engine, engine.chat(ChatRequest([message], model="m")))
    (body,) = server.bodies("/v1/chat/completions")
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()}},
        {"type": "text", "text": "What is it?"}]}]
    assert body["model"] == "m" and "audio" not in body and "voice" not in body
    assert [r.url.path for r in server.requests] == ["/v1/chat/completions"]  # a named model needs no lookup


def test_a_request_the_protocol_refuses_is_a_usage_error_before_sending():
    server = Server({})
    engine = server.engine()
    with pytest.raises(UsageError, match="^cannot send this chat request: temperature: "):
        run(engine, engine.chat(chat_request(temperature=5.0, model="m")))
    assert server.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_chat_errors_are_capped(stream):
    server = Server({("POST", "/v1/chat/completions"): httpx.Response(400, json={"detail": "too long " + HUGE})})
    engine = server.engine(chat_stream=stream)
    with pytest.raises(ServerError) as exc:
        run(engine, engine.chat(chat_request()))
    error_line(exc, "server answered 400: too long xxx")


def test_a_wrong_key_says_401_not_lists_no_model():
    server = Server({("GET", "/v1/models"): httpx.Response(401, json={"error": {"message": "Invalid API key"}})})
    engine = server.engine()
    with pytest.raises(ServerError, match="^server answered 401: Invalid API key$"):
        run(engine, engine.chat(chat_request()))


# Voices


@pytest.mark.parametrize("payload", [
    ["amy", "joe"],
    {"voices": ["amy", "joe"]},
    {"data": [{"id": "amy", "description": "warm"}, {"name": "joe", "language": "en"}]},
])
def test_voice_lists_in_every_shape(payload):
    engine = Server({("GET", "/v1/audio/voices"): httpx.Response(200, json=payload)}).engine()
    names = [v.name for v in call(engine, engine.voices())]
    assert names == ["amy", "joe"]


def test_voice_details_are_kept():
    engine = Server({("GET", "/v1/audio/voices"): httpx.Response(200, json={"data": [{"id": "amy", "description": "warm"}]})}).engine()
    assert call(engine, engine.voices()) == [Voice("amy", "warm", {"id": "amy", "description": "warm"})]


def test_no_voice_list_and_voice_errors():
    engine = Server({}).engine()
    with pytest.raises(ServerError, match=f"^the server at {URL} has no voice list$"):
        call(engine, engine.voices())
    engine = Server({("GET", "/v1/audio/voices"): httpx.Response(500, text=HUGE)}).engine()
    with pytest.raises(ServerError) as exc:
        call(engine, engine.voices())
    error_line(exc, "server answered 500: xxx")


# Transcriptions

VERBOSE = {"task": "transcribe", "language": "english", "duration": 1.5, "text": " Hello there. ",
           "segments": [{"id": 0, "start": 0.0, "end": 0.7, "text": " Hello"}, {"id": 1, "start": 0.7, "end": 1.5, "text": " there."}]}


def form_fields(request: httpx.Request) -> tuple[dict, bytes]:
    """The multipart fields and the uploaded file of a transcription request."""
    import email.parser

    message = email.parser.BytesParser().parsebytes(
        b"content-type: " + request.headers["content-type"].encode() + b"\r\n\r\n" + request.content)
    fields, upload = {}, b""
    for part in message.get_payload():
        name = part.get_param("name", header="content-disposition")
        if part.get_filename():
            upload = part.get_payload(decode=True)
        else:
            fields.setdefault(name, []).append(part.get_payload(decode=True).decode())
    return fields, upload


def test_transcribe_sends_a_wav_and_reads_segments():
    server = Server({("POST", "/v1/audio/transcriptions"): httpx.Response(200, json=VERBOSE)})
    engine = server.engine()
    samples = np.zeros(24000, np.float32)
    transcript = call(engine, engine.transcribe(samples, 16000, language="en"))
    assert (transcript.text, transcript.language, transcript.seconds) == ("Hello there.", "english", 1.5)
    assert transcript.segments == [{"start": 0.0, "end": 0.7, "text": "Hello"}, {"start": 0.7, "end": 1.5, "text": "there."}]
    fields, upload = form_fields(server.requests[-1])
    assert fields == {"model": ["served-model"], "response_format": ["verbose_json"], "language": ["en"]}
    decoded, rate = sf.read(io.BytesIO(upload))
    assert (rate, len(decoded)) == (16000, 24000)


def test_transcribe_asks_for_word_timestamps():
    server = Server({("POST", "/v1/audio/transcriptions"): httpx.Response(
        200, json=VERBOSE | {"words": [{"word": " Hello", "start": 0.0, "end": 0.5}]})})
    engine = server.engine()
    transcript = call(engine, engine.transcribe(np.zeros(8000, np.float32), 16000, words=True))
    assert transcript.words == [{"start": 0.0, "end": 0.5, "word": "Hello"}]
    fields, _ = form_fields(server.requests[-1])
    assert fields["timestamp_granularities[]"] == ["segment", "word"]


def test_transcribe_falls_back_to_json_when_verbose_json_is_refused():
    def reply(request: httpx.Request) -> httpx.Response:
        if form_fields(request)[0]["response_format"] == ["verbose_json"]:
            return httpx.Response(400, json={"error": {"message": "response_format verbose_json is not supported"}})
        return httpx.Response(200, json={"text": "Hello there."})

    server = Server({("POST", "/v1/audio/transcriptions"): reply})
    engine = server.engine()
    transcript = call(engine, engine.transcribe(np.zeros(16000, np.float32), 16000))
    assert (transcript.text, transcript.language, transcript.seconds, transcript.segments) == ("Hello there.", None, 1.0, [])
    assert [form_fields(r)[0]["response_format"] for r in server.requests[1:]] == [["verbose_json"], ["json"]]


def test_transcribe_errors_are_capped():
    server = Server({("POST", "/v1/audio/transcriptions"): httpx.Response(500, json={"error": {"message": HUGE}})})
    engine = server.engine()
    with pytest.raises(ServerError) as exc:
        call(engine, engine.transcribe(np.zeros(1600, np.float32), 16000))
    error_line(exc, "server answered 500: xxx")


def test_an_unreadable_transcription_is_a_server_error():
    server = Server({("POST", "/v1/audio/transcriptions"): httpx.Response(200, json={"words": []})})
    engine = server.engine()
    with pytest.raises(ServerError, match="^the server's transcription could not be read"):
        call(engine, engine.transcribe(np.zeros(1600, np.float32), 16000))
