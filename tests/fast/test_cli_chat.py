"""`omni chat` through the real Typer app over a scripted engine: the exact requests a turn
sends, what reaches stdout and stderr, the REPL's commands and Ctrl-C, and bad input."""

import json
import re
import signal

import pytest
import soundfile as sf

from omnicli.cli.chat import DEFAULT_SYSTEM
from omnicli.engine.base import DEFAULT_MAX_TOKENS, AudioPart, ChatRequest, Message, TextDelta, TextPart
from omnicli.errors import ServerError
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.scripted import ScriptedEngine, answer

SYSTEM = Message("system", [TextPart(DEFAULT_SYSTEM)])


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def assistant(text: str) -> Message:
    return Message("assistant", [TextPart(text)])


def test_one_shot_prints_the_answer_and_sends_one_request():
    engines = ScriptedEngines()
    result = omni("chat", "What", "is", "up?", engines=engines)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Hello there.\n", "")
    assert engines.scripted.requests == [ChatRequest(
        [SYSTEM, user("What is up?")], modalities=("text",), max_tokens=DEFAULT_MAX_TOKENS, temperature=0.7)]
    assert engines.scripted.closed == 1


def test_piped_stdin_goes_before_the_prompt():
    engines = ScriptedEngines()
    result = omni("chat", "Repeat the word above.", input="banana\n", engines=engines)
    assert result.exit_code == 0
    (request,) = engines.scripted.requests
    assert request.messages == [SYSTEM, user("banana\nRepeat the word above.")]


def test_options_shape_the_request(tmp_path):
    engines = ScriptedEngines()
    result = omni("chat", "Hi", "-s", "Be terse.", "--max-tokens", "9", "--temperature", "0", "--model", "m",
                  "--voice", "amy", engines=engines)
    assert result.exit_code == 0
    assert engines.scripted.requests == [ChatRequest(
        [Message("system", [TextPart("Be terse.")]), user("Hi")], modalities=("text",), voice="amy", model="m",
        max_tokens=9, temperature=0.0)]


def test_attachment_goes_before_the_text(tmp_path):
    clip = tmp_path / "clip.ogg"
    sf.write(clip, [0.0] * 4800, 48000, format="OGG", subtype="OPUS")
    engines = ScriptedEngines()
    assert omni("chat", "What is this?", "-a", clip, engines=engines).exit_code == 0
    (request,) = engines.scripted.requests
    assert request.messages[-1] == Message("user", [AudioPart(clip.read_bytes(), "opus"), TextPart("What is this?")])


def test_json_prints_one_object_and_no_streamed_text():
    result = omni("chat", "Hi", "--json", engines=ScriptedEngines())
    assert (result.exit_code, result.stderr) == (0, "")
    report = json.loads(result.stdout)
    timings = report.pop("timings")
    assert report == {
        "text": "Hello there.", "transcripts": [], "audio": None, "finish_reason": "stop",
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}}
    assert set(timings) == {"first_text_seconds", "first_audio_seconds", "total_seconds"}
    assert 0 <= timings["first_text_seconds"] <= timings["total_seconds"] and timings["first_audio_seconds"] is None
    assert result.stdout.count("\n") == 1


def test_spoken_answer_is_written_whole(tmp_path):
    engine = ScriptedEngine(chat=answer("Hi.", audio_seconds=0.5))
    path = tmp_path / "answer.wav"
    result = omni("chat", "Hi", "-o", path, engines=ScriptedEngines(engine))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Hi.\n", f"(wrote {path})\n")
    samples, rate = sf.read(path)
    assert (rate, len(samples)) == (24000, 12000)
    assert engine.requests[0].modalities == ("text", "audio")


def test_engine_failure_is_one_line_and_exit_1(tmp_path):
    engine = ScriptedEngine(chat=[TextDelta("Par"), ServerError("server answered 503: overloaded")])
    path = tmp_path / "answer.wav"
    result = omni("chat", "Hi", "-o", path, engines=ScriptedEngines(engine))
    assert (result.exit_code, result.stderr) == (1, "omni: error: server answered 503: overloaded\n")
    assert list(tmp_path.iterdir()) == []


def test_repl_keeps_history_resets_and_exits():
    engine = ScriptedEngine(chat=lambda req: answer(f"answer {len(req.messages)}"))
    engines = ScriptedEngines(engine)
    result = omni("chat", "-i", input="first\nsecond\n/reset\nthird\nexit\nnever sent\n", engines=engines)
    assert result.exit_code == 0
    assert result.stdout == "answer 2\nanswer 4\nanswer 2\n"
    assert result.stderr == "(history cleared)\n"
    assert [r.messages for r in engine.requests] == [
        [SYSTEM, user("first")],
        [SYSTEM, user("first"), assistant("answer 2"), user("second")],
        [SYSTEM, user("third")],
    ]
    assert engine.closed == 1


def test_repl_saves_the_history(tmp_path):
    path = tmp_path / "chat.json"
    result = omni("chat", "-i", input=f"Hi\n/save {path}\n", engines=ScriptedEngines())
    assert result.exit_code == 0
    assert result.stderr == f"(saved 3 messages to {path})\n"
    assert json.loads(path.read_text()) == {"messages": [
        {"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello there."}]}


def test_repl_save_to_an_unwritable_place_is_one_line_and_goes_on(tmp_path):
    (tmp_path / "a_file").write_text("")
    engine = ScriptedEngine()
    result = omni("chat", "-i", input=f"/save {tmp_path / 'a_file' / 'x.json'}\nHi\n", engines=ScriptedEngines(engine))
    assert result.exit_code == 0
    assert result.stderr == f"omni: error: cannot write {tmp_path / 'a_file' / 'x.json'}: Not a directory\n"
    assert result.stdout == "Hello there.\n" and len(engine.requests) == 1


def test_repl_save_without_a_path_names_the_file_by_date(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = omni("chat", "-i", input="Hi\n/save\n", engines=ScriptedEngines())
    saved = list(tmp_path.glob("omni-chat-*.json"))
    assert result.exit_code == 0 and len(saved) == 1
    assert re.fullmatch(r"omni-chat-\d{8}-\d{6}\.json", saved[0].name)
    assert result.stderr == f"(saved 3 messages to {saved[0].name})\n"
    assert [m["content"] for m in json.loads(saved[0].read_text())["messages"]][1:] == ["Hi", "Hello there."]


def test_repl_commands_never_reach_the_model():
    engine = ScriptedEngine()
    result = omni("chat", "-i", input="/help\n/nonsense now\n//etc is a folder?\n/exit\nnever sent\n",
                  engines=ScriptedEngines(engine))
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert [line.split()[0] for line in lines[:5]] == ["/help", "/reset", "/save", "/exit", "//text"]
    assert lines[5] == ("omni: error: unknown command /nonsense (/help lists them; start a message with // "
                        "to send one that begins with /)")
    assert [r.messages[-1] for r in engine.requests] == [user("/etc is a folder?")]


def ctrl_c() -> None:
    signal.raise_signal(signal.SIGINT)


def test_ctrl_c_cancels_the_answer_and_the_repl_goes_on():
    scripts = iter([[TextDelta("Once upon"), ctrl_c, *answer(" a time")], answer("Fine.")])
    engine = ScriptedEngine(chat=lambda req: next(scripts))
    result = omni("chat", "-i", input="Tell a story\nHow are you?\n", engines=ScriptedEngines(engine))
    assert result.exit_code == 0
    assert result.stdout == "Once uponFine.\n"
    assert result.stderr == "\n(cancelled)\n"
    # The cancelled turn is not remembered: the next request holds only the new prompt.
    assert [r.messages for r in engine.requests] == [[SYSTEM, user("Tell a story")], [SYSTEM, user("How are you?")]]


def test_an_error_in_one_repl_turn_does_not_end_the_session_but_sets_the_exit_code():
    scripts = iter([[ServerError("server answered 500: boom")], answer("Fine.")])
    engine = ScriptedEngine(chat=lambda req: next(scripts))
    result = omni("chat", "-i", input="one\ntwo\n", engines=ScriptedEngines(engine))
    assert (result.exit_code, result.stdout) == (1, "Fine.\n")
    assert result.stderr == "omni: error: server answered 500: boom\nomni: error: 1 of 2 turns failed\n"


def test_binary_stdin_is_one_line_and_exit_2():
    engines = ScriptedEngines()
    result = omni("chat", "Summarise this", input=b"\x89PNG\r\n\x1a\n\xff", engines=engines)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "omni: error: stdin is not UTF-8 text (byte 0 is 0x89)\n"
    assert engines.scripted.requests == []


@pytest.mark.parametrize("where", ["missing/a.wav", "a_file/a.wav"])
def test_unwritable_output_fails_before_the_question(tmp_path, where):
    (tmp_path / "a_file").write_text("")
    path = tmp_path / where
    engines = ScriptedEngines()
    result = omni("chat", "Hi", "-o", path, engines=engines)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"omni: error: cannot write -o {path}: no such folder {path.parent}\n"
    assert engines.scripted.requests == []


@pytest.mark.parametrize("args, line", [
    (["--modalities", "audio"], "--modalities must be 'text' or 'text,audio', got 'audio'"),
    (["--json", "-o", "-"], "--json prints to stdout; write the audio to a file with -o PATH"),
    (["--format", "aac"], "unsupported audio format 'aac'; supported formats: wav, mp3, flac, opus, pcm"),
])
def test_bad_options_are_one_line(args, line):
    engines = ScriptedEngines()
    result = omni("chat", "Hi", *args, engines=engines)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"omni: error: {line}\n")
    assert engines.scripted.requests == []
