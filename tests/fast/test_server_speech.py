"""`POST /v1/audio/speech` on the real app over a scripted engine: exact bytes, content types,
SSE event sequences, the limits a server puts on input, and failures mid-stream."""

import base64

import httpx
import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.formats import AudioFormat, decode, encode
from omnicli.audio.pcm import float_to_pcm16
from omnicli.audio.wavstream import streaming_wav_header
from omnicli.engine.base import SpeechRequest
from omnicli.errors import OmniError, UsageError
from omnicli.server.errors import INTERNAL
from tests.helpers.scripted import ScriptedEngine, tone
from tests.helpers.server_harness import openai_error, raw_json, run, sse_events

HELLO = tone(0.5, "Hello.")
WORLD = tone(0.25, "World.")


def speak(body: dict | bytes, engine: ScriptedEngine | None = None, **options) -> httpx.Response:
    async def test(client, app):
        if isinstance(body, bytes):
            return await client.post("/v1/audio/speech", content=body, headers={"content-type": "application/json"})
        return await client.post("/v1/audio/speech", json=body)

    return run(test, engine, **options)


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_whole_answer_is_the_engines_audio_encoded(fmt):
    engine = ScriptedEngine(speech=[HELLO, WORLD])
    response = speak({"input": "Hello. World.", "voice": "joe", "speed": 1.5, "response_format": fmt.value}, engine)
    assert response.status_code == 200
    assert response.headers["content-type"] == fmt.content_type
    assert response.headers["x-omni-audio-seconds"] == "0.750"
    assert response.headers["x-omni-input-characters"] == "13"
    audio = np.concatenate([HELLO.samples, WORLD.samples])
    if fmt is AudioFormat.OPUS:  # Ogg numbers each stream at random: compare what it holds
        samples, rate = decode(response.content)
        assert rate == SPEECH_RATE and abs(len(samples) - len(audio)) < SPEECH_RATE // 100
    else:
        assert response.content == encode(audio, SPEECH_RATE, fmt)
    assert engine.requests == [SpeechRequest(text="Hello. World.", voice="joe", speed=1.5)]


def test_sse_stream_is_one_delta_per_piece_then_done():
    engine = ScriptedEngine(speech=[HELLO, WORLD])
    response = speak({"input": "Hello. World.", "stream": True, "response_format": "pcm"}, engine)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    assert events[:2] == [
        {"type": "speech.audio.delta", "audio": base64.b64encode(float_to_pcm16(HELLO.samples)).decode()},
        {"type": "speech.audio.delta", "audio": base64.b64encode(float_to_pcm16(WORLD.samples)).decode()},
    ]
    assert [e["type"] for e in events[2:]] == ["speech.audio.done"]


def test_sse_wav_stream_starts_with_a_header_of_unknown_size():
    response = speak({"input": "Hello.", "stream_format": "sse", "response_format": "wav"})
    deltas = [base64.b64decode(e["audio"]) for e in sse_events(response) if e["type"] == "speech.audio.delta"]
    assert deltas == [streaming_wav_header(SPEECH_RATE), float_to_pcm16(HELLO.samples)]


@pytest.mark.parametrize("fmt, head", [("pcm", b""), ("wav", streaming_wav_header(SPEECH_RATE))])
def test_raw_stream_is_the_bytes_themselves(fmt, head):
    engine = ScriptedEngine(speech=[HELLO, WORLD])
    response = speak({"input": "Hello. World.", "stream_format": "audio", "response_format": fmt}, engine)
    assert response.status_code == 200
    assert response.headers["content-type"] == AudioFormat(fmt).content_type
    assert response.content == head + float_to_pcm16(HELLO.samples) + float_to_pcm16(WORLD.samples)


@pytest.mark.parametrize(
    "failure, kind, message",
    [
        (RuntimeError("espeak exploded"), "server_error", INTERNAL),
        (OmniError("the voice model broke"), "server_error", "the voice model broke"),
        (UsageError("that piece cannot be spoken"), "invalid_request_error", "that piece cannot be spoken"),
    ],
)
def test_sse_stream_that_fails_midway_ends_with_an_error_event(failure, kind, message):
    engine = ScriptedEngine(speech=[HELLO, failure, WORLD])
    events = sse_events(speak({"input": "Hello. World.", "stream": True, "response_format": "pcm"}, engine))
    assert [e["type"] for e in events] == ["speech.audio.delta", "error"]
    assert events[1]["error"] == {"message": message, "type": kind, "param": None, "code": None}


def test_raw_stream_that_fails_midway_breaks_off_rather_than_ending_cleanly():
    engine = ScriptedEngine(speech=[HELLO, RuntimeError("espeak exploded")])
    with pytest.raises(RuntimeError, match="espeak exploded"):
        speak({"input": "Hello. World.", "stream_format": "audio", "response_format": "pcm"}, engine)


@pytest.mark.parametrize(
    "failure, status, kind, message",
    [
        (UsageError("unknown voice"), 400, "invalid_request_error", "unknown voice"),
        (OmniError("cannot load the voice"), 500, "server_error", "cannot load the voice"),
        (RuntimeError("segfault-ish"), 500, "server_error", INTERNAL),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_failure_before_any_audio_is_an_error_response_not_a_broken_stream(failure, status, kind, message, stream):
    body = {"input": "Hello.", "stream": stream, "response_format": "pcm"}
    assert openai_error(speak(body, ScriptedEngine(speech=[failure])), status, kind) == message


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"input": "x" * 4097}, "input is 4097 characters long; the limit is 4096"),
        (raw_json('{"input": "Hello \\ud800 there"}'), "input holds a lone surrogate ('\\ud800') at character 6"),
        (raw_json('{"input": "Hello \\u0000 there"}'), "input holds a NUL character at character 6"),
        ({"input": "..."}, "input has nothing to speak"),
        ({"input": " ?! -- "}, "input has nothing to speak"),
        ({"input": "   "}, "input must not be empty"),
        ({"input": "hi", "n": 2, "speed": 10}, "speed"),
        ({"input": "hi", "response_format": "aac"}, "response_format"),
        ({"input": "hi", "stream": True, "response_format": "mp3"}, "streaming needs response_format"),
        ({"input": "hi", "voice": "nobody"}, "unknown voice 'nobody'; voices: joe"),
    ],
)
def test_bad_input_is_a_400_before_the_engine_is_asked(body, needle):
    engine = ScriptedEngine()
    assert needle in openai_error(speak(body, engine), 400)
    assert engine.requests == []


def test_the_longest_input_openai_allows_is_spoken():
    engine = ScriptedEngine()
    assert speak({"input": ("word " * 820)[:4095] + "."}, engine).status_code == 200
    assert len(engine.requests[0].text) == 4096


@pytest.mark.parametrize("voice", ["~/x.onnx", "/etc/x.onnx", "../x", "x.onnx", "C:\\voices\\x", "./joe"])
def test_a_voice_is_a_name_from_the_list_never_a_server_path(voice):
    engine = ScriptedEngine()
    message = openai_error(speak({"input": "Hello.", "voice": voice}, engine), 400)
    assert message == "voice must be a voice name (GET /v1/audio/voices lists them), not a path"
    assert engine.requests == []
