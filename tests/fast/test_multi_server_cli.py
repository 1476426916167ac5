"""Several servers through the real Typer app: `--server` repeated, a comma list, OMNI_SERVER,
the config file; speak, chat, transcribe and bench-wer spreading over in-memory servers (the
real factory, omni's own app per host); one warning per server skipped; all down is one error;
talk staying on the first server that answers."""

import asyncio
import collections
import json
import re

import pytest

from omnicli.audio.formats import AudioFormat, encode
from omnicli.cli.engines import EngineChoice, Engines
from omnicli.client.one_server import FirstServerTransport
from omnicli.config import Connection, resolve_connection
from omnicli.errors import ServerError
from tests.fast.test_multi_server import REFUSED, Hosts, skipped, url
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.scripted import ScriptedEngine, answer, tone

A, B = url("a"), url("b")


class HostEngines(Engines):
    """The real factory, every server reached through `hosts`; bench-wer's judge scripted."""

    def __init__(self, hosts: Hosts, judge: ScriptedEngine | None = None) -> None:
        self.http = hosts
        self.scripted_judge = judge or ScriptedEngine()

    def judge(self, asr_model, device, server=None):
        return self.scripted_judge


def chosen(*args: str, env: dict | None = None) -> Connection:
    engines = ScriptedEngines()
    result = omni("chat", "Hi", *args, engines=engines, env=env)
    assert result.exit_code == 0, result.stderr
    return engines.choices[0].connection


# Where the list comes from


@pytest.mark.parametrize("args", [["--server", A, "--server", f"{B}/v1"], ["--server", f"{A},{B}/"],
                                  ["--server", f" {A} , {B} ,"], ["--server", A, "--server", f"{B},{A}"]])
def test_server_repeats_or_takes_a_comma_list_each_once_in_order(args):
    connection = chosen(*args)
    assert (connection.server, connection.servers) == (A, (A, B))


def test_omni_server_and_the_config_file_take_lists_too(tmp_path):
    assert chosen(env={"OMNI_SERVER": f"{B},{A}"}).servers == (B, A)
    config = tmp_path / "config.toml"
    config.write_text(f'server = ["{A}", "{B}"]\n')
    assert chosen(env={"OMNI_CONFIG": str(config)}).servers == (A, B)


def test_one_server_is_a_list_of_one():
    assert chosen("--server", A) == Connection(A, None)
    assert Connection(A, None).servers == (A,) and Connection(None, None).servers == ()


@pytest.mark.parametrize("value, line", [
    (",", "omni: error: --server: no server URL in ','"),
    (f"{A},b.test:8091", "omni: error: --server: server URL must start with http:// or https://, got 'b.test:8091'"),
])
def test_a_bad_list_is_one_line(value, line):
    engines = ScriptedEngines()
    result = omni("chat", "Hi", "--server", value, engines=engines)
    assert (result.exit_code, result.stderr.splitlines()) == (2, [line])
    assert engines.choices == []


# Commands spreading their requests


def test_speak_spreads_the_pieces_of_a_long_text(tmp_path):
    hosts = Hosts(a=ScriptedEngine(speech=[tone(0.25)]), b=ScriptedEngine(speech=[tone(0.25)]))
    text = tmp_path / "long.txt"
    text.write_text("One sentence here. Another one there. A third one now. And the fourth.")
    out = tmp_path / "out.wav"
    result = omni("speak", "-f", text, "--max-chars", "20", "-o", out, "--server", f"{A},{B}", engines=HostEngines(hosts))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"wrote {out} (1.0 s, wav, 24000 Hz)\n"
    served = collections.Counter(hosts.served("/v1/audio/speech"))
    # Three pieces are in flight at a time; which server frees up first for the fourth is a race.
    assert sum(served.values()) == 4 and served["a"] >= 1 and served["b"] >= 1


def test_transcribe_hears_a_file_per_server_at_once_and_writes_them_in_order(tmp_path):
    hosts = Hosts(a=ScriptedEngine(transcripts=["heard by a"]), b=ScriptedEngine(transcripts=["heard by b"]))
    files = []
    for name in ("one", "two", "three"):
        files.append(tmp_path / f"{name}.wav")
        files[-1].write_bytes(encode(tone(0.5).samples, 24000, AudioFormat.WAV))
    result = omni("transcribe", *files, "--server", A, "--server", B, engines=HostEngines(hosts))
    assert result.exit_code == 0, result.stderr
    served = hosts.served("/v1/audio/transcriptions")
    # One file per server at a time: the third goes to whichever finishes first (a race).
    assert served[:2] == ["a", "b"] and served[2] in ("a", "b")
    assert result.stdout.splitlines() == [f"{files[0]}: heard by a", f"{files[1]}: heard by b", f"{files[2]}: heard by {served[2]}"]


def test_chat_turns_take_turns_and_a_dead_server_is_one_warning():
    hosts = Hosts(a=ScriptedEngine(chat=answer("From a.")), b=ScriptedEngine(chat=answer("From b.")),
                  c=ScriptedEngine(chat=answer("From c.")))
    hosts.down.add("b")
    result = omni("chat", "-i", "--server", f"{A},{B},{url('c')}", input="Hi\nAgain\nOnce more\n",
                  engines=HostEngines(hosts))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["From", "a.", "From", "c.", "From", "a."]
    assert result.stderr == skipped("b", REFUSED.format(B)) + "\n"


def test_a_spoken_answer_asks_the_first_server_up_what_it_can_do(tmp_path):
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine(chat=answer("Hello.", audio_seconds=0.5)))
    hosts.down.add("a")
    out = tmp_path / "answer.wav"
    result = omni("chat", "Hi", "-o", out, "--server", f"{A},{B}", engines=HostEngines(hosts))
    assert result.exit_code == 0, result.stderr
    assert (result.stdout, result.stderr) == ("Hello.\n", skipped("a", REFUSED.format(A)) + f"\n(wrote {out})\n")
    assert [path for host, path in hosts.log if host == "b"] == ["/health", "/openapi.json", "/v1/models",
                                                                  "/v1/chat/completions"]
    assert out.stat().st_size > 20000  # half a second of 24 kHz PCM16


def test_every_server_down_is_one_error_line_and_exit_1(tmp_path):
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine())
    hosts.down |= {"a", "b"}
    result = omni("speak", "Hello", "-o", tmp_path / "x.wav", "--server", f"{A},{B}", engines=HostEngines(hosts))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"omni: error: none of the 2 servers answers: {A} ({REFUSED.format(A)}); {B} ({REFUSED.format(B)})\n"
    assert list(tmp_path.iterdir()) == []


# talk: a realtime session stays on one server


def test_talk_opens_its_session_on_the_first_server_that_answers(capsys):
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine(), c=ScriptedEngine())
    hosts.down.add("a")
    connection = resolve_connection([A, B, url("c")], None)
    transport = HostEngines(hosts).transport(EngineChoice(connection), None)
    assert isinstance(transport, FirstServerTransport)

    async def choose():
        try:
            return await transport.choose()
        finally:
            await transport.close()

    assert asyncio.run(choose()) == B
    assert capsys.readouterr().err.splitlines() == [
        f"omni: warning: skipping {A}: {REFUSED.format(A)}",
        f"omni: talk uses {B}, the first of 3 servers that answers (a realtime session stays on the server it starts on)"]
    assert hosts.served("/health") == ["b"]  # c is never asked


def test_talk_with_no_server_up_is_one_error():
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine())
    hosts.down |= {"a", "b"}
    transport = HostEngines(hosts).transport(EngineChoice(resolve_connection(f"{A},{B}", None)), None)
    with pytest.raises(ServerError, match=f"^none of the 2 servers answers: {A} "):
        asyncio.run(transport.choose())


# bench-wer: per-server figures


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("The cat sat.\nA dog ran far.\nBirds sing.\nFish swim.\n")
    return path


def test_bench_wer_spreads_over_the_servers_and_reports_each(tmp_path, dataset):
    hosts = Hosts(a=ScriptedEngine(speech=[tone(0.5)]), b=ScriptedEngine(speech=[tone(0.5)]))
    judge = ScriptedEngine(transcripts=["the cat sat", "a dog ran far", "birds sing", "fish swim"])
    out, report = tmp_path / "run", tmp_path / "report.html"
    result = omni("bench-wer", "-d", dataset, "--server", f"{A},{B}", "--out", out, "--json", "--report", report,
                  engines=HostEngines(hosts, judge))
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["scored"], summary["wer_mean"], summary["target"]) == (4, 0.0, f"{A},{B}")
    assert hosts.served("/v1/audio/speech") == ["a", "b"] + ["a", "b", "a", "b"]  # one warm-up each, uncounted
    assert {u: (f["requests"], f["failures"], f["skipped"]) for u, f in summary["servers"].items()} == {
        A: (2, 0, False), B: (2, 0, False)}
    assert all(f["ttfa_p50"] > 0 and f["rtf_mean"] > 0 for f in summary["servers"].values())
    assert json.loads((out / "summary.json").read_text()) == summary
    page = report.read_text()
    assert "<h2>Servers</h2>" in page and f"<th>{A}</th><td class='num'>2</td><td class='num'>0</td>" in page


def test_bench_wer_prints_the_per_server_table(dataset):
    hosts = Hosts(a=ScriptedEngine(speech=[tone(0.5)]), b=ScriptedEngine(speech=[tone(0.5)]))
    hosts.down.add("b")
    result = omni("bench-wer", "-d", dataset, "--server", f"{A},{B}", engines=HostEngines(hosts))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == skipped("b", REFUSED.format(B)) + "\n"
    lines = result.stdout[result.stdout.index("servers:"):].splitlines()
    assert lines[0] == "servers:"
    assert re.fullmatch(rf"  {A}  4 requests, 0 failed, first audio p50 0\.\d\d\d s, RTF 0\.\d\d\d", lines[1])
    assert lines[2:] == [f"  {B}  0 requests, 0 failed, first audio p50 – s, RTF –, skipped"]
