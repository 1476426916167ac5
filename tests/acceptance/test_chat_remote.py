"""`omni chat --server`: every answer shape decodes to the same text and audio; failures are clean."""

import asyncio
import json

import numpy as np
import pytest
import soundfile as sf

from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import AudioDelta, AudioPart, ChatDone, ChatRequest, Message, TextDelta, TextPart
from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers import chat_shapes
from tests.helpers.chat_shapes import TEXT, RecordedServer
from tests.helpers.omni_processes import start_server
from tests.helpers.speech_check import wer


@pytest.fixture(scope="module")
def clip() -> np.ndarray:
    # Quantised to PCM16 like every shape carries it, so all decode to the same samples.
    samples = synthesize(TEXT)
    return np.round(np.clip(samples, -1, 1) * 32767) / 32768


@pytest.fixture
def server():
    recorded = RecordedServer()
    yield recorded
    recorded.close()


def run_chat(url: str, *, stream: bool, audio_part: bytes | None = None):
    parts = [TextPart("What is the capital of France?")]
    if audio_part:
        parts.append(AudioPart(audio_part, "wav"))
    request = ChatRequest([Message("user", parts)], modalities=("text", "audio"), voice="vivian")

    async def run():
        engine = RemoteEngine(url, "secret", chat_stream=stream)
        text, audio, done = [], [], None
        try:
            async for delta in engine.chat(request):
                match delta:
                    case TextDelta(text=t):
                        text.append(t)
                    case AudioDelta(chunk=c):
                        audio.append(c.samples)
                    case ChatDone():
                        done = delta
        finally:
            await engine.aclose()
        return "".join(text), np.concatenate(audio), done

    return asyncio.run(run())


@pytest.mark.parametrize(
    "shape, stream",
    [("openai_whole", False), ("vllm_whole", False), ("openai_stream", True), ("vllm_stream", True)],
)
def test_every_shape_decodes_to_the_same_answer(server, clip, shape, stream):
    build = getattr(chat_shapes, shape)
    if stream:
        server.reply(200, "text/event-stream", chat_shapes.sse(build(clip)))
    else:
        server.reply(200, "application/json", json.dumps(build(clip)).encode())
    text, audio, done = run_chat(server.url, stream=stream)
    assert text == TEXT
    assert done.text == TEXT and done.usage == chat_shapes.USAGE
    assert len(audio) == len(clip)
    assert np.max(np.abs(audio - clip)) < 2e-4


def test_request_carries_modalities_voice_and_audio(server, clip):
    server.reply(200, "application/json", json.dumps(chat_shapes.vllm_whole(clip)).encode())
    run_chat(server.url, stream=False, audio_part=b"RIFF-test-bytes")
    body = server.requests[-1]
    assert body["model"] == "recorded-model"
    assert body["modalities"] == ["text", "audio"]
    assert body["audio"] == {"format": "wav", "voice": "vivian"}
    assert body["voice"] == "vivian"
    content = body["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "What is the capital of France?"}
    assert content[1]["type"] == "input_audio" and content[1]["input_audio"]["format"] == "wav"
    server.reply(200, "text/event-stream", chat_shapes.sse(chat_shapes.openai_stream(clip)))
    run_chat(server.url, stream=True)
    assert server.requests[-1]["audio"]["format"] == "pcm16"
    assert server.requests[-1]["stream"] is True


def test_cli_against_each_shape_writes_audio(omni, server, clip, tmp_path, judge):
    server.reply(200, "text/event-stream", chat_shapes.sse(chat_shapes.vllm_stream(clip)))
    path = tmp_path / "answer.mp3"
    result = omni("chat", "hi", "--server", server.url, "-o", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == TEXT
    samples, rate = sf.read(str(path), dtype="float32")
    assert judge.wer_of(TEXT, samples, rate) < 0.2


def test_image_attachment_reaches_the_server(omni, server, clip, tmp_path):
    server.reply(200, "application/json", json.dumps(chat_shapes.vllm_whole(clip)).encode())
    image = tmp_path / "x.png"
    image.write_bytes(b"\x89PNG fake bytes")
    result = omni("chat", "what is this?", "-a", str(image), "--server", server.url, "--no-stream")
    assert result.returncode == 0, result.stderr
    part = server.requests[-1]["messages"][-1]["content"][0]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize(
    "status, content_type, payload, cut, needle",
    [
        (500, "application/json", b'{"error": {"message": "talker crashed"}}', False, "server answered 500: talker crashed"),
        (400, "application/json", b'{"detail": "Invalid audio format"}', False, "server answered 400: Invalid audio format"),
        (200, "text/event-stream", None, True, "broke off"),
        (200, "text/event-stream", "no-done", False, "ended before it was complete"),
    ],
)
def test_server_failures_leave_no_file(omni, server, clip, tmp_path, status, content_type, payload, cut, needle):
    if payload is None:
        payload = chat_shapes.sse(chat_shapes.openai_stream(clip))[:5000]
    elif payload == "no-done":
        payload = chat_shapes.sse(chat_shapes.openai_stream(clip), done=False)
    server.reply(status, content_type, payload, cut)
    path = tmp_path / "answer.wav"
    result = omni("chat", "hi", "--server", server.url, "-o", str(path))
    assert result.returncode == 1
    assert needle in result.stderr.decode().strip().splitlines()[-1]
    assert list(tmp_path.iterdir()) == []


def test_remote_transcribe_against_omni_serve(omni_server):
    """RemoteEngine.transcribe through a real `omni serve`: verbose_json with segments."""
    sentence = "The bakery opens at six in the morning."
    samples = synthesize(sentence)

    async def run():
        engine = RemoteEngine(omni_server)
        try:
            return await engine.transcribe(samples, 24000, language="en")
        finally:
            await engine.aclose()

    transcript = asyncio.run(run())
    assert wer(sentence, transcript.text) < 0.2, transcript.text
    assert transcript.language == "en" and abs(transcript.seconds - len(samples) / 24000) < 0.01
    assert transcript.segments and " ".join(s["text"] for s in transcript.segments) == transcript.text


def test_wrong_key_says_the_server_answered_401(omni):
    proc, url = start_server("--api-key", "right-key")
    try:
        result = omni("chat", "hi", "--server", url, "--api-key", "wrong-key")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith("omni: error: server answered 401: ") and "lists no model" not in line
