"""Realtime reliability against a real `omni serve`: a fuzz of hostile events (each answered by
an `error` event, the session never dies, then a real spoken turn completes), and a 14 MiB
append that must not stall a second session or /health."""

import asyncio
import base64
import json
import random
import threading
import time

import httpx
import numpy as np
from websockets.sync.client import connect as connect_sync

from tests.acceptance.test_embedded_voice import synthesize
from tests.acceptance.test_realtime_server import pcm_b64, raw_session, ws_url

FUZZ_EVENTS = 1200
FUZZ_SECONDS = 120


def _nested(depth: int) -> dict:
    tree: dict = {"type": "realtime"}
    for _ in range(depth):
        tree = {"x": tree}
    return tree


def hostile_events(seed: int = 13) -> list[str | bytes]:
    """Every one of these is invalid: each must be answered by exactly one `error` event."""
    rng = random.Random(seed)
    good_b64 = base64.b64encode(b"\x00\x00" * 240).decode()
    makers = [
        lambda: "".join(rng.choice("{}[]\":,abc\\ \x00") for _ in range(rng.randint(0, 60))) + "{",
        lambda: json.dumps(rng.choice([None, 1, "x", [], [1, 2], True])),
        lambda: json.dumps({"type": rng.choice(["", "nope", "session.delete", "response.audio.delta", "output_audio_buffer.clear"])}),
        lambda: json.dumps({"type": rng.choice([1, None, [], {}])}),
        lambda: json.dumps({"type": "input_audio_buffer.append", "audio": rng.choice(["@@", "A", "====", good_b64[:-3] + "!"])}),
        lambda: json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\x01" * rng.choice([1, 3, 5, 99])).decode()}),
        lambda: json.dumps({"type": "input_audio_buffer.append", "audio": rng.choice([1, None, [], {}])}),
        lambda: json.dumps({"type": "input_audio_buffer.append"}),
        lambda: json.dumps({"type": "input_audio_buffer.commit"}),
        lambda: json.dumps({"type": "response.cancel", "response_id": rng.choice([None, "resp_x"])}),
        lambda: json.dumps({"type": rng.choice(["conversation.item.delete", "conversation.item.retrieve"]),
                            "item_id": rng.choice(["item_missing", "", "x" * 300])}),
        lambda: json.dumps({"type": "conversation.item.truncate", "item_id": "item_missing", "content_index": rng.randint(-5, 5),
                            "audio_end_ms": rng.randint(-1000, 10**9)}),
        lambda: json.dumps({"type": "conversation.item.create", "item": {"type": rng.choice(["function_call", "nope", 7])}}),
        lambda: json.dumps({"type": "conversation.item.create", "previous_item_id": "item_missing", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}}),
        lambda: json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi \ud800"}]}}),
        lambda: json.dumps({"type": "session.update", "session": {"type": "realtime", "audio": {"output": {
            "speed": rng.choice([-1, 0, 0.01, 1.51, 100, 1e308])}}}}),
        lambda: json.dumps({"type": "session.update", "session": {"type": "realtime", "max_output_tokens": rng.choice([-5, 0, 4097, 10**12])}}),
        lambda: json.dumps({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": {
            "type": "server_vad", rng.choice(["threshold", "silence_duration_ms", "prefix_padding_ms"]): rng.choice([-1, -0.5, -10**6])}}}}}),
        lambda: json.dumps({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": {
            "type": "server_vad", "threshold": rng.choice([1.01, 5, 1e9])}}}}}),
        lambda: json.dumps({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"format": {
            "type": "audio/pcm", "rate": rng.choice([8000, 16000, 44100, 48000])}}}}}),
        lambda: json.dumps({"type": "session.update", "session": {"type": "realtime", "output_modalities": rng.choice([["video"], []])}}),
        lambda: json.dumps({"type": "session.update", "session": rng.choice([None, 1, "realtime", {"type": "nope"}])}),
        lambda: json.dumps({"type": "session.update", "session": _nested(rng.randint(40, 300))}),
        lambda: '{"type": "session.update", "session": ' + "[" * 50000 + "]" * 50000 + "}",
        lambda: json.dumps({"type": "response.create", "response": {"max_output_tokens": rng.choice([-5, 0, 5000])}}),
        lambda: json.dumps({"type": "response.create", "response": {"conversation": "none"}}),
        lambda: json.dumps({"type": "response.create", "response": {"output_modalities": rng.choice([1, "audio"])}}),
        lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))),
    ]
    return [rng.choice(makers)() for _ in range(FUZZ_EVENTS)]


def test_hostile_events_get_errors_and_then_a_real_turn_completes(omni_server):
    question = synthesize("How many days are there in a week?")
    events = hostile_events()

    async def run():
        raw = await raw_session(omni_server)
        started = time.monotonic()
        answered: list[dict] = []
        for event in events:
            await raw.send(event)
            mark = len(raw.seen)
            answered.append(await raw.until("error", timeout=30))
            assert [e["type"] for e in raw.seen[mark:]] == ["error"], raw.seen[mark:]
        fuzz_seconds = time.monotonic() - started
        health = httpx.get(f"{omni_server}/health", timeout=5).status_code
        for start in range(0, len(question), 4800):
            await raw.send({"type": "input_audio_buffer.append", "audio": pcm_b64(question[start:start + 4800])})
        await raw.send({"type": "input_audio_buffer.commit"})
        await raw.send({"type": "response.create", "response": {"max_output_tokens": 60}})
        mark = len(raw.seen)
        done = await raw.until("response.done", timeout=90)
        audio = [e for e in raw.seen[mark:] if e["type"] == "response.output_audio.delta"]
        await raw.ws.close()
        return answered, fuzz_seconds, health, done, audio

    answered, fuzz_seconds, health, done, audio = asyncio.run(asyncio.wait_for(run(), FUZZ_SECONDS + 120))
    print(f"\nrealtime fuzz: {len(answered)} hostile events in {fuzz_seconds:.1f} s")
    assert len(answered) == FUZZ_EVENTS
    assert not [e for e in answered if e["error"]["type"] == "server_error"]
    assert fuzz_seconds < FUZZ_SECONDS
    assert health == 200
    assert done["response"]["status"] == "completed" and audio


def test_a_14_mib_append_does_not_stall_another_session_or_health(omni_server):
    """One client appends 14 MiB (from its own thread); meanwhile another session and /health
    must keep answering: ~100-250 ms measured on a busy 2-core box (it was ~3 s with the work on
    the event loop); the bound leaves room for a loaded CI machine."""
    big = base64.b64encode(np.random.default_rng(0).integers(-300, 300, 7 * 1024 * 1024, dtype="<i2").tobytes()).decode()
    finished = threading.Event()

    def append_big() -> None:
        with connect_sync(ws_url(omni_server), max_size=None) as ws:
            while json.loads(ws.recv())["type"] != "conversation.created":
                pass
            ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": big}))
            ws.send(json.dumps({"type": "conversation.item.retrieve", "item_id": "item_marker"}))
            while json.loads(ws.recv())["type"] != "error":
                pass
            ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            while json.loads(ws.recv())["type"] != "input_audio_buffer.committed":
                pass
        finished.set()

    async def probe():
        raw = await raw_session(omni_server)
        event_waits, health_waits = [], []
        async with httpx.AsyncClient(base_url=omni_server, timeout=30) as http:
            await http.get("/health")
            thread = threading.Thread(target=append_big, daemon=True)
            thread.start()
            started = time.monotonic()
            while not finished.is_set() and time.monotonic() - started < 60:
                sent = time.monotonic()
                await raw.send({"type": "conversation.item.retrieve", "item_id": "item_probe"})
                await raw.until("error")
                event_waits.append(time.monotonic() - sent)
                sent = time.monotonic()
                assert (await http.get("/health")).status_code == 200
                health_waits.append(time.monotonic() - sent)
                await asyncio.sleep(0.02)
            thread.join(timeout=5)
        await raw.ws.close()
        return event_waits, health_waits, time.monotonic() - started

    event_waits, health_waits, seconds = asyncio.run(probe())
    print(f"\n14 MiB append took {seconds:.2f} s end to end; while it ran: {len(event_waits)} probes, "
          f"slowest event round trip {max(event_waits) * 1000:.0f} ms, slowest /health {max(health_waits) * 1000:.0f} ms")
    assert finished.is_set()
    assert max(event_waits) < 0.5 and max(health_waits) < 0.5


def test_the_session_survives_a_hang_up_mid_response(omni_server):
    async def run():
        raw = await raw_session(omni_server)
        await raw.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Tell me a long story."}]}})
        await raw.send({"type": "response.create"})
        await raw.until("response.output_audio.delta", timeout=60)
        await raw.ws.close()
        with_server = await raw_session(omni_server)
        await with_server.send({"type": "response.cancel"})
        error = await with_server.until("error")
        await with_server.ws.close()
        return error

    assert asyncio.run(run())["error"]["code"] == "response_cancel_not_active"


def test_a_conversation_longer_than_the_thinkers_context_still_answers(omni_server):
    """SmolLM2's window is 4,096 tokens; twelve long turns hold about three times that. The
    session leaves out the oldest turns instead of failing the response."""
    filler = " ".join(f"Item {n} of my shopping list is apples and pears." for n in range(100))

    async def run():
        raw = await raw_session(omni_server)
        await raw.send({"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}})
        for turn in range(12):
            await raw.send({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": f"Note {turn}: {filler}"}]}})
        await raw.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}})
        await raw.send({"type": "response.create", "response": {"max_output_tokens": 20}})
        done = await raw.until("response.done", timeout=120)
        await raw.ws.close()
        return done, [e for e in raw.seen if e["type"] == "error"]

    done, errors = asyncio.run(run())
    assert errors == []
    assert done["response"]["status"] == "completed"
    assert done["response"]["output"][0]["content"][0]["text"].strip()
