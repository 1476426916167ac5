"""The official `openai` client against a live `omni serve` on 127.0.0.1."""

import asyncio
import base64
import io

import numpy as np
import pytest
import soundfile as sf
from openai import BadRequestError, OpenAI

from omnicli.bench.similarity import DVectorSimilarity
from tests.acceptance.test_speak_cli import TEXT, decode
from tests.helpers.speech_check import normalize, wer


@pytest.fixture(scope="module")
def client(omni_server) -> OpenAI:
    return OpenAI(base_url=f"{omni_server}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.mark.parametrize("fmt", ["wav", "mp3", "flac", "opus", "pcm"])
def test_speech_every_format(client, judge, fmt):
    response = client.audio.speech.create(model="omni-embedded", voice="joe", input=TEXT, response_format=fmt)
    samples, rate = decode(response.read(), fmt)
    assert rate == 24000
    assert judge.wer_of(TEXT, samples, rate) < 0.2


@pytest.fixture(scope="module")
def server_voice_clip(client) -> bytes:
    return client.audio.speech.create(model="omni-embedded", voice="joe", input=TEXT, response_format="flac").read()


def test_transcription_of_the_servers_own_voice(client, server_voice_clip):
    result = client.audio.transcriptions.create(model="whisper-1", file=("clip.flac", server_voice_clip))
    assert wer(TEXT, result.text) < 0.15
    text = client.audio.transcriptions.create(model="whisper-1", file=("clip.flac", server_voice_clip), response_format="text")
    assert normalize(text) == normalize(result.text)
    verbose = client.audio.transcriptions.create(
        model="whisper-1", file=("clip.flac", server_voice_clip), response_format="verbose_json")
    assert verbose.language == "en" and verbose.duration > 2 and verbose.segments


def test_chat_text(client):
    completion = client.chat.completions.create(
        model="omni-embedded", messages=[{"role": "user", "content": "Say hello."}], max_tokens=30, temperature=0)
    assert completion.choices[0].message.content.strip()
    assert completion.usage.completion_tokens > 0


def test_chat_text_streaming(client):
    stream = client.chat.completions.create(
        model="omni-embedded", messages=[{"role": "user", "content": "Say hello."}], max_tokens=30,
        temperature=0, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert chunks[-1].usage.completion_tokens > 0


def test_chat_with_audio_in_and_out(client, server_voice_clip, judge):
    wav = io.BytesIO()
    samples, rate = sf.read(io.BytesIO(server_voice_clip), dtype="float32")
    sf.write(wav, samples, rate, format="WAV")
    completion = client.chat.completions.create(
        model="omni-embedded",
        modalities=["text", "audio"],
        audio={"voice": "joe", "format": "wav"},
        max_tokens=40,
        temperature=0,
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "Repeat what you hear."},
            {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav.getvalue()).decode(), "format": "wav"}},
        ]}],
    )
    audio = completion.choices[0].message.audio
    assert audio.transcript.strip()
    answer, rate = sf.read(io.BytesIO(base64.b64decode(audio.data)), dtype="float32")
    assert judge.cer_of(audio.transcript, answer, rate) < 0.2


def test_chat_audio_streaming(client, judge):
    stream = client.chat.completions.create(
        model="omni-embedded", modalities=["text", "audio"], audio={"voice": "joe", "format": "pcm16"},
        messages=[{"role": "user", "content": "Tell me two facts about the sun."}],
        max_tokens=60, temperature=0, stream=True)
    transcript, pcm = [], []
    for chunk in stream:
        for choice in chunk.choices:
            audio = choice.delta.audio
            if audio is not None:
                transcript.append(audio.transcript or "")
                if audio.data:
                    pcm.append(base64.b64decode(audio.data))
    samples = np.frombuffer(b"".join(pcm), dtype="<i2").astype(np.float32) / 32768
    text = "".join(transcript)
    assert text.strip() and len(samples) > 24000
    assert judge.cer_of(text, samples, 24000) < 0.2


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda c: c.audio.speech.create(model="m", voice="joe", input="hi", response_format="aac"), "response_format"),
        (lambda c: c.audio.speech.create(model="m", voice="joe", input="hi", speed=10), "speed"),
        (lambda c: c.audio.speech.create(model="m", voice="nobody", input="hi"), "nobody"),
        (lambda c: c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                             modalities=["text", "audio"], audio={"voice": "joe", "format": "aac"}),
         "Invalid audio format 'aac'"),
        (lambda c: c.chat.completions.create(model="m", messages=[]), "messages"),
        (lambda c: c.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]), "cannot see images"),
        (lambda c: c.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "@@not base64@@", "format": "wav"}}]}]), "base64"),
        (lambda c: c.audio.transcriptions.create(model="m", file=("x.wav", b"not audio")), "not a readable audio file"),
        (lambda c: c.audio.transcriptions.create(model="m", file=("x.wav", b"x"), response_format="xml"), "response_format"),
    ],
)
def test_bad_requests_get_a_clear_400(client, call, needle):
    with pytest.raises(BadRequestError) as caught:
        call(client)
    assert needle in caught.value.response.json()["error"]["message"]
    assert client.models.list().data[0].id == "omni-embedded"


OPENAI_VOICE_NAMES = ["alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
                      "marin", "cedar"]


@pytest.mark.parametrize("voice", OPENAI_VOICE_NAMES)
def test_every_openai_voice_name_is_spoken(client, voice):
    """What an OpenAI application sends works here, each name in the closest voice the server has."""
    response = client.audio.speech.create(model="omni-embedded", voice=voice, input="Hello.", response_format="wav")
    samples, rate = decode(response.read(), "wav")
    assert rate == 24000 and len(samples) > rate // 4


@pytest.mark.parametrize(("openai_voice", "own_voice"), [("alloy", "heart"), ("onyx", "joe")])
def test_an_openai_voice_speaks_exactly_as_the_voice_it_maps_to(client, tmp_path, openai_voice, own_voice):
    """Told by the speaker encoder (bench-wer's --sim): Piper samples its durations, so two takes
    of one voice differ in length about as much as two voices do."""
    def spoken(voice: str) -> np.ndarray:
        pcm = client.audio.speech.create(model="omni-embedded", voice=voice, input=TEXT, response_format="pcm").read()
        return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0

    other = {"heart": "joe", "joe": "heart"}[own_voice]
    references = {}
    for voice in (own_voice, other):
        references[voice] = tmp_path / f"{voice}.wav"
        sf.write(references[voice], spoken(voice), 24000)
    as_openai, encoder = spoken(openai_voice), DVectorSimilarity()
    similarity = {voice: asyncio.run(encoder.similarity(path, as_openai, 24000)) for voice, path in references.items()}
    assert similarity[own_voice] > 0.8 and similarity[own_voice] > similarity[other] + 0.2, similarity


def test_chat_audio_in_an_openai_voice(client, judge):
    completion = client.chat.completions.create(
        model="omni-embedded", modalities=["text", "audio"], audio={"voice": "nova", "format": "wav"},
        max_tokens=30, temperature=0, messages=[{"role": "user", "content": "Say hello."}])
    audio = completion.choices[0].message.audio
    answer, rate = sf.read(io.BytesIO(base64.b64decode(audio.data)), dtype="float32")
    assert judge.cer_of(audio.transcript, answer, rate) < 0.2


def test_an_unknown_voice_is_a_400_that_lists_the_voices(client):
    with pytest.raises(BadRequestError) as refused:
        client.audio.speech.create(model="omni-embedded", voice="nobody", input="Hello.")
    assert "unknown voice 'nobody'; voices: heart, joe (or OpenAI's: alloy," in str(refused.value)
