"""`omni transcribe` through the real Typer app: in process over a scripted engine, and with
--server over omni serve's own app and a faster-whisper-server stand-in (json/verbose_json
only, no words, no /v1/models): every format, many files, stdin, and bad input."""

import json

import httpx
import pytest

from omnicli.audio.formats import AudioFormat, encode
from omnicli.engine.base import Transcript
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine
from tests.helpers.stage_fakes import StageEngines, clip, whisper_server

SRT = "1\n00:00:00,000 --> 00:00:00,500\nhello world\n"


@pytest.fixture
def wav(tmp_path):
    def make(name: str = "a.wav", seconds: float = 0.5):
        path = tmp_path / name
        path.write_bytes(encode(clip(seconds), 24000, AudioFormat.WAV))
        return path

    return make


def scripted(*texts: str) -> ScriptedEngines:
    return ScriptedEngines(ScriptedEngine(transcripts=list(texts or ["hello world"])))


def test_text_by_default_and_the_choice_carries_the_models(wav):
    engines = scripted()
    result = omni("transcribe", wav(), "--asr-model", "base", "-l", "en", engines=engines)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "hello world\n", "")
    assert engines.scripted.requests == [("transcribe", 0.5, 24000, "en", False)]
    assert (engines.choices[0].asr_model, engines.choices[0].connection.server) == ("base", None)
    assert engines.scripted.closed == 1


@pytest.mark.parametrize("fmt, expected", [
    ("json", '{"text": "hello world"}\n'),
    ("verbose_json", json.dumps({"task": "transcribe", "language": "en", "duration": 0.5, "text": "hello world",
                                 "segments": [{"id": 0, "start": 0.0, "end": 0.5, "text": "hello world"}]}) + "\n"),
    ("srt", SRT),
    ("vtt", "WEBVTT\n\n00:00:00.000 --> 00:00:00.500\nhello world\n"),
])
def test_every_format(wav, fmt, expected):
    result = omni("transcribe", wav(), "-f", fmt, engines=scripted())
    assert (result.exit_code, result.stdout) == (0, expected)


def test_words_when_asked(wav):
    engines = scripted()
    result = omni("transcribe", wav(), "-f", "json", "--words", engines=engines)
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["words"] == [{"word": "hello", "start": 0.0, "end": 0.5}, {"word": "world", "start": 0.0, "end": 0.5}]
    assert engines.scripted.requests == [("transcribe", 0.5, 24000, None, False, "words")]


def test_many_files_are_labelled_on_stdout_and_stdin_is_one_of_them(wav):
    engines = scripted("one", "two")
    data = wav("b.wav", 0.25).read_bytes()
    result = omni("transcribe", wav(), "-", engines=engines, input=data)
    assert (result.exit_code, result.stdout) == (0, f"{wav()}: one\n-: two\n")
    assert [r[1] for r in engines.scripted.requests] == [0.5, 0.25]


def test_output_dir_gets_one_file_per_input(tmp_path, wav):
    out = tmp_path / "subs"
    result = omni("transcribe", wav("a.wav"), wav("b.wav"), "-f", "srt", "--output-dir", out, engines=scripted("one", "two"))
    assert result.exit_code == 0
    assert result.stdout == "" and result.stderr == f"wrote {out / 'a.srt'}\nwrote {out / 'b.srt'}\n"
    assert (out / "a.srt").read_text() == "1\n00:00:00,000 --> 00:00:00,500\none\n"
    assert (out / "b.srt").read_text() == "1\n00:00:00,000 --> 00:00:00,500\ntwo\n"


@pytest.mark.parametrize("args, message", [
    (["-f", "docx"], "--format must be one of text, json, verbose_json, srt, vtt, got 'docx'"),
    (["-f", "srt", "--words"], "--words goes with --format json or verbose_json"),
    (["-", "-"], "stdin ('-') can be read once"),
    (["{wav}", "{wav}", "-o", "x.txt"], "--output takes one input file; use --output-dir for several"),
    (["{wav}", "{other}", "-f", "srt"], "srt subtitles for several files need --output-dir"),
])
def test_usage_errors_are_one_line(tmp_path, wav, args, message):
    path, other = wav(), wav("b.wav")
    args = [a.format(wav=path, other=other) for a in args]
    engines = scripted()
    result = omni("transcribe", *(args if args[0].startswith(str(tmp_path)) or args[0] == "-" else [path, *args]),
                  engines=engines, input=b"")
    assert result.exit_code == 2
    assert result.stderr == f"omni: error: {message}\n"
    assert engines.scripted.requests == []


def test_an_unreadable_file_among_many_stops_everything_before_work(tmp_path, wav):
    bad = tmp_path / "notes.txt"
    bad.write_text("not audio")
    out = tmp_path / "out"
    engines = scripted()
    result = omni("transcribe", wav(), bad, "--output-dir", out, engines=engines)
    assert result.exit_code == 2 and result.stderr == f"omni: error: {bad} is not a readable audio file\n"
    assert engines.scripted.requests == [] and not out.exists()


def test_server_that_only_gives_segments_gets_subtitles_built_here_and_words_said_missing(wav):
    server = whisper_server("hello world")
    result = omni("transcribe", wav(), "--server", "http://fws.test", "-m", "whisper-1", "-f", "srt", engines=StageEngines(server))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "1\n00:00:00,000 --> 00:00:01,000\nhello world\n\n2\n00:00:01,200 --> 00:00:02,000\nagain\n"
    words = omni("transcribe", wav(), wav("b.wav"), "--server", "http://fws.test", "-m", "whisper-1", "-f", "json", "--words",
                 engines=StageEngines(server))
    assert words.exit_code == 0
    assert words.stderr == "omni: the recogniser gave no word timestamps; writing segments only\n"
    assert [json.loads(line)["file"] for line in words.stdout.splitlines()] == [str(wav()), str(wav("b.wav"))]


def test_server_that_lists_no_model_is_still_asked(wav):
    server = whisper_server("hello world")
    result = omni("transcribe", wav(), "--server", "http://fws.test", engines=StageEngines(server))
    assert (result.exit_code, result.stdout) == (0, "hello world\n"), result.stderr


def test_text_only_json_answer_becomes_one_cue():
    from omnicli.cli.transcribe import render

    assert render(Transcript("hello world", "en", 0.5), "srt") == SRT


def test_against_omni_serve_words_come_through(wav):
    from omnicli.server.app import create_app

    served = ScriptedEngine(transcripts=["hello world"])
    engines = StageEngines(whisper_server())
    engines.http = httpx.ASGITransport(app=create_app(served, preload=False, turn_models=TURN_MODELS))
    result = omni("transcribe", wav(), "--server", "http://omni.test", "-m", "omni-embedded", "-f", "verbose_json", "--words",
                  engines=engines)
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert [w["word"] for w in body["words"]] == ["hello", "world"] and body["segments"][0]["text"] == "hello world"
    assert served.requests == [("transcribe", 0.5, 24000, None, False, "words")]
