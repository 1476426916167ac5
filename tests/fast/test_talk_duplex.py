"""`omni talk --duplex` against the MiniCPM-o flavour of vLLM-Omni's duplex lane (minicpmo_shape, a
real websockets server on 127.0.0.1): the real CLI headless, and the real DuplexTalkClient with a
speaker whose playback the test controls, so `played_ms` can be checked against what was played."""

import asyncio
import base64
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import ServerError
from omnicli.session.duplex.registry import DuplexRegistry
from omnicli.talk.duplex.client import DuplexTalkClient
from omnicli.talk.duplex.link import Backoff, DuplexLink
from omnicli.talk.duplex.local import LocalDuplexSocket
from omnicli.talk.duplex.options import DuplexOptions
from omnicli.talk.duplex.presets import PRESETS
from omnicli.turns.scheduler import AnswerScheduler
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.minicpmo_shape import MiniCPMoShape, delta_level
from tests.helpers.models import TURN_MODELS
from tests.helpers.realtime_harness import silence
from tests.helpers.scripted import ScriptedEngine, answer
from tests.helpers.synthetic_speech import speech, speech_file
from tests.helpers.talk_harness import Device, Log, Recorder, Voice
from tests.helpers.vllm_realtime_shape import served

SAFETY_S = 30
"""Only so a broken test fails instead of hanging."""
DELTA = SPEECH_RATE * 200 // 1000
"""Samples in one of the shape's audio deltas (200 ms)."""


def talk_duplex(url: str, tmp_path: Path, *extra: str | Path, preset: str = "minicpmo"):
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    voice = ("--ref-audio", speech_file()) if preset == "minicpmo" else ()
    result = omni("talk", "--duplex", "--preset", preset, *voice, "--server", url, "--input-file", speech_file(),
                  "--output-file", said, "--transcript", log, *extra)
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, said, [(e["dir"], e["event"]) for e in events]


def of(events, direction: str, kind: str) -> list[dict]:
    return [e for d, e in events if d == direction and e["type"] == kind]


def levels(samples: np.ndarray) -> list[float]:
    """The level of each 200 ms delta played (the shape makes delta i a constant)."""
    return [round(float(np.median(samples[i:i + DELTA])), 2) for i in range(0, len(samples), DELTA)]


# ---- headless, through the CLI ----------------------------------------------------------------

def test_a_question_is_answered_headless(tmp_path):
    shape = MiniCPMoShape(answer="It is noon.", deltas=5)
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert "omni: It is noon. (" in result.stderr
    samples, rate = sf.read(str(said), dtype="float32")
    assert rate == SPEECH_RATE and len(samples) == 5 * DELTA
    assert levels(samples) == [delta_level(i) for i in range(5)]
    assert shape.queries[0]["duplex"] == "1" and shape.queries[0]["autostart"] == "0"
    update = of(events, "out", "session.update")[0]["session"]
    assert update["input_audio_format"] == "pcm16" and update["sample_rate_hz"] == 16000
    assert update["ref_audio"].startswith("data:audio/wav;base64,UklGR")  # the clip, as WAV
    assert update["extra_body"]["native_duplex"] is True
    assert (update["overlap_policy"], update["playback_commit_policy"]) == ("listen_only", "ack_only")
    appends = of(events, "out", "input_audio_buffer.append")
    assert {(a["format"], a["sample_rate_hz"]) for a in appends} == {("pcm16", 16000)}
    assert 180 <= np.median([a["duration_ms"] for a in appends]) <= 220  # ~200 ms appends, not 40 ms mic frames
    assert [c["response_create"] for c in of(events, "out", "input_audio_buffer.commit")] == [False]
    assert len(of(events, "in", "response.speak")) == 1
    assert of(events, "out", "playback.ack")[-1]["played_ms"] == 1000
    session = next(iter(shape.sessions.values()))
    assert session.history == [{"response_id": "resp_01", "played_ms": 1000}]
    last_out = [e["type"] for d, e in events if d == "out" and e["type"] != "session.event_ack"][-1]
    assert (last_out, events[-1][1]["type"]) == ("session.close", "session.closed")
    seqs = [e["server_event_seq"] for d, e in events if d == "in"]
    done = of(events, "in", "response.done")[0]["server_event_seq"]
    assert session.event_acks == seqs[:len(session.event_acks)] and done in session.event_acks  # each, in order


@pytest.mark.parametrize("vad", ["client", "server"])
def test_a_model_that_answers_only_when_asked_is_asked_at_each_turn_end(tmp_path, vad):
    """vLLM-Omni's turn-based tier refuses `auto_response`: the session is opened again without it
    and each commit asks for the answer; with --vad server omni's VAD ends the turns, said once."""
    shape = MiniCPMoShape(turn_based=True, needs_ref_audio=False, answer="It is noon.", deltas=5)
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path, "--vad", vad, preset="default")
    assert result.exit_code == 0, result.stderr
    assert "omni: It is noon. (" in result.stderr
    assert ("answers only when asked, so omni's VAD ends the turns" in result.stderr) == (vad == "server")
    assert len(sf.read(str(said))[0]) == 5 * DELTA
    updates = [e["session"]["extra_body"] for e in of(events, "out", "session.update")]
    assert updates[0]["auto_response"] is True and "auto_response" not in updates[1]
    assert of(events, "in", "error")[0]["error"]["code"] == "invalid_duplex_runtime_config"
    assert [c["response_create"] for c in of(events, "out", "input_audio_buffer.commit")] == [True]
    assert len(shape.received) == 2 and len(shape.sessions) == 1


def test_a_refusal_for_another_reason_is_not_retried(tmp_path):
    shape = MiniCPMoShape(turn_based=True)  # needs ref_audio, and the default preset sends none
    with served(shape.handler) as url:
        result, _, events = talk_duplex(url, tmp_path, preset="default")
    assert result.exit_code == 1
    assert "the server refused the duplex session: MiniCPM-o needs ref_audio" in result.stderr
    assert len(shape.received) == 1


def test_a_text_only_answer_is_an_answer_and_the_output_file_says_it_holds_no_audio(tmp_path):
    shape = MiniCPMoShape(needs_ref_audio=False, answer="It is noon.", text_only=True)
    with served(shape.handler) as url:
        result, said, _ = talk_duplex(url, tmp_path, preset="default")
    assert result.exit_code == 0, result.stderr
    assert f"the answers came as text only, so {said} holds no audio" in result.stderr
    assert len(sf.read(str(said))[0]) == 0


def test_a_socket_killed_mid_answer_is_resumed_with_no_event_lost_or_doubled(tmp_path):
    shape = MiniCPMoShape(deltas=6, drop_after_deltas=2, replay_extra=3, pace_s=0.05)
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert shape.drops == 1 and len(shape.received) == 2
    resume = shape.received[1][0]
    assert resume["type"] == "session.resume" and shape.queries[1]["autostart"] == "0"
    cursor = resume["last_received_server_event_seq"]
    assert shape.replayed[:3] == [cursor - 2, cursor - 1, cursor]  # the server sent these twice...
    seqs = [e["server_event_seq"] for d, e in events if d == "in" and "server_event_seq" in e]
    assert seqs == list(range(1, len(seqs) + 1))  # ...the conversation saw every event once
    samples, _ = sf.read(str(said), dtype="float32")
    assert levels(samples) == [delta_level(i) for i in range(6)]  # all of the answer, once, in order
    assert len(of(events, "in", "session.resumed")) == 1


def test_a_commit_lost_with_the_socket_is_sent_again_after_the_resume(tmp_path):
    """The socket dies with the commit in it: the resumed session's replay does not confirm it, so
    the client commits again and the question is answered, once."""
    shape = MiniCPMoShape(lose_first_commit=True, answer="It is noon.", deltas=5)
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert shape.drops == 1 and len(shape.received) == 2 and shape.received[1][0]["type"] == "session.resume"
    assert [e["type"] for e in shape.received[1] if e["type"].endswith("commit")] == ["input_audio_buffer.commit"]
    assert len(of(events, "out", "input_audio_buffer.commit")) == 2
    assert len(sf.read(str(said))[0]) == 5 * DELTA
    assert len(of(events, "in", "response.done")) == 1


def test_a_tool_call_is_shown_and_answered_as_not_run_and_the_spoken_answer_follows(tmp_path):
    """Nemotron VoiceChat calls tools; omni talk runs none, says so on screen, and tells the model
    in the call's output instead of leaving it waiting for a result."""
    shape = MiniCPMoShape(answer="I cannot look that up.", deltas=3, tool_call=("get_weather", '{"city":"Hong Kong"}'))
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert 'tool: get_weather({"city":"Hong Kong"}) (not run: omni talk runs no tools)' in result.stderr.splitlines()
    assert "omni: I cannot look that up. (" in result.stderr
    [output] = of(events, "out", "conversation.item.create")
    assert output["item"]["type"] == "function_call_output" and output["item"]["call_id"] == "call_7d1f"
    assert json.loads(output["item"]["output"]) == {"error": "omni talk runs no tools, so this call was not run"}
    assert len(sf.read(str(said))[0]) == 3 * DELTA


def test_a_malformed_tool_call_is_one_line_and_the_talk_goes_on(tmp_path):
    shape = MiniCPMoShape(answer="It is noon.", deltas=2, tool_call=(None, "{"))
    with served(shape.handler) as url:
        result, _, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert "omni: server error: the model made a malformed tool call (no name, arguments '{')" in result.stderr.splitlines()
    assert "omni: It is noon. (" in result.stderr and not of(events, "out", "conversation.item.create")


@pytest.mark.parametrize("greet", [True, False])
def test_a_server_whose_greeting_offers_duplex_is_talked_to_in_duplex(tmp_path, greet):
    """No --duplex: the greeting (`session.created` with duplex capabilities) chooses it. A server
    silent until the client speaks (vLLM-Omni's own duplex route) greets after the legacy opener."""
    shape = MiniCPMoShape(greet=greet, needs_ref_audio=False)
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    with served(shape.handler) as url:
        result = omni("talk", "--server", url, "--input-file", speech_file(), "--output-file", said, "--transcript", log)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == ("omni talk: the server offers full duplex (its session.created has duplex "
                                             "capabilities): talking duplex")
    assert "autostart" not in shape.queries[0] and shape.queries[1]["duplex"] == "1"
    opener = [] if greet else [{"type": "session.update", "model": None}]
    assert shape.received[0] == [*opener, {"type": "session.close"}]  # the greeted session, closed
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert "response.speak" in [e["type"] for e in events] and "response.create" not in [e["type"] for e in events]
    assert len(sf.read(str(said))[0]) == 5 * DELTA


def test_a_resume_the_server_refuses_ends_the_talk_in_one_line(tmp_path):
    shape = MiniCPMoShape(deltas=4, drop_after_deltas=1, forget_on_drop=True)
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 1
    session = of(events, "in", "session.created")[0]["session"]["id"]
    assert result.stderr.strip().splitlines()[-1] == (
        f"omni: error: the duplex session could not be resumed: Unknown or expired duplex session: {session} "
        "(session_resume_expired)")
    assert not said.exists()


def test_a_dropped_socket_on_a_server_that_does_not_resume_ends_the_talk_in_one_line(tmp_path):
    """supports_session_resume false (PersonaPlex): no session.resume is tried, the talk ends."""
    shape = MiniCPMoShape(deltas=4, drop_after_deltas=1, resumable=False)
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("omni: error: the duplex connection was lost (")
    assert result.stderr.strip().endswith("and the server does not resume sessions")
    assert len(shape.received) == 1 and not of(events, "out", "session.resume")

def test_resume_backoff_is_jittered_and_grows_to_its_ceiling():
    backoff = Backoff(attempts=5, low=0.25, high=4.0)
    for attempt, ceiling in enumerate([0.5, 1.0, 2.0, 4.0, 4.0, 4.0]):
        delays = {backoff.delay(attempt) for _ in range(50)}
        assert all(0.25 <= d <= ceiling for d in delays)
        assert len(delays) > 1  # jittered, the first attempt too


def png(path: Path) -> Path:
    """A real 2x2 grey PNG picture."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * 2 for _ in range(2))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return path


def test_a_picture_rides_the_append_that_closes_each_model_unit(tmp_path):
    """MiniCPM-o sees video: `--image` is a still camera, one frame per 1 s unit of audio sent."""
    picture = png(tmp_path / "desk.png")
    shape = MiniCPMoShape(answer="A grey square.", deltas=2)
    with served(shape.handler) as url:
        result, _, events = talk_duplex(url, tmp_path, "--image", picture)
    assert result.exit_code == 0, result.stderr
    appends = [e for e in shape.received[0] if e["type"] == "input_audio_buffer.append"]
    sent_ms = np.cumsum([a["duration_ms"] for a in appends])
    closing = [i for i, ms in enumerate(sent_ms) if ms // 1000 > (ms - appends[i]["duration_ms"]) // 1000]
    assert len(closing) >= 2 and [i for i, a in enumerate(appends) if "video_frames" in a] == closing
    assert all(appends[i]["video_frames"] == [base64.b64encode(picture.read_bytes()).decode()] for i in closing)
    logged = [a for a in of(events, "out", "input_audio_buffer.append") if "video_frames" in a]
    assert logged[0]["video_frames"] == [{"bytes": picture.stat().st_size}]  # the event log keeps sizes, not pictures


@pytest.mark.parametrize("name, content, line", [
    ("notes.txt", b"not a picture", "omni: error: --image {path} is not a JPEG or PNG picture"),
    ("missing.png", None, "omni: error: cannot read --image {path}: No such file or directory"),
    ("huge.png", b"\x89PNG\r\n\x1a\n" + bytes(8 * 1024 * 1024), "omni: error: --image {path} is over 8 MiB; send a smaller picture"),
], ids=["not-a-picture", "missing", "over-8-MiB"])
def test_an_unusable_picture_is_a_usage_error(tmp_path, name, content, line):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    result = omni("talk", "--image", path, "--server", "http://127.0.0.1:9", "--input-file", speech_file())
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [line.format(path=path)]


def test_a_picture_without_a_server_is_a_usage_error_since_the_embedded_engine_cannot_see(tmp_path):
    result = omni("talk", "--duplex", "--image", png(tmp_path / "desk.png"), "--input-file", speech_file())
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "omni: error: --image needs --server: the embedded engine cannot see pictures "
        "(a model that reads video can, e.g. MiniCPM-o 4.5 on vLLM-Omni)"]


def test_minicpmo_without_ref_audio_is_a_usage_error(tmp_path):
    result = omni("talk", "--duplex", "--preset", "minicpmo", "--server", "http://127.0.0.1:9",
                  "--input-file", speech_file(), "--output-file", tmp_path / "said.wav")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "omni: error: --preset minicpmo needs --ref-audio FILE (a clip of the voice the model speaks in)"]


@pytest.mark.parametrize("vad", ["client", "server"])
def test_duplex_without_a_server_is_answered_in_process(tmp_path, vad):
    """No --server: the duplex lane runs in this process on the (scripted) engine; same handshake,
    acks and events as over a socket, and the session says it cannot be resumed (no socket to lose)."""
    engines = ScriptedEngines(ScriptedEngine(chat=answer("It is noon.", audio_seconds=1.0)))
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--duplex", "--vad", vad, "--input-file", speech_file(), "--output-file", said,
                  "--transcript", log, engines=engines)
    assert result.exit_code == 0, result.stderr
    assert "omni: It is noon." in result.stderr
    assert len(sf.read(str(said))[0]) == SPEECH_RATE
    events = [(e["dir"], e["event"]) for e in map(json.loads, log.read_text().splitlines())]
    kinds = [(d, e["type"]) for d, e in events]
    assert kinds[:2] == [("out", "session.update"), ("in", "session.created")]
    created = events[1][1]
    assert created["session"]["capabilities"]["supports_session_resume"] is False
    assert ("in", "response.speak") in kinds and ("out", "response.create") not in kinds
    assert [e["played_ms"] for d, e in events if e["type"] == "playback.ack"][-1] == 1000
    seqs = [e["server_event_seq"] for d, e in events if d == "in" and "server_event_seq" in e]
    assert seqs == list(range(1, len(seqs) + 1))
    acked = [e["server_event_seq"] for d, e in events if d == "out" and e["type"] == "session.event_ack"]
    assert acked == seqs[:len(acked)] and len(acked) >= len(seqs) - 1  # all but (maybe) session.closed
    assert kinds[-1] == ("in", "session.closed")
    engine = engines.scripted
    assert engine.preloaded == 1 and sum(type(r).__name__ == "ChatRequest" for r in engine.requests) == 1


def test_an_in_process_session_refuses_a_resume_in_the_flat_shape():
    """In process there is no socket to lose: resume is not offered, and a `session.resume` says so."""
    async def go():
        sock = LocalDuplexSocket(DuplexRegistry(ScriptedEngine(), model_id="m", scheduler=AnswerScheduler(), models=TURN_MODELS,
                                                       served=False, resumable=False))
        await sock.open()
        await sock.send({"type": "session.resume", "session_id": "sess_x", "resume_token": "rt_x",
                         "last_received_server_event_seq": 0})
        return [e async for e in sock.events()]

    events = asyncio.run(asyncio.wait_for(go(), SAFETY_S))
    assert [(e["type"], e["code"]) for e in events] == [("error", "session_resume_unsupported")]


def test_a_handshake_error_ends_the_talk_in_one_line(tmp_path):
    """The model-neutral preset sends no voice clip; the MiniCPM-o server refuses in the flat shape."""
    shape = MiniCPMoShape()
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path, preset="default")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "omni: error: the server refused the duplex session: MiniCPM-o needs ref_audio: a clip of the assistant's "
        "voice (ref_audio_required)"]
    assert not said.exists()
    assert [e["type"] for _, e in events] == ["session.update", "error"]


@pytest.mark.parametrize("finale, line", [
    ("session.closed", "the server closed the duplex session"),
    ("session.replaced", "the duplex session was taken over by another connection (session.replaced)"),
    ("session.expired", "the duplex session expired on the server (disconnect_grace_expired)"),
    ("session.resync_required", "the server can no longer replay the duplex session (journal_overflow); start a new one"),
])
def test_a_session_the_server_ends_ends_the_talk_in_one_line(tmp_path, finale, line):
    shape = MiniCPMoShape(finale=finale)
    with served(shape.handler) as url:
        result, said, events = talk_duplex(url, tmp_path)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == f"omni: error: {line}"
    assert sum(text.startswith("omni: error:") for text in result.stderr.splitlines()) == 1
    assert [e for d, e in events if d == "in"][-1] == of(events, "in", finale)[0]  # the last word
    assert not of(events, "out", "session.close")  # the session is gone: nothing to close


# ---- the client with a speaker the test plays ---------------------------------------------------

class Duplex:
    """A running DuplexTalkClient against `url`; `async with Duplex(url) as d`."""

    def __init__(self, url: str, *, preset: str = "minicpmo") -> None:
        self.voice, self.log, self.stop = Voice(), Log(), asyncio.Event()
        self.speaker, self.view = Device(), Recorder()
        self.link = DuplexLink(url, None, None, log=self.log.write)
        ref = "data:audio/wav;base64," + base64.b64encode(speech_file().read_bytes()).decode()
        self.client = DuplexTalkClient(self.link, self.voice, self.speaker,
                                       DuplexOptions(PRESETS[preset], ref, echo_gate=False), self.view,
                                       models=TURN_MODELS)

    async def __aenter__(self) -> "Duplex":
        self.task = asyncio.create_task(self.client.run(self.stop))
        started = asyncio.create_task(self.voice.started.wait())
        await asyncio.wait([started, self.task], return_when=asyncio.FIRST_COMPLETED)
        if self.task.done():
            await self.task
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop.set()
        await self.task

    def ask(self) -> None:
        self.voice.say(np.concatenate([speech(), silence(0.8)]))

    def acks(self) -> list[dict]:
        return self.log.of("out", "playback.ack")

    async def hearing_the_answer(self, played_s: float) -> None:
        """A question asked, eight pieces of its answer in, `played_s` of it played."""
        self.ask()
        await self.log.until("in", "response.audio.delta", 8)
        self.speaker.play(int(played_s * SPEECH_RATE))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, SAFETY_S))


async def talked_over(url: str, answered: tuple, played_s: float) -> Duplex:
    """A question, its answer as far as `answered` (a log event) with `played_s` of it played, then
    a whole question spoken over it, until the client has cleared the input and committed again."""
    async with Duplex(url) as d:
        d.ask()
        await d.log.until(*answered)
        d.speaker.play(int(played_s * SPEECH_RATE))
        d.voice.say(np.concatenate([speech(), silence(0.8)]))
        await d.log.until("out", "input_audio_buffer.clear")
        await d.log.until("out", "input_audio_buffer.commit", 2)
    return d


def test_client_forced_barge_in_where_the_server_has_none():
    """supports_barge_in false: the client stops the answer where the speaker stopped, tells the
    server how much was played, cancels the response and clears the input it talked over."""
    shape = MiniCPMoShape(supports_barge_in=False, deltas=10, hold=8)
    with served(shape.handler) as url:
        d = run(talked_over(url, ("in", "response.audio.delta", 8), played_s=1.2))  # 0.4 s still queued
    assert d.link.capabilities.supports_barge_in is False
    sent = [e for direction, e in d.log.events if direction == "out" and e["type"] not in ("input_audio_buffer.append", "session.event_ack")]
    cut = [e["type"] for e in sent].index("response.cancel")
    ack = sent[cut - 1]
    assert [e["type"] for e in sent[cut - 1:cut + 2]] == ["playback.ack", "response.cancel", "input_audio_buffer.clear"]
    heard_ms = d.speaker.played_frames * 1000 // SPEECH_RATE
    assert ack["played_ms"] == heard_ms == 1200 and "truncate" not in ack  # no audio truncation there
    first = [a["played_ms"] for a in d.acks() if a["response_id"] == "resp_01"]
    assert first == sorted(first) and first[-1] == 1200  # cumulative, and nothing past the cut
    assert d.log.of("out", "response.cancel")[0]["response_id"] == "resp_01"
    assert d.speaker.flushed == 1 and d.client.forced == 1
    session = next(iter(shape.sessions.values()))
    assert session.history[0] == {"response_id": "resp_01", "played_ms": 1200}
    assert any(line.endswith("—[interrupted]") for line in d.view.lines)


def test_esc_stops_a_duplex_answer_where_it_was_heard_and_begins_no_turn():
    shape = MiniCPMoShape(supports_barge_in=False, deltas=10, hold=8)

    async def go(url: str):
        async with Duplex(url) as d:
            await d.hearing_the_answer(played_s=0.6)
            d.client.stop_answer()
            await d.log.until("out", "response.cancel")
        return d

    with served(shape.handler) as url:
        d = run(go(url))
    assert d.log.of("out", "response.cancel")[0]["response_id"] == "resp_01"
    assert [a["played_ms"] for a in d.acks() if a["response_id"] == "resp_01"][-1] == 600
    assert d.speaker.flushed == 1 and (d.client.interruptions, d.client.forced) == (1, 0)
    assert len(d.log.of("out", "input_audio_buffer.commit")) == 1 and not d.log.of("out", "input_audio_buffer.clear")
    assert d.view.lines[-1].endswith("—[interrupted]")


def test_a_backchannel_over_an_answer_the_server_cannot_cut_is_dropped_and_the_answer_plays_on():
    """supports_barge_in false: a remark shorter than a backchannel ("uh-huh") is not the user
    taking the turn: no cancel, nothing flushed, no turn committed; the remark is cleared."""
    shape = MiniCPMoShape(supports_barge_in=False, deltas=10, hold=8)

    async def go(url: str):
        async with Duplex(url) as d:
            await d.hearing_the_answer(played_s=0.6)
            d.voice.say(np.concatenate([speech()[:int(0.45 * SPEECH_RATE)], silence(0.8)]))
            await d.log.until("out", "input_audio_buffer.clear")
            labels = list(d.client.state.badges)
        return d, labels

    with served(shape.handler) as url:
        d, labels = run(go(url))
    assert not d.log.of("out", "response.cancel") and len(d.log.of("out", "input_audio_buffer.commit")) == 1
    assert d.speaker.flushed == 0 and (d.client.forced, d.client.backchannels, d.client.interruptions) == (0, 1, 0)
    assert d.client.active == "resp_01" and "resp_01" not in d.client.cut
    assert "overlap: drop" in labels


def test_a_forced_barge_in_over_an_answer_the_server_has_finished_stops_its_playing_and_cancels_nothing():
    """The answer is done on the server and only playing here: the client cuts it off where the
    speaker was, but sends no `response.cancel` (a strict server would answer it with an error)."""
    shape = MiniCPMoShape(supports_barge_in=False, deltas=5)
    with served(shape.handler) as url:
        d = run(talked_over(url, ("in", "response.done"), played_s=0.4))
    assert not d.log.of("out", "response.cancel") and not d.log.of("in", "error")
    assert d.speaker.flushed == 1 and d.client.forced == 1
    assert [a["played_ms"] for a in d.acks() if a["response_id"] == "resp_01"][-1] == 400

@pytest.mark.parametrize("truncates", [True, False])
def test_server_barge_in_where_the_server_has_it(truncates):
    """supports_barge_in true: the client keeps streaming; the server cancels, and the client
    stops playing at once and acknowledges exactly what was played (truncating the stored answer
    where `supports_audio_truncate` says the server can)."""
    shape = MiniCPMoShape(supports_barge_in=True, deltas=10, hold=8, truncates=truncates)

    async def go(url: str):
        async with Duplex(url) as d:
            d.ask()
            await d.log.until("in", "response.audio.delta", 8)
            d.speaker.play(int(0.6 * SPEECH_RATE))
            d.voice.say(np.concatenate([speech(), silence(0.8)]))
            await d.log.until("in", "response.done")
            await d.log.until("out", "input_audio_buffer.commit", 2)
            labels = list(d.client.state.badges)
        return d, labels

    with served(shape.handler) as url:
        d, labels = run(go(url))
    assert not d.log.of("out", "response.cancel") and not d.log.of("out", "input_audio_buffer.clear")
    assert d.log.of("in", "overlap.decision")[0]["action"] == "barge_in"
    assert d.log.of("in", "response.done")[0]["response"]["status"] == "cancelled"
    assert [a for a in d.acks() if a["response_id"] == "resp_01"][-1]["played_ms"] == 600
    assert d.speaker.played_frames * 1000 // SPEECH_RATE == 600
    assert [a["played_ms"] for a in d.acks() if a.get("truncate")] == ([600] if truncates else [])
    assert d.speaker.flushed == 1 and d.client.forced == 0 and d.client.interruptions == 1
    assert next(iter(shape.sessions.values())).history[0]["played_ms"] == 600
    assert "overlap: barge_in" in labels


def test_a_pause_the_model_does_not_take_as_a_turn_end_shows_listen():
    """A commit without enough speech in it: the model keeps listening (response.listen)."""
    shape = MiniCPMoShape()

    async def go(url: str):
        async with Duplex(url) as d:
            d.voice.say(np.concatenate([speech()[: SPEECH_RATE * 3 // 20], silence(0.8)]))  # 150 ms: a turn here, too short there
            await d.log.until("in", "response.listen")
            listening = list(d.client.state.badges)
            d.ask()
            await d.log.until("in", "response.speak")
            speaking = list(d.client.state.badges)
        return listening, speaking

    with served(shape.handler) as url:
        listening, speaking = run(go(url))
    assert "model listens" in listening and "model speaks" in speaking


def test_heartbeats_keep_the_lease():
    """With a 0.6 s lease and nothing said, only the heartbeats (every 0.2 s) keep the session."""
    shape = MiniCPMoShape(idle_timeout_s=0.6)

    async def go(url: str):
        async with Duplex(url) as d:
            await d.log.until("in", "session.heartbeat_ack", 5)  # a second: past the lease
        return d

    with served(shape.handler) as url:
        d = run(go(url))
    assert d.link.heartbeat_s == pytest.approx(0.2)
    assert not d.log.of("in", "session.expired")
    assert d.log.of("in", "session.closed")[0]["reason"] == "session_close"


def test_without_heartbeats_the_lease_runs_out_in_one_line():
    """The control: the same lease with the heartbeat stopped expires, and says so."""
    shape = MiniCPMoShape(idle_timeout_s=0.3)

    async def go(url: str):
        link = DuplexLink(url, None, None)
        await link.open({"ref_audio": "data:audio/wav;base64,AAAA", "input_audio_format": "pcm16", "sample_rate_hz": 16000})
        assert link._heartbeat is not None
        link._heartbeat.cancel()
        try:
            async for _ in link.events():
                pass
        finally:
            await link.close()

    with served(shape.handler) as url, pytest.raises(ServerError) as failure:
        run(go(url))
    assert str(failure.value) == "the duplex session expired on the server (idle_ttl_expired)"


@pytest.mark.parametrize("period, ms", [(1000, 200), (80, 80), (32, 40), (None, 200)])
def test_appends_follow_the_models_unit(period, ms):
    """chunk_period_ms from the capabilities sets the append length (whole 40 ms mic frames)."""
    from omnicli.talk.duplex.options import append_ms

    assert append_ms(period) == ms


def test_personaplex_preset_sends_24khz_float_audio():
    from omnicli.talk.duplex.presets import InputEncoder, session_config

    chosen = PRESETS["personaplex"]
    session = session_config(chosen)
    assert (session["input_audio_format"], session["sample_rate_hz"]) == ("pcm_f32le", 24000)
    assert "ref_audio" not in session and "overlap_policy" not in session
    assert session["voice"] == "NATF2.pt" and session_config(chosen, voice="NATM1.pt")["voice"] == "NATM1.pt"
    assert "voice" not in session_config(PRESETS["default"])  # the server's own voice
    frame = np.linspace(-0.5, 0.5, 960, dtype=np.float32)
    data = InputEncoder(chosen).encode(frame)
    assert np.array_equal(np.frombuffer(data, "<f4"), frame)
