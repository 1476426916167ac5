"""`omni talk --duplex` against `omni serve`'s own duplex lane: the real app over a scripted engine,
served by uvicorn on 127.0.0.1 (a real socket), with the real CLI and the real DuplexTalkClient.
A cutting TCP proxy between them kills the socket mid-answer, as a network would."""

import asyncio
import base64
import contextlib
import json
import time
import uuid

import numpy as np
import pytest
import soundfile as sf

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import float_to_pcm16, resample
from omnicli.errors import ServerError
from omnicli.server.app import create_app
from omnicli.talk.duplex.link import DuplexLink
from omnicli.turns.models import TurnModels
from tests.helpers.cli_harness import omni
from tests.helpers.cutting_proxy import CuttingProxy
from tests.helpers.models import TURN_MODELS
from tests.helpers.realtime_harness import silence
from tests.helpers.scripted import Hold, ScriptedEngine, answer
from tests.helpers.server_harness import uvicorn_server, uvicorn_thread
from tests.helpers.synthetic_speech import speech, speech_file
from tests.helpers.talk_harness import FRAME, Log, duplex_talker

SAFETY_S = 30


@contextlib.contextmanager
def serving(engine: ScriptedEngine, models: TurnModels = TURN_MODELS):
    """`omni serve`'s app in a thread of its own, hearing turns with `models` (the stand-ins unless
    given the real ones); its URL."""
    with uvicorn_thread(create_app(engine, preload=False, turn_models=models)) as url:
        yield url


@pytest.mark.parametrize("vad", ["client", "server"])
def test_a_question_is_answered_headless_by_omni_serve(tmp_path, vad):
    """`--vad client` commits at a pause (the server decides what it was); `--vad server` leaves
    the turn's end to the server entirely."""
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    with serving(ScriptedEngine(chat=answer("It is noon.", audio_seconds=1.0))) as url:
        result = omni("talk", "--duplex", "--vad", vad, "--server", url, "--input-file", speech_file(),
                      "--output-file", said, "--transcript", log)
    assert result.exit_code == 0, result.stderr
    assert "omni: It is noon." in result.stderr
    assert len(sf.read(str(said))[0]) == SPEECH_RATE
    events = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [(e["dir"], e["event"]["type"]) for e in events]
    assert ("in", "response.speak") in kinds and ("out", "response.create") not in kinds
    created = next(e["event"] for e in events if e["event"]["type"] == "session.created")
    assert created["session"]["capabilities"]["implementation_level"]
    acks = [e["event"] for e in events if e["event"]["type"] == "playback.ack"]
    assert acks[-1]["played_ms"] == 1000
    assert [k for d, k in kinds if d == "out" and k != "session.event_ack"][-1] == "session.close"
    assert kinds[-1] == ("in", "session.closed")
    assert (("out", "input_audio_buffer.commit") in kinds) == (vad == "client")


def held_answer() -> tuple[Hold, ScriptedEngine]:
    """An engine whose answer is two seconds of audio, held after the first until `hold.open()`."""
    hold = Hold()
    return hold, ScriptedEngine(chat=[*answer("Paris is the capital.", audio_seconds=1.0)[:-1], hold,
                                      *answer(" It is in France.", audio_seconds=1.0)[1:2], answer("x")[-1]])


@contextlib.asynccontextmanager
async def answering(url: str, *, echo_gate: bool = True):
    """The talk client asks `url` a question; inside, the answer has begun (its first audio); on
    leaving, the talk ends (session.close)."""
    voice, log, link, client = duplex_talker(url, echo_gate=echo_gate)
    stop = asyncio.Event()
    talk = asyncio.create_task(client.run(stop))
    try:
        await voice.started.wait()
        voice.say(np.concatenate([speech(), silence(1.0)]))
        await log.until("in", "response.output_audio.delta")
        yield voice, log, link, client
    finally:
        stop.set()
        await talk


def test_a_socket_cut_mid_answer_resumes_on_omni_serve_with_no_event_lost_or_doubled():
    hold, engine = held_answer()

    async def go():
        server, listener = uvicorn_server(create_app(engine, preload=False, turn_models=TURN_MODELS))
        port = listener.getsockname()[1]
        serving_task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started:
            await asyncio.sleep(0.01)
        proxy = CuttingProxy(port)
        url = await proxy.start()
        try:
            async with answering(url) as (voice, log, link, client):
                proxy.cut()  # mid-answer: the rest is made while no socket is attached
                hold.open()
                await log.until("in", "response.done")
        finally:
            await proxy.close()
            server.should_exit = True
            await serving_task
        return client, link, log, proxy

    client, link, log, proxy = asyncio.run(asyncio.wait_for(go(), SAFETY_S))
    assert link.resumes == 1 and link.duplicates == 0
    seqs = [e["server_event_seq"] for d, e in log.events if d == "in" and "server_event_seq" in e]
    assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order
    assert sum(len(s) for s in client.said) == 2 * SPEECH_RATE  # both halves of the answer, once
    assert [e["type"] for e in log.of("in", "response.done")] == ["response.done"]
    assert log.of("in", "session.closed")[0]["reason"] == "session_close"


def test_a_backchannel_while_omni_serve_answers_does_not_interrupt_it():
    """omni serve has barge-in, so the client leaves speech over the answer to it: a short remark
    ("uh-huh") is dropped there (`overlap.decision` drop) and the answer goes on to its end."""
    hold, engine = held_answer()

    async def go(url: str):
        async with answering(url, echo_gate=False) as (voice, log, _, client):
            voice.say(np.concatenate([speech()[:int(0.45 * SPEECH_RATE)], silence(1.0)]))  # "uh-huh"
            decision = await log.until("in", "overlap.decision")
            hold.open()
            await log.until("in", "response.done")
        return client, log, decision

    with serving(engine) as url:
        client, log, decision = asyncio.run(asyncio.wait_for(go(url), SAFETY_S))
    assert (decision["action"], decision["reason"]) == ("drop", "backchannel")
    assert log.of("in", "response.done")[0]["response"]["status"] == "completed"
    assert sum(len(s) for s in client.said) == 2 * SPEECH_RATE  # all of the answer
    assert client.interruptions == client.forced == 0 and not log.of("out", "response.cancel")
    assert len([r for r in engine.requests if not isinstance(r, tuple)]) == 1  # the remark was not answered


@pytest.mark.parametrize("beating", [True, False], ids=["heartbeats", "none"])
def test_the_clients_heartbeats_keep_omni_serves_lease_and_without_them_it_expires_in_one_line(beating):
    """A 0.6 s lease on omni serve: the talk client's heartbeats (every 0.2 s) keep the session past
    it; with them stopped, the session expires and the talk ends on that one line."""
    async def go(url: str):
        log = Log()
        link = DuplexLink(url, None, None, log=log.write)
        await link.open({"idle_timeout_s": 0.6})
        assert link._heartbeat is not None and link.heartbeat_s == pytest.approx(0.2)
        if not beating:
            link._heartbeat.cancel()

        async def read() -> None:
            async for _ in link.events():
                pass

        reading = asyncio.create_task(read())
        done, _ = await asyncio.wait([reading], timeout=1.5)  # past the lease twice over
        await link.close()
        try:
            await reading
        except ServerError as exc:
            return str(exc), log
        return ("alive" if not done else "ended"), log

    with serving(ScriptedEngine(chat=answer("x"))) as url:
        outcome, log = asyncio.run(asyncio.wait_for(go(url), SAFETY_S))
    if beating:
        assert outcome == "alive" and len(log.of("in", "session.heartbeat_ack")) >= 5
        assert log.of("in", "session.closed")[0]["reason"] == "session_close"
    else:
        assert outcome == "the duplex session expired on the server (idle_ttl_expired)"
        assert not log.of("in", "session.heartbeat_ack")


def _frame(event: dict) -> str:
    """A client event as DuplexClient.send writes it: `event_id` (evt_ + uuid4 hex) added last, then json.dumps."""
    return json.dumps({**event, "event_id": f"evt_{uuid.uuid4().hex}"})


@pytest.mark.parametrize(("encoding", "rate"), [("pcm16", 16000), ("pcm_f32le", 24000)])
def test_duplex_client_frames_as_its_source_writes_them_are_answered_end_to_end(encoding, rate):
    """The frames of vLLM-Omni's DuplexClient, recorded from its source (vllm_omni/clients/duplex.py:
    `_target_url`, `SessionConfig.to_session_payload`, `append_audio`, `commit`, `ack_playback`, the
    `session.event_ack` of `_after_dispatch`, `_heartbeat_loop`, `_attempt_resume`, `close`), sent
    raw over a real socket; pcm_f32le at 24 kHz is its PersonaPlex preset (clients/personaplex.py).
    The resume keeps to what its `_accept_event` drops: nothing numbered at or below its cursor."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    width = 2 if encoding == "pcm16" else 4
    clip = resample(np.concatenate([speech(), silence(0.3)]), SPEECH_RATE, rate)
    pcm = float_to_pcm16(clip) if encoding == "pcm16" else clip.astype("<f4").tobytes()

    async def scenario(url: str) -> None:
        target = f"{url.replace('http://', 'ws://')}/v1/realtime?duplex=1&model=omni-test&autostart=0"
        ws = await connect(target, max_size=64 << 20)
        seen: list[dict] = []

        async def until(kind: str, where=lambda e: True) -> dict:
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), SAFETY_S))
                seen.append(event)
                if isinstance(event.get("server_event_seq"), int):  # as _after_dispatch: a failed ack is let go
                    with contextlib.suppress(ConnectionClosed):
                        await ws.send(json.dumps({"type": "session.event_ack", "server_event_seq": event["server_event_seq"]}))
                assert event["type"] != "error", event  # responses() raises on any error event
                if event["type"] == kind and where(event):
                    return event

        await ws.send(_frame({"type": "session.update", "session": {
            "model": "omni-test", "modalities": ["audio", "text"], "input_audio_format": encoding,
            "output_audio_format": "pcm16", "sample_rate_hz": rate,
            "audio": {"input": {"sample_rate_hz": rate}, "output": {"sample_rate_hz": 24000}},
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 3000},  # the commit ends the turn
            "extra_body": {"auto_response": True}}}))
        created = await until("session.created")
        assert created["session"]["input_audio_format"] == encoding
        chunk, end_ms = rate * 200 // 1000 * width, 0.0
        for offset in range(0, len(pcm), chunk):
            piece = pcm[offset:offset + chunk]
            end_ms += len(piece) * 1000 / (rate * width)
            await ws.send(_frame({"type": "input_audio_buffer.append", "audio": base64.b64encode(piece).decode("ascii"),
                                  "format": encoding, "sample_rate_hz": rate, "duration_ms": round(len(piece) * 1000 / (rate * width)),
                                  "audio_end_ms": round(end_ms)}))
        await ws.send(_frame({"type": "input_audio_buffer.commit", "final": True}))
        done = await until("response.done")
        rid = done["response"]["id"]
        audio = b"".join(base64.b64decode(e["delta"]) for e in seen
                         if e["type"] == "response.output_audio.delta" and e["response_id"] == rid)
        assert len(audio) == 2 * SPEECH_RATE  # the whole second, in the name the client's demux reads
        await ws.send(_frame({"type": "playback.ack", "played_ms": 1000, "committed_ms": 1000, "response_id": rid,
                              "item_id": f"item_{rid}"}))
        assert (await until("playback.acknowledged"))["event"]["played_ms"] == 1000
        await ws.send(_frame({"type": "session.heartbeat"}))
        await until("session.heartbeat_ack")
        cursor = [e["server_event_seq"] for e in seen if "server_event_seq" in e][-1]
        for _ in range(3):  # three more events that the transport loses: never dispatched, never acknowledged
            await ws.send(_frame({"type": "session.heartbeat"}))
        lost = [json.loads(await asyncio.wait_for(ws.recv(), SAFETY_S))["server_event_seq"] for _ in range(3)]
        await ws.close()  # the drop; the client resumes from the last sequence number it dispatched
        ws = await connect(target, max_size=64 << 20)
        await ws.send(json.dumps({"type": "session.resume", "session_id": created["session"]["id"],
                                  "resume_token": created["resume_token"], "last_received_server_event_seq": cursor}))
        resumed = json.loads(await asyncio.wait_for(ws.recv(), SAFETY_S))
        assert resumed["type"] == "session.resumed" and resumed.get("server_event_seq", cursor) <= cursor
        replayed = [json.loads(await asyncio.wait_for(ws.recv(), SAFETY_S)) for _ in lost]
        assert [e["server_event_seq"] for e in replayed] == lost == [cursor + 1, cursor + 2, cursor + 3]
        assert {e["type"] for e in replayed} == {"session.heartbeat_ack"}  # above the cursor: the client keeps each, once
        seen.clear()
        await ws.send(_frame({"type": "session.close"}))
        await until("session.closed")
        await ws.close()

    with serving(ScriptedEngine(chat=answer("It is noon.", audio_seconds=1.0))) as url:
        asyncio.run(asyncio.wait_for(scenario(url), SAFETY_S * 2))


def test_a_duplex_turns_wait_is_timed_from_when_its_speech_ended_though_frames_queued_meanwhile():
    """The loop is held for 0.6 s in the pause (frames recorded meanwhile queue up, as behind a busy
    loop), so the 500 ms of silence that ends the turn is heard late: the wait still begins when
    the voice went quiet, not 500 ms before the moment the pause was found."""
    engine = ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.5))
    heard = np.concatenate([silence(0.3), speech(), silence(1.5)])
    last_loud = np.flatnonzero(np.abs(heard) > 0.02)[-1] + 1
    hold_at = last_loud / SPEECH_RATE + 0.3  # seconds into the recording

    async def go():
        with serving(engine) as url:
            voice, log, _, client = duplex_talker(url)
            stop = asyncio.Event()
            talk = asyncio.create_task(client.run(stop))
            await voice.started.wait()
            loop = asyncio.get_running_loop()
            began, held = loop.time(), False
            for k, start in enumerate(range(0, len(heard), FRAME)):  # recorded in real time
                await asyncio.sleep(max(0.0, began + k * 0.04 - loop.time()))
                if not held and k * 0.04 >= hold_at:
                    time.sleep(0.6)  # noqa: ASYNC251 - the point: the loop is busy, the microphone is not
                    held = True
                voice.frames.put_nowait(heard[start:start + FRAME])
            await log.until("in", "response.done")
            stop.set()
            await talk
        return client, began - 0.04 + last_loud / SPEECH_RATE

    client, went_quiet_at = asyncio.run(asyncio.wait_for(go(), SAFETY_S))
    [turn] = client.state.timings
    # a VAD hears the voice stop up to a few 32 ms chunks after its last loud sample (Silero: 90-100 ms)
    assert went_quiet_at - 0.04 <= turn.started_at <= went_quiet_at + 0.16, turn.started_at - went_quiet_at
