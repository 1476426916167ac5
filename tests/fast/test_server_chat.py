"""`POST /v1/chat/completions` on the real app over a scripted engine: OpenAI's shapes whole and
streamed, text and audio, refusals before any byte, failures mid-stream, and a client hanging up."""

import asyncio
import base64

import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.formats import AudioFormat, encode
from omnicli.audio.pcm import float_to_pcm16
from omnicli.engine.base import (
    AudioDelta,
    ChatRequest,
    Message,
    TextDelta,
    TextPart,
    TranscriptDelta,
)
from omnicli.errors import OmniError, UnsupportedError, UsageError
from omnicli.server.errors import INTERNAL
from tests.helpers.scripted import Hold, ScriptedEngine, answer
from tests.helpers.server_harness import HangingUpClient, openai_error, raw_json, run, sse_events

HI = [{"role": "user", "content": "Hi"}]
USAGE = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
REFUSAL = "the thinker refused the prompt: Requested tokens (20318) exceed context window of 8192"


def chat(body: dict | bytes, engine: ScriptedEngine | None = None):
    async def test(client, app):
        if isinstance(body, bytes):
            headers = {"content-type": "application/json"}
            return await client.post("/v1/chat/completions", content=body, headers=headers)
        return await client.post("/v1/chat/completions", json=body)

    return run(test, engine)


def test_whole_text_answer_in_openais_shape():
    engine = ScriptedEngine(chat=answer("Hello", " there."))
    response = chat({"model": "m", "messages": [{"role": "developer", "content": "Be brief."}, *HI],
                     "max_completion_tokens": 40, "temperature": 0.2}, engine)
    assert response.status_code == 200
    reply = response.json()
    assert reply["id"].startswith("chatcmpl-") and isinstance(reply["created"], int)
    assert {k: v for k, v in reply.items() if k not in ("id", "created")} == {
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there."}, "finish_reason": "stop"}],
        "usage": USAGE,
    }
    assert engine.requests == [ChatRequest(
        messages=[Message("system", [TextPart("Be brief.")]), Message("user", [TextPart("Hi")])],
        model="m", max_tokens=40, temperature=0.2,
    )]


def test_default_max_tokens_and_model():
    engine = ScriptedEngine()
    reply = chat({"messages": HI}, engine).json()
    assert reply["model"] == "omni-embedded"
    assert engine.requests[0].max_tokens == 256


@pytest.mark.parametrize("fmt", ["wav", "flac", "pcm16"])
def test_whole_audio_answer_carries_the_transcript_and_the_audio(fmt):
    script = answer("Hello", " there.", audio_seconds=1.0)
    engine = ScriptedEngine(chat=script)
    response = chat({"messages": HI, "modalities": ["text", "audio"], "audio": {"voice": "joe", "format": fmt}}, engine)
    assert response.status_code == 200
    message = response.json()["choices"][0]["message"]
    assert message["content"] is None and message["role"] == "assistant"
    assert message["audio"]["transcript"] == "Hello there."
    assert message["audio"]["id"].startswith("audio_") and message["audio"]["expires_at"] > 0
    samples = np.concatenate([d.chunk.samples for d in script if isinstance(d, AudioDelta)])
    expected = encode(samples, SPEECH_RATE, AudioFormat("pcm" if fmt == "pcm16" else fmt))
    assert base64.b64decode(message["audio"]["data"]) == expected
    assert engine.requests[0].voice == "joe" and engine.requests[0].modalities == ("text", "audio")


def chunk_deltas(events: list) -> list:
    """(delta, finish_reason) per chat chunk, and the literal [DONE]."""
    out = []
    for event in events:
        if event == "[DONE]" or "error" in event:
            out.append(event)
        elif event["choices"]:
            out.append((event["choices"][0]["delta"], event["choices"][0]["finish_reason"]))
        else:
            out.append(("usage", event["usage"]))
    return out


def test_streamed_text_answer_is_chunks_then_done():
    response = chat({"messages": HI, "stream": True, "stream_options": {"include_usage": True}})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    assert chunk_deltas(events) == [
        ({"role": "assistant", "content": ""}, None),
        ({"content": "Hello"}, None),
        ({"content": " there."}, None),
        ({}, "stop"),
        ("usage", USAGE),
        "[DONE]",
    ]
    assert len({e["id"] for e in events[:-1]}) == 1
    assert {e["object"] for e in events[:-1]} == {"chat.completion.chunk"}


def test_streamed_audio_answer_sends_transcript_and_pcm_deltas():
    script = answer("Hi", "!", audio_seconds=0.5)
    audio = [d.chunk.samples for d in script if isinstance(d, AudioDelta)]
    body = {"messages": HI, "stream": True, "modalities": ["text", "audio"], "audio": {"format": "pcm16"}}
    deltas = chunk_deltas(sse_events(chat(body, ScriptedEngine(chat=script))))
    audio_id = deltas[1][0]["audio"]["id"]
    assert deltas == [
        ({"role": "assistant", "content": ""}, None),
        ({"audio": {"id": audio_id, "transcript": "Hi"}}, None),
        ({"audio": {"id": audio_id, "transcript": "!"}}, None),
        ({"audio": {"id": audio_id, "data": base64.b64encode(float_to_pcm16(audio[0])).decode()}}, None),
        ({"audio": {"id": audio_id, "data": base64.b64encode(float_to_pcm16(audio[1])).decode()}}, None),
        ({}, "stop"),
        "[DONE]",
    ]


@pytest.mark.parametrize(
    "failure, error",
    [
        (RuntimeError("llama fell over"), {"message": INTERNAL, "type": "server_error", "param": None, "code": None}),
        (OmniError("the thinker failed: oom"),
         {"message": "the thinker failed: oom", "type": "server_error", "param": None, "code": None}),
        (None, {"message": "the engine ended without an answer", "type": "server_error", "param": None, "code": None}),
    ],
)
def test_a_stream_that_fails_midway_ends_with_an_error_event_and_done(failure, error):
    script = [TextDelta("Hel")] + ([failure] if failure else [])
    deltas = chunk_deltas(sse_events(chat({"messages": HI, "stream": True}, ScriptedEngine(chat=script))))
    assert deltas == [({"role": "assistant", "content": ""}, None), ({"content": "Hel"}, None), {"error": error}, "[DONE]"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_over_the_context_window_is_a_400_even_after_transcripts(stream):
    engine = ScriptedEngine(chat=[TranscriptDelta("what I heard"), TranscriptDelta("and more"), UsageError(REFUSAL)])
    assert openai_error(chat({"messages": HI, "stream": stream}, engine), 400) == REFUSAL


@pytest.mark.parametrize(
    "failure, status, kind, message",
    [
        (UnsupportedError("the engine cannot see images"), 400, "invalid_request_error", "the engine cannot see images"),
        (OmniError("cannot load the LLM"), 500, "server_error", "cannot load the LLM"),
        (KeyError("choices"), 500, "server_error", INTERNAL),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_failure_before_the_first_delta_is_mapped_by_type(failure, status, kind, message, stream):
    response = chat({"messages": HI, "stream": stream}, ScriptedEngine(chat=[failure]))
    assert openai_error(response, status, kind) == message


@pytest.mark.parametrize(
    "body, param, needle",
    [
        ({"messages": HI, "n": 2}, "n", "n must be 1 (this server answers with one choice), got 2"),
        (raw_json('{"messages": [{"role": "user", "content": "a\\udc00b"}]}'), None,
         "messages[0].content holds a lone surrogate ('\\udc00') at character 1"),
        (raw_json('{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud83d"}]}]}'), None,
         "messages[0].content holds a lone surrogate"),
        ({"messages": HI, "modalities": ["text", "audio"], "audio": {"format": "aac"}}, "audio.format",
         "Invalid audio format 'aac'. Supported formats: ['wav', 'mp3', 'flac', 'opus', 'pcm', 'pcm16']"),
        ({"messages": HI, "modalities": ["text", "audio"], "audio": {"voice": "~/voices/x.onnx"}}, None,
         "voice must be a voice name (GET /v1/audio/voices lists them), not a path"),
        ({"messages": HI, "voice": "nobody"}, None, "unknown voice 'nobody'; voices: joe"),
        ({"messages": []}, "messages", "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "messages",
         "a 'input_audio' content part needs its 'input_audio' field"),
        ({"messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "@@", "format": "wav"}}]}]}, None, "not valid base64"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
         "messages", "image_url must be a base64 data URI; this server fetches nothing"),
        ({"messages": HI, "max_tokens": 0}, "max_tokens", "max_tokens"),
    ],
)
def test_bad_requests_are_a_400_before_the_engine_is_asked(body, param, needle):
    engine = ScriptedEngine()
    response = chat(body, engine)
    assert needle in openai_error(response, 400)
    if param is not None:
        assert response.json()["error"]["param"] == param
    assert engine.requests == []


def test_n_of_one_is_fine():
    assert chat({"messages": HI, "n": 1}).status_code == 200


def test_a_client_that_hangs_up_on_a_whole_answer_cancels_the_generation():
    hold = Hold()
    closed = asyncio.Event()

    def script(req):
        try:
            yield TextDelta("Once upon a time")
            yield hold
            yield from answer(" the end.")
        finally:
            closed.set()  # the engine's stream was closed, not left waiting

    async def test(client, app):
        call = HangingUpClient(app, "POST", "/v1/chat/completions", {"messages": HI})
        running = asyncio.create_task(call())
        await hold.reached.wait()
        active = app.state.metrics.registry.get_sample_value
        assert active("omni_active_generations", {"kind": "chat"}) == 1
        call.hang_up()
        status = await asyncio.wait_for(running, 10)  # a bound for a broken build, not a timing
        assert status == 499
        assert active("omni_active_generations", {"kind": "chat"}) == 0
        assert not hold.gate.is_set()

    run(test, ScriptedEngine(chat=script))
