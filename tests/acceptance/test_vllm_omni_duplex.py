"""`omni talk --duplex` against vLLM-Omni's own duplex server (vllm-omni 0.30.0 from the package
index): its `/v1/realtime?duplex=1` route, handshake, session runner, replay journal and turn-based
Qwen3-Omni duplex plugin, run on the CPU over a text LLM (vllm_omni_duplex_server.py). The model
cannot hear, so it answers in text; what is tested is omni speaking vLLM-Omni's protocol."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.turns.models import TurnModels
from tests.helpers.cutting_proxy import CuttingProxy
from tests.helpers.realtime_harness import silence
from tests.helpers.talk_harness import duplex_talker
from tests.helpers.turn_speech import speech

HERE = Path(__file__).resolve().parent
OVERLAY = Path.home() / ".cache" / "omni" / "vllm-omni-duplex"
"""What vLLM-Omni's server imports beyond omni's environment (built by .ci/run)."""


@pytest.fixture(scope="module")
def vllm_omni(tmp_path_factory):
    """vLLM-Omni's duplex server on a free loopback port (~30 s to start); its URL."""
    if not OVERLAY.is_dir():
        pytest.fail(f"{OVERLAY} is missing: .ci/run builds it (the lines after 'vLLM-Omni's own duplex server')")
    work = tmp_path_factory.mktemp("vllm_omni")
    port_file, log = work / "url", open(work / "server.log", "wb")
    server = subprocess.Popen([sys.executable, str(HERE / "vllm_omni_duplex_server.py"), "--port-file", str(port_file)],
                              env={**os.environ, "PYTHONPATH": str(OVERLAY)}, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not port_file.exists() or not port_file.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("vLLM-Omni's duplex server did not start:\n" + (work / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        yield port_file.read_text()
    finally:
        os.killpg(server.pid, signal.SIGINT)  # its engine processes too
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def question(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("question") / "question.wav"
    sf.write(str(path), np.concatenate([silence(0.5), speech(), silence(2.0)]), 24000)
    return str(path)


def events_of(path: Path) -> list[tuple[str, dict]]:
    return [(e["dir"], e["event"]) for e in map(json.loads, path.read_text().splitlines())]


@pytest.mark.parametrize("vad", ["client", "server"])
def test_talk_duplex_is_answered_by_vllm_omni_s_turn_based_duplex(omni, vllm_omni, question, tmp_path, vad):
    """The model refuses to answer by itself (`auto_response`): omni opens the session without it
    and asks for the answer at each turn end; with --vad server (nobody would end the turn) omni's
    own VAD ends it, and says so. The answer is text: the output file holds no audio, said once."""
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--duplex", "--vad", vad, "--server", vllm_omni, "--input-file", question,
                  "--output-file", str(said), "--transcript", str(log), timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    stderr = result.stderr.decode()
    answer = [line for line in stderr.splitlines() if line.startswith("omni: ")]
    assert len(answer) == 1 and len(answer[0]) > len("omni: ") + 10, stderr
    assert "holds no audio" in stderr and len(sf.read(str(said))[0]) == 0
    assert ("answers only when asked" in stderr) == (vad == "server")
    events = events_of(log)
    updates = [e["session"] for d, e in events if d == "out" and e["type"] == "session.update"]
    assert updates[0]["extra_body"]["auto_response"] is True and "auto_response" not in updates[1]["extra_body"]
    refusal = next(e for d, e in events if e["type"] == "error")
    assert refusal["error"]["code"] == "invalid_duplex_runtime_config"
    created = next(e for d, e in events if e["type"] == "session.created")
    assert created["session"]["capabilities"]["implementation_level"] == "turn_based_duplex"
    commits = [e for d, e in events if d == "out" and e["type"] == "input_audio_buffer.commit"]
    assert commits and all(c["response_create"] is True for c in commits)
    done = [e["response"] for d, e in events if e["type"] == "response.done"]
    assert [r["status"] for r in done] == ["completed"]
    assert events[-1][1]["type"] == "session.closed" and events[-1][1]["reason"] == "client_close"


def test_a_plain_talk_finds_vllm_omni_s_duplex_route_and_talks_duplex(omni, vllm_omni, question, tmp_path):
    """Without --duplex: vLLM-Omni's /v1/realtime is silent until the client's first event; the
    legacy opener brings its duplex greeting, and omni switches to duplex (said once)."""
    result = omni("talk", "--server", vllm_omni, "--input-file", question, "--output-file", str(tmp_path / "said.wav"),
                  timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stderr.decode().splitlines()
    assert lines[0] == "omni talk: the server offers full duplex (its session.created has duplex capabilities): talking duplex"
    assert len([line for line in lines if line.startswith("omni: ")]) == 1


@pytest.mark.parametrize("cut_after", [("in", "input_audio_buffer.committed"), ("out", "input_audio_buffer.commit")])
def test_a_socket_cut_at_the_commit_resumes_on_vllm_omni_with_no_event_lost_or_doubled(vllm_omni, cut_after):
    """The connection dies once the turn is committed (vLLM-Omni answers while no socket is
    attached), or just as the commit is written (it may die with the socket: then the replay does
    not confirm it and omni commits again). omni resumes the session (a new resume token each time)
    and gets the rest replayed: one answer, every event once."""
    port = int(vllm_omni.rsplit(":", 1)[1])

    async def go():
        proxy = CuttingProxy(port)
        url = await proxy.start()
        voice, log, link, client = duplex_talker(url, models=TurnModels())
        stop = asyncio.Event()
        talk = asyncio.create_task(client.run(stop))
        try:
            await voice.started.wait()
            token = link.resume_token
            voice.say(np.concatenate([speech(), silence(1.0)]))
            await log.until(*cut_after)
            proxy.cut()
            await log.until("in", "response.done")
            stop.set()
            await talk
        finally:
            await proxy.close()
        return link, log, token

    link, log, first_token = asyncio.run(asyncio.wait_for(go(), 90))
    assert link.resumes == 1 and link.duplicates == 0
    assert link.resume_token != first_token  # vLLM-Omni hands out a new one with session.resumed
    seqs = [e["server_event_seq"] for d, e in log.events if d == "in" and "server_event_seq" in e]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # every event once, in order
    assert [e["response"]["status"] for e in log.of("in", "response.done")] == ["completed"]
    assert [e["error"]["code"] for e in log.of("in", "error")] == ["invalid_duplex_runtime_config"]  # the opening only
    assert log.of("in", "session.closed")[0]["reason"] == "client_close"
