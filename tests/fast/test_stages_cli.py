"""Stages anywhere through the real CLI: `--llm-server`/`--asr-server` on chat, talk, serve and
bench-wer, and chat around a text-only `--server` (it thinks; omni hears and speaks here), with
the server's capabilities asked once per run."""

import json
import socket

import httpx
import pytest
import soundfile as sf

from omnicli.audio.formats import AudioFormat, encode
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.scripted import ScriptedEngine, tone
from tests.helpers.stage_fakes import OMNI_OPENAPI, FakeServer, StageEngines, clip, llama_server, whisper_server

URL = "http://llm.test"
AROUND = f"omni: the server at {URL} neither hears nor speaks; hearing and speaking here, with it as the thinker\n"


@pytest.fixture
def question(tmp_path):
    path = tmp_path / "q.wav"
    path.write_bytes(encode(clip(0.5), 24000, AudioFormat.WAV))
    return path


def refusing() -> httpx.MockTransport:
    def refuse(request):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    return httpx.MockTransport(refuse)


def test_chat_with_llm_server_prints_the_servers_answer():
    server = llama_server("Paris", ".")
    result = omni("chat", "Capital of France?", "--llm-server", URL, "--llm-model", "smollm2", engines=StageEngines(server))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Paris.\n", "")
    (body,) = server.bodies("/v1/chat/completions")
    assert body["model"] == "smollm2" and "Capital of France?" in json.dumps(body["messages"])


def test_chat_with_an_unreachable_llm_server_is_one_line_naming_it():
    engines = StageEngines(FakeServer())
    engines.http = refusing()
    result = omni("chat", "Hi", "--llm-server", "http://127.0.0.1:9", engines=engines)
    assert result.exit_code == 1
    assert result.stderr == "omni: error: --llm-server: cannot reach the server at http://127.0.0.1:9: [Errno 111] Connection refused\n"


def test_chat_around_a_text_only_server_hears_and_speaks_here(tmp_path, question):
    server = llama_server("It is", " noon.")
    engines = StageEngines(server)
    said = tmp_path / "a.wav"
    result = omni("chat", "--server", URL, "-a", question, "--modalities", "text,audio", "-o", said, engines=engines)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "It is noon.\n"
    assert result.stderr == AROUND + f"(wrote {said})\n"
    (body,) = server.bodies("/v1/chat/completions")
    assert "input_audio" not in json.dumps(body) and "what time is it" in json.dumps(body["messages"])
    assert engines.stages.asr.heard == [(0.5, 24000, True)]
    assert engines.stages.talker.said == [("It is noon.", None)]
    samples, rate = sf.read(said, dtype="float32")
    assert rate == 24000 and len(samples) == 6000  # the local talker's 0.25 s


def test_capabilities_are_asked_once_per_run_and_said_once(tmp_path):
    server = llama_server("Yes.")
    said = tmp_path / "a.wav"
    result = omni("chat", "--server", URL, "-i", "--modalities", "text,audio", "-o", said,
                  input="One?\nTwo?\nThree?\n", engines=StageEngines(server))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Yes.\n" * 3
    assert len(server.sent("GET", "/openapi.json")) == 1
    assert result.stderr.count(AROUND) == 1
    assert len(server.bodies("/v1/chat/completions")) == 3


def test_text_chat_with_a_text_only_server_asks_nothing():
    server = llama_server("Hi.")
    result = omni("chat", "Hello", "--server", URL, engines=StageEngines(server))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Hi.\n", "")
    assert not server.sent("GET", "/openapi.json")


def test_no_local_stages_refuses_in_one_line_and_writes_nothing(tmp_path, question):
    server = llama_server()
    said = tmp_path / "a.wav"
    result = omni("chat", "--server", URL, "-a", question, "-o", said, "--no-local-stages", engines=StageEngines(server))
    assert result.exit_code == 1
    assert result.stderr == (f"omni: error: the server at {URL} has no audio routes, so it can neither hear nor speak "
                             "(without --no-local-stages omni hears and speaks here around it)\n")
    assert not said.exists() and not server.sent("POST", "/v1/chat/completions")


def test_a_server_with_audio_routes_gets_the_audio_itself(tmp_path, question):
    server = llama_server("Noon.")
    server.routes[("GET", "/openapi.json")] = httpx.Response(200, json=OMNI_OPENAPI)
    engines = StageEngines(server)
    result = omni("chat", "--server", URL, "-a", question, engines=engines)
    assert result.exit_code == 0 and result.stderr == ""
    (body,) = server.bodies("/v1/chat/completions")
    assert "input_audio" in json.dumps(body)
    assert engines.stages.asr.heard == []


def test_talk_refuses_a_whole_server_with_stage_servers(tmp_path, question):
    result = omni("talk", "--server", URL, "--llm-server", URL, "--input-file", question, "--output-file",
                  tmp_path / "a.wav", engines=StageEngines(FakeServer()))
    assert result.exit_code == 2 and "use one or the other" in result.stderr
    assert not (tmp_path / "a.wav").exists()


def test_serve_with_an_unreachable_llm_server_fails_before_listening():
    engines = StageEngines(FakeServer())
    engines.http = refusing()
    result = omni("serve", "--port", "0", "--llm-server", "http://127.0.0.1:9", engines=engines)
    assert result.exit_code == 1
    assert result.stderr == "omni: error: --llm-server: cannot reach the server at http://127.0.0.1:9: [Errno 111] Connection refused\n"


def test_bench_wer_judges_with_a_remote_whisper(tmp_path):
    dataset = tmp_path / "sentences.txt"
    dataset.write_text("The cat sat.\nA dog ran far.\n")
    judge = whisper_server("The cat sat.", "a dog ran away")
    engines = ScriptedEngines(ScriptedEngine(speech=[tone(0.5)]))
    engines.http = httpx.MockTransport(judge)
    result = omni("bench-wer", "-d", dataset, "--asr-server", "http://whisper.test/v1", "--json", engines=engines)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["scored"], summary["wer_mean"]) == (2, pytest.approx(0.125))  # "far" heard as "away"
    asked = judge.sent("POST", "/v1/audio/transcriptions")
    assert len(asked) == 2 and all('name="language"\r\n\r\nen' in r.content.decode("latin-1") for r in asked)
    assert engines.scripted_judge.requests == []


def test_bench_wer_with_an_unreachable_judge_is_one_line(tmp_path):
    dataset = tmp_path / "sentences.txt"
    dataset.write_text("The cat sat.\n")
    engines = ScriptedEngines()
    engines.http = refusing()
    result = omni("bench-wer", "-d", dataset, "--asr-server", "http://127.0.0.1:9", engines=engines)
    assert result.exit_code == 1
    assert result.stderr == "omni: error: --asr-server: cannot reach the server at http://127.0.0.1:9: [Errno 111] Connection refused\n"
    assert engines.scripted.requests == []  # nothing synthesized for a judge that is not there


def test_serve_on_a_port_in_use_says_so_in_one_line_before_any_model_loads():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        engine = ScriptedEngine()
        result = omni("serve", "--port", str(port), engines=ScriptedEngines(engine))
    assert (result.exit_code, engine.preloaded) == (2, 0)
    assert result.stderr == f"omni: error: cannot listen on 127.0.0.1:{port}: Address already in use (choose another --port)\n"
