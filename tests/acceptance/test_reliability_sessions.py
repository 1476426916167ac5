"""What realtime sessions leave behind in a real `omni serve`: memory given back when they close,
whatever they buffered, and a cap past which new sessions are refused at once while the admitted
ones are served. Figures are printed (`pytest -s`)."""

import asyncio
import base64
import json
import time

import httpx
import numpy as np
import pytest
import websockets

from tests.acceptance.test_reliability_http import status_kib, stop
from tests.helpers.omni_processes import start_server

APPENDS, APPEND_MIB = 4, 14
SESSIONS = 6
RSS_BOUND_MB = 100
"""A closed session must leave the server within this of where it was after the first one."""


@pytest.fixture(scope="module")
def server():
    proc, url = start_server("--llm", "smollm2", "--max-realtime-sessions", "2")
    yield proc, url
    stop(proc)


def ws_url(url: str) -> str:
    return "ws://" + url.split("://", 1)[1] + "/v1/realtime"


async def until(ws, kind: str) -> dict:
    while (event := json.loads(await ws.recv()))["type"] != kind:
        assert event["type"] != "error", event
    return event


async def heavy_session(url: str, audio: str) -> None:
    """Buffer APPENDS x APPEND_MIB of audio, then close."""
    async with websockets.connect(ws_url(url), max_size=None) as ws:
        await until(ws, "conversation.created")
        for _ in range(APPENDS):
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        await ws.send(json.dumps({"type": "session.update", "session": {"type": "realtime"}}))
        await until(ws, "session.updated")


def test_closed_sessions_give_their_memory_back_whatever_they_buffered(server):
    proc, url = server
    noise = np.random.default_rng(0).standard_normal(APPEND_MIB * 1024 * 1024 // 2) * 300
    audio = base64.b64encode(noise.astype("<i2").tobytes()).decode()
    rss = []
    for n in range(SESSIONS):
        started = time.monotonic()
        asyncio.run(heavy_session(url, audio))
        time.sleep(0.5)
        rss.append(status_kib(proc.pid, "VmRSS") / 1024)
        print(f"\nsession {n + 1} ({APPENDS} x {APPEND_MIB} MiB buffered, closed) in {time.monotonic() - started:.1f} s: "
              f"server RSS {rss[-1]:.0f} MB")
    growth = max(rss[1:]) - rss[0]
    print(f"RSS over {SESSIONS - 1} more closed sessions: {growth:+.0f} MB at most (bound {RSS_BOUND_MB} MB)")
    assert growth < RSS_BOUND_MB


def test_past_the_cap_a_session_is_refused_at_once_and_the_admitted_ones_are_answered(server):
    _, url = server

    async def admitted_turn(ws) -> dict:
        await ws.send(json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}}))
        await ws.send(json.dumps({"type": "response.create", "response": {"max_output_tokens": 12}}))
        return await until(ws, "response.done")

    async def main():
        async with websockets.connect(ws_url(url)) as first, websockets.connect(ws_url(url)) as second:
            for ws in (first, second):
                await until(ws, "conversation.created")
            started = time.monotonic()
            async with websockets.connect(ws_url(url)) as third:
                refusal = json.loads(await third.recv())
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await third.recv()
            refused_in = time.monotonic() - started
            done = await asyncio.gather(admitted_turn(first), admitted_turn(second))
            health = httpx.get(f"{url}/health", timeout=5).status_code
        return refusal, closed.value.rcvd, refused_in, done, health

    refusal, close, refused_in, done, health = asyncio.run(main())
    print(f"\nthird session refused in {refused_in * 1000:.0f} ms: {refusal['error']['message']}")
    assert refusal["error"]["code"] == "realtime_session_busy"
    assert (close.code, close.reason) == (1013, "realtime_session_busy")
    assert refused_in < 2
    assert [d["response"]["status"] for d in done] == ["completed", "completed"]
    assert health == 200
