"""`POST /v1/audio/transcriptions` on the real app over a scripted engine."""

import io

import numpy as np
import pytest
import soundfile as sf

from omnicli.engine.base import Engine
from tests.helpers.scripted import ScriptedEngine, tone
from tests.helpers.server_harness import openai_error, run


def wav(seconds: float, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    samples = tone(seconds).samples[: int(seconds * rate)] if seconds else np.zeros(0, np.float32)
    sf.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def transcribe(data: bytes, engine: Engine | None = None, **form):
    async def test(client, app):
        return await client.post("/v1/audio/transcriptions", files={"file": ("clip.wav", data)},
                                 data={"model": "whisper-1", **form})

    return run(test, engine)


def test_json_is_the_text():
    engine = ScriptedEngine(transcripts=["hello world"])
    response = transcribe(wav(1.0), engine, language="de")
    assert response.status_code == 200
    assert response.json() == {"text": "hello world"}
    assert engine.requests == [("transcribe", 1.0, 16000, "de", False)]


def test_text_is_plain():
    response = transcribe(wav(0.5), ScriptedEngine(transcripts=["hello"]), response_format="text")
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "hello\n"


def test_verbose_json_has_language_duration_and_segments():
    response = transcribe(wav(0.5), ScriptedEngine(transcripts=["hello"]), response_format="verbose_json")
    assert response.json() == {
        "task": "transcribe", "language": "en", "duration": 0.5, "text": "hello",
        "segments": [{"id": 0, "start": 0.0, "end": 0.5, "text": "hello"}],
    }


def test_subtitles_are_one_cue_per_segment():
    srt = transcribe(wav(0.5), ScriptedEngine(transcripts=["hello"]), response_format="srt")
    assert srt.text == "1\n00:00:00,000 --> 00:00:00,500\nhello\n"
    vtt = transcribe(wav(0.5), ScriptedEngine(transcripts=["hello"]), response_format="vtt")
    assert vtt.text == "WEBVTT\n\n00:00:00.000 --> 00:00:00.500\nhello\n"


@pytest.mark.parametrize(
    "data, form, param, message",
    [
        (b"not audio at all", {}, "file", "file is not a readable audio file"),
        (wav(0), {}, "file", "file holds no audio"),
        (wav(0.5), {"response_format": "xml"}, "response_format",
         "response_format must be one of json, text, verbose_json, srt, vtt, got 'xml'"),
    ],
)
def test_bad_uploads_are_a_400(data, form, param, message):
    engine = ScriptedEngine()
    response = transcribe(data, engine, **form)
    assert openai_error(response, 400) == message
    assert response.json()["error"]["param"] == param
    assert engine.requests == []


class Mouth(Engine):
    """An engine that speaks and chats but cannot hear (a remote TTS server, say)."""

    name = "mouth"

    async def speech(self, req):
        yield tone(0.1)

    async def chat(self, req):
        yield None


def test_an_engine_that_cannot_transcribe_is_a_clear_400_not_a_crash():
    message = openai_error(transcribe(wav(0.5), Mouth()), 400)
    assert message == "the mouth engine cannot transcribe audio"
