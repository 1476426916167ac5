"""Stages anywhere, against llama-cpp-python's real OpenAI server on 127.0.0.1 as the thinker:
`omni chat --llm-server`, chat around it as a text-only `--server`, `omni talk --llm-server`
headless, and `omni serve --llm-server` answering a chat and a realtime turn through it."""

import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.omni_processes import free_port, start_server
from tests.helpers.speech_check import wer
from tests.helpers.third_party import start_llama_server, stop

QUESTION = "What is the capital of France?"
SPOKEN = "How many days are there in a week?"


@pytest.fixture(scope="module")
def llama():
    process, url = start_llama_server()
    try:
        # its first completion is slow (warm-up): pay for it here, not in a test's timeout
        httpx.post(url + "/v1/chat/completions", timeout=120,
                   json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
        yield url
    finally:
        stop(process)


@pytest.fixture(scope="module")
def spoken(tmp_path_factory) -> str:
    """The question, spoken, then silence for the turn to end."""
    path = tmp_path_factory.mktemp("spoken") / "question.wav"
    audio = np.concatenate([np.zeros(6000, np.float32), synthesize(SPOKEN), np.zeros(24000 * 2, np.float32)])
    sf.write(str(path), audio, 24000)
    return str(path)


def events_of(path) -> list[dict]:
    return [json.loads(line)["event"] for line in open(path)]


def spoken_answers(log) -> list[str]:
    return [e["transcript"] for e in log if e["type"] == "response.output_audio_transcript.done"]


def test_chat_with_llm_server_answers_from_it(omni, llama):
    result = omni("chat", "--llm-server", llama, "--temperature", "0", "--max-tokens", "24",
                  f"{QUESTION} Answer in one word.")
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout.decode()


def test_chat_around_a_text_only_server_hears_and_speaks_here(omni, llama, spoken, tmp_path, judge):
    said = tmp_path / "a.wav"
    result = omni("chat", "--server", llama, "-a", spoken, "--modalities", "text,audio", "-o", str(said),
                  "--temperature", "0", "--max-tokens", "40")
    assert result.returncode == 0, result.stderr
    err = result.stderr.decode()
    assert err.count("neither hears nor speaks; hearing and speaking here") == 1
    answer = result.stdout.decode().strip()
    assert answer
    samples, rate = sf.read(said, dtype="float32")
    assert judge.cer_of(answer, samples, rate) < 0.2

    refused = omni("chat", "--server", llama, "-a", spoken, "-o", str(tmp_path / "b.wav"), "--no-local-stages")
    assert refused.returncode == 1 and len(refused.stderr.decode().splitlines()) == 1
    assert "has no audio routes" in refused.stderr.decode() and not (tmp_path / "b.wav").exists()


def test_talk_with_llm_server_headless(omni, llama, spoken, tmp_path, judge):
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--llm-server", llama, "--input-file", spoken, "--output-file", str(said),
                  "--transcript", str(log))
    assert result.returncode == 0, result.stderr
    events = events_of(log)
    heard = [e["transcript"] for e in events if e["type"] == "conversation.item.input_audio_transcription.completed"]
    assert len(heard) == 1 and wer(SPOKEN, heard[0]) < 0.35, heard
    (answer,) = spoken_answers(events)
    assert answer.strip()
    samples, rate = sf.read(said, dtype="float32")
    assert judge.cer_of(answer, samples, rate) < 0.2


def test_unreachable_llm_server_is_one_line_naming_it(omni, spoken, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    result = omni("talk", "--llm-server", dead, "--input-file", spoken, "--output-file", str(tmp_path / "a.wav"))
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"omni: error: --llm-server: cannot reach the server at {dead}")
    assert not (tmp_path / "a.wav").exists()


def test_serve_with_llm_server_answers_chat_and_a_realtime_turn(omni, llama, spoken, tmp_path, judge):
    process, url = start_server("--llm-server", llama)
    try:
        chat = omni("chat", "--server", url, "--temperature", "0", "--max-tokens", "24", f"{QUESTION} Answer in one word.")
        assert chat.returncode == 0, chat.stderr
        assert "Paris" in chat.stdout.decode()

        said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
        talk = omni("talk", "--server", url, "--input-file", spoken, "--output-file", str(said), "--transcript", str(log))
        assert talk.returncode == 0, talk.stderr
        (answer,) = spoken_answers(events_of(log))
        samples, rate = sf.read(said, dtype="float32")
        assert answer.strip() and judge.cer_of(answer, samples, rate) < 0.2
    finally:
        process.terminate()
        process.wait(timeout=10)
