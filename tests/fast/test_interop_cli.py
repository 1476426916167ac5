"""`omni speak` and `omni chat` through the real Typer app against servers nobody here wrote
(issue 9): the real `RemoteEngine`, its far side an `httpx.MockTransport` answering the way
llama-cpp-python's server and others were seen to; plus what every written file must be."""

import asyncio
import io
import json
import os
import stat

import httpx
import numpy as np
import pytest
import soundfile as sf

from omnicli.audio.atomic import atomic_write
from omnicli.cli.engines import EngineChoice, Engines
from omnicli.client.long_text import speak_ahead, split_text
from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import Engine, SpeechRequest
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.scripted import ScriptedEngine, answer, tone

URL = "http://llm.test"


class ServerEngines(Engines):
    """The real remote engine for every command, its server a MockTransport handler."""

    def __init__(self, handler) -> None:
        self.handler = handler

    def engine(self, choice: EngineChoice) -> RemoteEngine:
        return RemoteEngine(choice.connection.server, choice.connection.api_key, stream=choice.speech_stream,
                            chat_stream=choice.chat_stream, transport=httpx.MockTransport(self.handler))


def level_wav(level: float, samples: int) -> bytes:
    """A 24 kHz WAV holding one constant level, so a piece is recognisable in the output."""
    buffer = io.BytesIO()
    sf.write(buffer, np.full(samples, level, np.float32), 24000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def runs(samples: np.ndarray) -> list[tuple[int, int]]:
    """(level in hundredths, run length) for each run of equal levels, in order."""
    levels = np.round(samples * 100).astype(int)
    edges = np.flatnonzero(np.diff(levels)) + 1
    return [(int(run[0]), len(run)) for run in np.split(levels, edges)]


# speak -f with long text: pieces under --max-chars, requested ahead, written in order


def long_text(characters: int) -> str:
    paragraphs, n = [], 0
    while sum(map(len, paragraphs)) < characters:
        paragraphs.append(" ".join(f"This is sentence number {n + k}, which says very little." for k in range(7)))
        n += 7
    return "\n\n".join(paragraphs)


def test_split_text_keeps_every_word_in_order_under_the_limit():
    text = long_text(10_900)
    assert len(text) >= 10_900
    for limit in (4096, 1000, 300, 40):
        pieces = split_text(text, limit)
        assert all(len(p) <= limit for p in pieces)
        assert " ".join(pieces).split() == text.split()
    assert len(split_text(text, 4096)) == 3
    assert split_text(text, 4096)[0].endswith("which says very little.")  # cut where a sentence ends


def test_split_text_prefers_paragraphs_then_sentences_then_words():
    assert split_text("One. Two.\n\nThree.", 100) == ["One. Two.\n\nThree."]
    assert split_text("One. Two.\n\nThree.", 10) == ["One. Two.", "Three."]
    assert split_text("First one. Second one.", 12) == ["First one.", "Second one."]
    assert split_text("a long run on sentence", 10) == ["a long run", "on", "sentence"]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


class SpeechServer:
    """/v1/audio/speech answering each piece with its own level and length. Piece 0 is answered
    only once piece 2 was asked: omni must request pieces ahead, and still write them in order."""

    def __init__(self, pieces: list[str], max_chars: int | None = None) -> None:
        self.pieces = pieces
        self.max_chars = max_chars
        self.events: list[tuple[str, int]] = []
        self.third_asked: asyncio.Event | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        text = json.loads(request.content)["input"]
        if self.max_chars and len(text) > self.max_chars:
            return httpx.Response(400, json={"error": {"message": f"input is longer than {self.max_chars} characters"}})
        index = self.pieces.index(text)
        self.events.append(("asked", index))
        self.third_asked = self.third_asked or asyncio.Event()
        if index == 2:
            self.third_asked.set()
        if index == 0 and len(self.pieces) > 2:
            await asyncio.wait_for(self.third_asked.wait(), timeout=30)
        self.events.append(("answered", index))
        return httpx.Response(200, content=level_wav((index + 1) / 100, 2400 + 10 * index),
                              headers={"content-type": "audio/wav"})


def test_speak_long_text_goes_in_pieces_requested_ahead_and_written_in_order(tmp_path):
    text = long_text(10_900)
    source = tmp_path / "chapter.txt"
    source.write_text(text)
    pieces = split_text(text, 1000)
    server = SpeechServer(pieces, max_chars=1000)
    out = tmp_path / "chapter.wav"
    result = omni("speak", "-f", source, "-o", out, "--server", URL, "--max-chars", 1000, engines=ServerEngines(server))
    assert result.exit_code == 0, result.stderr
    samples, _ = sf.read(out, dtype="float32")
    assert runs(samples) == [(i + 1, 2400 + 10 * i) for i in range(len(pieces))]
    asked = [i for event, i in server.events if event == "asked"]
    assert sorted(asked) == list(range(len(pieces))) and len(pieces) >= 10
    order = server.events.index
    assert order(("asked", 2)) < order(("answered", 0))  # requested ahead
    for i in range(3, len(pieces)):  # never more than three in flight
        assert order(("answered", i - 3)) < order(("asked", i))


def test_speak_splits_at_4096_by_default_and_a_server_limit_above_it_is_never_met(tmp_path):
    text = long_text(10_900)
    server = SpeechServer(split_text(text, 4096), max_chars=4096)
    out = tmp_path / "chapter.wav"
    result = omni("speak", "-o", out, "--server", URL, input=text, engines=ServerEngines(server))
    assert result.exit_code == 0, result.stderr
    assert len(runs(sf.read(out, dtype="float32")[0])) == 3


def test_a_piece_the_server_refuses_fails_the_whole_and_writes_nothing(tmp_path):
    text = long_text(10_900)
    server = SpeechServer(split_text(text, 5000), max_chars=4096)
    out = tmp_path / "chapter.wav"
    result = omni("speak", "-o", out, "--server", URL, "--max-chars", 5000, input=text, engines=ServerEngines(server))
    assert (result.exit_code, result.stderr) == (1, "omni: error: server answered 400: input is longer than 4096 characters\n")
    assert list(tmp_path.iterdir()) == []


def test_in_process_the_text_goes_whole_to_the_engine(tmp_path):
    engines = ScriptedEngines()
    text = long_text(10_900)
    result = omni("speak", "-o", tmp_path / "a.wav", "--max-chars", 1000, input=text, engines=engines)
    assert result.exit_code == 0
    assert [r.text for r in engines.scripted.requests] == [text.strip()]


class CountingEngine(Engine):
    """Speaks each request as one chunk; counts how many are being made at once."""

    def __init__(self) -> None:
        self.active = self.most = 0

    async def speech(self, req: SpeechRequest):
        self.active += 1
        self.most = max(self.most, self.active)
        await asyncio.sleep(0)  # let the other pieces start: ahead-of-time requests overlap here
        yield tone(0.01, req.text)
        self.active -= 1


def test_speak_ahead_bounds_what_is_in_flight_and_reports_each_piece_after_its_audio():
    engine = CountingEngine()
    requests = [SpeechRequest(f"piece {i}.") for i in range(7)]
    events: list[str] = []

    async def speak():
        async for chunk in speak_ahead(engine, requests, ahead=3, finished=lambda r: events.append("done " + r.text)):
            events.append("chunk " + chunk.text)

    asyncio.run(speak())
    assert events == [f"{kind} piece {i}." for i in range(7) for kind in ("chunk", "done")]
    assert engine.most == 3


def test_speak_ahead_stops_the_rest_at_the_first_failure():
    engine = ScriptedEngine(speech=lambda req: [RuntimeError("boom")] if req.text == "b" else [tone(0.01, req.text)])
    requests = [SpeechRequest(t) for t in "abcde"]

    async def speak():
        return [chunk.text async for chunk in speak_ahead(engine, requests)]

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(speak())
    asked = [r.text for r in engine.requests]
    assert asked[:3] == ["a", "b", "c"] and "e" not in asked  # no more than three ahead, none after


# speak --stream answered whole; a voice list that is an HTML page


def test_speak_stream_takes_a_whole_wav_the_server_chose_not_to_stream(tmp_path):
    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=level_wav(0.25, 4800), headers={"content-type": "audio/wav"})

    out = tmp_path / "hi.wav"
    result = omni("speak", "Hello.", "--stream", "-o", out, "--server", URL, engines=ServerEngines(server))
    assert result.exit_code == 0, result.stderr
    assert runs(sf.read(out, dtype="float32")[0]) == [(25, 4800)]


def test_list_voices_from_an_html_page_is_one_line_and_exit_1():
    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<!doctype html><title>app</title>", headers={"content-type": "text/html"})

    result = omni("speak", "--list-voices", "--server", URL, engines=ServerEngines(server))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "omni: error: the server's voice list is not JSON (got text/html)\n"


# --format against the output's suffix


@pytest.mark.parametrize("command", [["speak", "Hello."], ["chat", "Hi"]])
def test_a_format_that_contradicts_the_suffix_is_a_usage_error(tmp_path, command):
    engines = ScriptedEngines(ScriptedEngine(chat=answer("Hi.", audio_seconds=0.5)))
    out = tmp_path / "x.wav"
    result = omni(*command, "--format", "mp3", "-o", out, engines=engines)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"omni: error: --format mp3 contradicts the output {out} (a wav file); drop --format or change the suffix\n"
    assert list(tmp_path.iterdir()) == [] and engines.scripted.requests == []


@pytest.mark.parametrize("fmt, name", [("opus", "x.ogg"), ("pcm16", "x.raw"), ("WAV", "x.wav"), ("flac", "x.audio")])
def test_a_format_that_agrees_or_a_suffix_that_names_none_is_fine(tmp_path, fmt, name):
    result = omni("speak", "Hello.", "--format", fmt, "-o", tmp_path / name, engines=ScriptedEngines())
    assert result.exit_code == 0, result.stderr


# Files honour the umask


@pytest.fixture
def umask():
    previous = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_get_the_umasks_mode(tmp_path, umask, mask, mode):
    umask(mask)
    audio, history = tmp_path / "out.wav", tmp_path / "chat.json"
    assert omni("speak", "Hello.", "-o", audio, engines=ScriptedEngines()).exit_code == 0
    assert omni("chat", "-i", input=f"Hi\n/save {history}\n", engines=ScriptedEngines()).exit_code == 0
    atomic_write(tmp_path / "plain.bin", b"data")
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()} == {
        "out.wav": mode, "chat.json": mode, "plain.bin": mode}


def test_atomic_write_replaces_a_file_and_leaves_no_temporary_one(tmp_path, umask):
    target = tmp_path / "a.txt"
    target.write_text("old")
    atomic_write(target, b"new")
    assert (target.read_bytes(), [p.name for p in tmp_path.iterdir()]) == (b"new", ["a.txt"])


# chat against servers: failed streams, REPL exit codes, timings, no audio

OVERFLOW = "This model's maximum context length is 2048 tokens. However, you requested 6055 tokens."


def llama_like(request: httpx.Request) -> httpx.Response:
    """A failing streamed request is an empty 200 stream; unstreamed it is the 400; "hello" works."""
    if request.url.path == "/v1/models":
        return httpx.Response(200, json={"data": [{"id": "smollm2"}]})
    body = json.loads(request.content)
    question = body["messages"][-1]["content"]
    if "hello" not in question:
        if body["stream"]:
            return httpx.Response(200, content=b"", headers={"content-type": "text/event-stream"})
        return httpx.Response(400, json={"error": {"message": OVERFLOW, "code": "context_length_exceeded"}})
    if body["stream"]:
        chunks = [{"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]} for t in ("Hi", " there.")]
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, content=data.encode(), headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json={"choices": [{"index": 0, "message": {"content": "Hi there."}, "finish_reason": "stop"}]})


def test_a_failed_streamed_turn_shows_the_servers_error_and_the_next_turn_is_answered():
    result = omni("chat", "-i", "--server", URL, input="long words\nhello\n", engines=ServerEngines(llama_like))
    assert (result.exit_code, result.stdout) == (1, "Hi there.\n")
    assert result.stderr == f"omni: error: server answered 400: {OVERFLOW}\nomni: error: 1 of 2 turns failed\n"


def test_a_piped_repl_whose_every_turn_failed_exits_1():
    result = omni("chat", "-i", "--server", URL, input="long\nlonger\n", engines=ServerEngines(llama_like))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (f"omni: error: server answered 400: {OVERFLOW}\n" * 2) + "omni: error: 2 of 2 turns failed\n"


def test_chat_json_against_a_server_has_client_side_timings():
    result = omni("chat", "hello", "--json", "--server", URL, engines=ServerEngines(llama_like))
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["text"] == "Hi there."
    timings = report["timings"]
    assert set(timings) == {"first_text_seconds", "first_audio_seconds", "total_seconds"}
    assert 0 <= timings["first_text_seconds"] <= timings["total_seconds"] and timings["first_audio_seconds"] is None


def test_chat_json_with_audio_measures_the_first_audio(tmp_path):
    engine = ScriptedEngine(chat=answer("Hi.", audio_seconds=0.5))
    result = omni("chat", "Hi", "--json", "-o", tmp_path / "a.wav", engines=ScriptedEngines(engine))
    timings = json.loads(result.stdout)["timings"]
    assert 0 <= timings["first_text_seconds"] <= timings["first_audio_seconds"] <= timings["total_seconds"]


def test_chat_json_to_a_file_from_a_text_only_server_prints_the_text_and_says_no_audio(tmp_path):
    out = tmp_path / "a.wav"
    result = omni("chat", "hello", "--json", "-o", out, "--server", URL, engines=ServerEngines(llama_like))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["text"], report["audio"]) == ("Hi there.", None)
    assert result.stderr == f"omni: error: no audio came back (the answer is text only); nothing written to {out}\n"
    assert list(tmp_path.iterdir()) == []
