"""`omni talk` against servers nobody here wrote (issue 9): vLLM-Omni's turn-based handler (no server
VAD), a server that refuses the model (error, then close 1008), plain HTTP servers without a
WebSocket, servers that never answer or never finish the handshake. Real sockets on 127.0.0.1,
the real CLI and TalkClient; a scripted engine behind the recorded vLLM-Omni shape."""

import asyncio
import contextlib
import http.server
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.errors import ServerError
from omnicli.talk import dialects, transport
from omnicli.talk.client import TalkClient, TalkOptions
from omnicli.talk.speakers import FileSpeaker
from omnicli.talk.transport import LocalTransport, WebSocketTransport
from omnicli.turns.talk_modes import ClientVAD, ServerVAD
from tests.helpers.cli_harness import omni
from tests.helpers.models import TURN_MODELS
from tests.helpers.realtime_harness import run, silence
from tests.helpers.scripted import Hold, ScriptedEngine, answer
from tests.helpers.server_harness import free_port, uvicorn_thread
from tests.helpers.synthetic_speech import speech, speech_file
from tests.helpers.talk_harness import Log, Quiet, Voice
from tests.helpers.vllm_realtime_shape import VllmTurnBasedShape, served

FALLBACK = "omni talk: the server does not detect turns; using client VAD"


def talk_headless(url: str, tmp_path: Path, *extra: str):
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--server", url, "--input-file", speech_file(), "--output-file", said,
                  "--transcript", log, *extra)
    return result, said, log


def test_server_vad_falls_back_to_client_vad_where_the_server_does_not_take_it(tmp_path):
    shape = VllmTurnBasedShape(ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.5)))
    with served(shape.handler) as url:
        result, said, log = talk_headless(url, tmp_path, "--vad", "server")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines().count(FALLBACK) == 1
    assert "omni: It is noon." in result.stderr
    samples, rate = sf.read(str(said), dtype="float32")
    assert rate == 24000 and len(samples) == 12000 and np.abs(samples).max() > 0.2
    sent = [e["type"] for e in shape.received[0]]
    update = shape.received[0][0]
    assert update["type"] == "session.update"
    assert update["session"]["audio"]["input"]["turn_detection"] == {"type": "server_vad"}
    assert sent[-2:] == ["input_audio_buffer.commit", "response.create"]  # the client ended the turn itself
    assert sent.count("response.create") == 1
    assert log.stat().st_size > 0


def test_a_headless_talk_that_got_no_answer_audio_fails_and_writes_no_file(tmp_path):
    shape = VllmTurnBasedShape(ScriptedEngine(chat=answer("It is noon.")))  # text, no audio
    with served(shape.handler) as url:
        result, said, _ = talk_headless(url, tmp_path)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == "omni: error: the server sent no answer audio for 1 turn"
    assert not said.exists()


class NotFound(http.server.BaseHTTPRequestHandler):
    """A plain HTTP server's answer to everything: 404 with a JSON body."""

    def do_GET(self) -> None:
        body = b'{"detail":"Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None: ...


@contextlib.contextmanager
def plain_http(protocol: str):
    handler = type("Handler", (NotFound,), {"protocol_version": protocol})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def asgi_without_realtime():
    """An OpenAI-style ASGI server with WebSockets but no /v1/realtime (llama-cpp-python's
    shape): uvicorn answers the upgrade with 403, a plain GET with 404."""
    from fastapi import FastAPI

    app = FastAPI()
    app.get("/v1/models")(lambda: {"object": "list", "data": []})
    with uvicorn_thread(app) as url:
        yield url


@pytest.mark.parametrize("server", [lambda: plain_http("HTTP/1.0"), lambda: plain_http("HTTP/1.1"), asgi_without_realtime],
                         ids=["http-1.0", "http-1.1", "asgi"])
def test_a_server_without_a_realtime_endpoint_is_named_as_such(tmp_path, server):
    with server() as url:
        result, said, log = talk_headless(url, tmp_path)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"omni: error: the server answered HTTP 404 at {url}/v1/realtime: it has no realtime endpoint there"]
    assert not said.exists() and not log.exists()


def test_a_server_that_is_not_there_leaves_no_transcript(tmp_path):
    result, said, log = talk_headless(f"http://127.0.0.1:{free_port()}", tmp_path)
    assert result.exit_code == 1 and "cannot reach the realtime endpoint" in result.stderr
    assert not said.exists() and not log.exists()


def test_a_server_that_never_finishes_the_handshake_times_out(monkeypatch):
    monkeypatch.setattr(transport, "CONNECT_TIMEOUT", 0.2)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # accepts the TCP connection (backlog), never answers the upgrade
        port = listener.getsockname()[1]
        with pytest.raises(ServerError, match=r"did not answer within 0\.2 s"):
            run(WebSocketTransport(f"http://127.0.0.1:{port}", None, None).open())


def test_a_sent_turn_the_server_never_answers_ends_the_talk():
    shape = VllmTurnBasedShape(ScriptedEngine(chat=lambda req: [Hold()]))  # starts a response, never finishes it

    async def go(url: str):
        voice, stop = Voice(), asyncio.Event()
        client = TalkClient(WebSocketTransport(url, None, None), voice, FileSpeaker(),
                            TalkOptions(turns="client", answer_timeout=0.3), Quiet(), Log(), TURN_MODELS)
        voice.say(np.concatenate([speech(), silence(0.8)]))
        await client.run(stop)

    with served(shape.handler) as url, pytest.raises(ServerError, match=r"sent nothing for 0\.3 s after the turn"):
        run(go(url))


@pytest.mark.parametrize("turns, kind", [("server", "server_vad"), ("semantic", "semantic_vad")])
def test_server_turns_stay_where_the_server_took_them(turns, kind):
    """omni's own session confirms `turn_detection` (silence or semantic): no fallback, no note."""
    async def go():
        voice, stop, notes, log = Voice(), asyncio.Event(), Quiet(), Log()
        client = TalkClient(LocalTransport(ScriptedEngine(), models=TURN_MODELS), voice, FileSpeaker(),
                            TalkOptions(turns=turns), notes, log, TURN_MODELS)
        task = asyncio.create_task(client.run(stop))
        updated = await log.until("in", "session.updated")
        voice.say(silence(0.2))
        await log.until("out", "input_audio_buffer.append", 5)
        stop.set()
        await task
        return client, notes, updated

    client, notes, updated = run(go())
    assert isinstance(client.strategy, ServerVAD) and notes.notes == []
    assert updated["session"]["audio"]["input"]["turn_detection"]["type"] == kind


@pytest.mark.parametrize("session, detects", [
    ({"audio": {"input": {"turn_detection": {"type": "server_vad"}}}}, True),  # GA
    ({"turn_detection": {"type": "server_vad"}}, True),  # beta
    ({"audio": {"input": {"turn_detection": None}}}, False),
    ({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}}}, False),  # vLLM-Omni: dropped
    (None, False),
])
def test_what_the_server_accepted_is_read_from_session_updated(session, detects):
    heard = dialects.read({"type": "session.updated", "session": session})
    assert heard.kind == "session_updated" and heard.detects_turns is detects


def test_semantic_turns_fall_back_to_smart_turn_in_the_client_where_the_server_drops_them(tmp_path):
    shape = VllmTurnBasedShape(ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.5)))
    with served(shape.handler) as url:
        result, said, _ = talk_headless(url, tmp_path, "--vad", "semantic")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines().count("omni talk: the server does not detect turns; using client VAD with Smart Turn") == 1
    assert shape.received[0][0]["session"]["audio"]["input"]["turn_detection"] == {"type": "semantic_vad"}
    assert [e["type"] for e in shape.received[0]][-2:] == ["input_audio_buffer.commit", "response.create"]
    assert sf.info(str(said)).frames == 12000


def test_the_fallback_turns_are_client_vad():
    """The client that fell back finds turns itself: a ClientVAD, not the server strategy."""
    shape = VllmTurnBasedShape(ScriptedEngine(chat=answer("Yes.", audio_seconds=0.2)))

    async def go(url: str):
        voice, stop, notes, log = Voice(), asyncio.Event(), Quiet(), Log()
        client = TalkClient(WebSocketTransport(url, None, None), voice, FileSpeaker(), TalkOptions(turns="server"),
                            notes, log, TURN_MODELS)
        task = asyncio.create_task(client.run(stop))
        voice.say(np.concatenate([speech(), silence(0.8)]))
        await log.until("in", "response.done")
        stop.set()
        await task
        return client, notes

    with served(shape.handler) as url:
        client, notes = run(go(url))
    assert isinstance(client.strategy, ClientVAD)
    assert notes.notes == ["the server does not detect turns; using client VAD"]
    assert sum(len(s) for s in client.said) == 4800


def test_the_end_of_speech_a_server_reports_is_read_with_its_position_else_500_ms_before():
    """(test_talk_client.py: with a position, the wait shown runs from when that audio was recorded.)"""
    stopped = dialects.read({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 2600, "item_id": "i"})
    assert stopped.kind == "speech_stopped" and stopped.audio_end_ms == 2600
    assert dialects.read({"type": "input_audio_buffer.speech_stopped"}).audio_end_ms is None

    async def go():
        return TalkClient(LocalTransport(ScriptedEngine(), models=TURN_MODELS), Voice(), FileSpeaker(),
                          TalkOptions(turns="server"), Quiet(), Log(), TURN_MODELS)

    assert run(go())._speech_end_at(None, 10.0) == 9.5  # noqa: SLF001 - server VAD's default silence


def test_a_servers_realtime_error_is_capped_to_one_short_line():
    from omnicli.errors import MESSAGE_CHARS
    from omnicli.talk import dialects

    heard = dialects.read({"type": "error", "error": {"message": "x" * 5000 + "\n" + "y" * 10}})
    assert heard.kind == "error" and len(heard.text) == MESSAGE_CHARS and "\n" not in heard.text
