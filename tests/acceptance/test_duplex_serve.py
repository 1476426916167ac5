"""`omni serve`'s duplex lane (`/v1/realtime?duplex=1`) as a process on 127.0.0.1 with the embedded
engine (smollm2 thinker, Whisper, Piper), reached with the `websockets` client: a spoken question
answered, a backchannel that does not interrupt, sustained speech that barges in with a truncating
`playback.ack` trimming history, a socket killed mid-answer and resumed with no event lost or
doubled, the heartbeat lease, and the session cap."""

import asyncio
import base64
import json

import numpy as np
import pytest
import websockets
from websockets.asyncio.client import connect

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import float_to_pcm16, pcm16_to_float, resample
from tests.helpers.clips import quiet
from tests.helpers.omni_processes import start_server
from tests.helpers.speech_check import cer, wer
from tests.helpers.turn_speech import say

QUESTION = "What is the capital of France?"
STORY = "Tell me a short story about a cat in three sentences."
WAIT_S = 180
"""Only so a broken build fails instead of hanging (the thinker shares two cores)."""


@pytest.fixture(scope="module")
def server():
    proc, url = start_server("--llm", "smollm2", "--max-duplex-sessions", "2", "--duplex-grace-s", "20")
    yield "ws://" + url.split("://", 1)[1] + "/v1/realtime?duplex=1"
    proc.terminate()
    proc.wait(timeout=10)


class Client:
    def __init__(self, ws) -> None:
        self.ws = ws
        self.seen: list[dict] = []

    async def send(self, event: dict) -> None:
        await self.ws.send(json.dumps(event))

    async def stream(self, samples_24k: np.ndarray, chunk_ms: int = 100) -> None:
        audio = resample(samples_24k, SPEECH_RATE, 16000)
        step = 16 * chunk_ms
        for start in range(0, len(audio), step):
            await self.send({"type": "input_audio_buffer.append",
                             "audio": base64.b64encode(float_to_pcm16(audio[start:start + step])).decode()})

    async def until(self, *kinds: str) -> dict:
        async def wait():
            while True:
                event = json.loads(await self.ws.recv())
                self.seen.append(event)
                if event["type"] in kinds:
                    return event
        return await asyncio.wait_for(wait(), WAIT_S)

    def kinds(self) -> list[str]:
        return [event["type"] for event in self.seen]


async def open_session(url: str, session: dict | None = None, query: str = "") -> tuple[Client, dict]:
    client = Client(await connect(url + query, max_size=None))
    await client.send({"type": "session.update", "session": {"instructions": "Answer in one short sentence.", **(session or {})}})
    return client, await client.until("session.created", "error")


def spoken(text: str) -> np.ndarray:
    return np.concatenate([quiet(0.5), say(text), quiet(2.5)])


def answer_audio(events: list[dict], response_id: str) -> np.ndarray:
    pcm = b"".join(base64.b64decode(e["delta"]) for e in events
                   if e["type"] == "response.output_audio.delta" and e["response_id"] == response_id)
    return pcm16_to_float(pcm)


def test_a_spoken_question_is_heard_and_answered_aloud(server, judge):
    async def run():
        client, created = await open_session(server)
        await client.stream(spoken(QUESTION))
        done = await client.until("response.done")
        await client.send({"type": "session.close"})
        await client.until("session.closed")
        return created, done, client.seen

    created, done, seen = asyncio.run(run())
    assert created["session"]["capabilities"]["implementation_level"] == "chat_fallback"
    heard = next(e for e in seen if e["type"] == "conversation.item.input_audio_transcription.completed")
    assert wer(QUESTION, heard["transcript"]) <= 0.2
    assert done["response"]["status"] == "completed"
    kinds = [e["type"] for e in seen]
    assert kinds.index("response.speak") < kinds.index("response.output_audio.delta")
    transcript = done["response"]["output"][0]["content"][0]["transcript"]
    said = judge.transcribe(answer_audio(seen, done["response_id"]), SPEECH_RATE)
    assert transcript.strip() and cer(transcript, said) < 0.2, (transcript, said)  # the audio speaks the transcript
    numbers = [e["server_event_seq"] for e in seen]
    assert numbers == list(range(1, len(numbers) + 1))


def test_a_backchannel_does_not_interrupt_the_answer(server):
    async def run():
        client, _ = await open_session(server, {"instructions": "Answer in three sentences."})
        await client.stream(spoken(STORY))
        await client.until("response.output_audio.delta")
        await client.stream(np.concatenate([quiet(0.2), say("Uh-huh."), quiet(2.5)]))
        decision = await client.until("overlap.decision")
        done = await client.until("response.done")
        await client.send({"type": "session.close"})
        await client.until("session.closed")
        return decision, done, client.kinds()

    decision, done, kinds = asyncio.run(run())
    assert decision["action"] == "drop" and decision["reason"] == "backchannel"
    assert done["response"]["status"] == "completed"
    assert kinds.count("response.created") == 1 and "output_audio_buffer.cleared" not in kinds


def test_sustained_speech_barges_in_and_the_acknowledged_playback_is_what_history_keeps(server):
    async def run():
        client, _ = await open_session(server, {"instructions": "Answer in three sentences.", "playback_commit_policy": "ack_only"})
        await client.stream(spoken(STORY))
        first = await client.until("response.output_audio.delta")
        played_ms = first["metadata"]["audio_duration_ms"] // 2  # the listener heard half of the first sentence
        await client.send({"type": "playback.ack", "response_id": first["response_id"], "played_ms": played_ms})
        await client.stream(np.concatenate([quiet(0.2), say("I would rather hear about the capital of Germany"), quiet(2.5)]))
        decision = await client.until("overlap.decision")
        cancelled = await client.until("response.done")
        await client.send({"type": "playback.ack", "response_id": first["response_id"], "played_ms": played_ms, "truncate": True})
        acknowledged = await client.until("playback.acknowledged")
        while acknowledged["event"]["truncate"] is not True:
            acknowledged = await client.until("playback.acknowledged")
        await client.send({"type": "conversation.item.retrieve", "item_id": first["item_id"]})
        stored = await client.until("conversation.item.retrieved")
        transcripts = [e for e in client.seen if e["type"] == "response.output_audio_transcript.delta" and e["response_id"] == first["response_id"]]
        await client.send({"type": "session.close"})
        await client.until("session.closed")
        return first, played_ms, decision, cancelled, acknowledged, stored, transcripts

    first, played_ms, decision, cancelled, acknowledged, stored, transcripts = asyncio.run(run())
    assert decision["action"] == "barge_in"
    assert cancelled["response_id"] == first["response_id"] and cancelled["response"]["status"] == "cancelled"
    assert cancelled["response"]["status_details"]["reason"] == "barge_in"
    assert acknowledged["event"]["played_ms"] == played_ms == acknowledged["event"]["committed_ms"]
    kept = stored["item"]["content"][0]["transcript"]
    sentence = transcripts[0]["delta"].split()
    assert kept.split() == sentence[: len(kept.split())] and len(kept.split()) < len(sentence), (kept, sentence)


def test_a_socket_killed_mid_answer_resumes_with_no_event_lost_or_doubled(server):
    async def run():
        client, created = await open_session(server, {"instructions": "Answer in three sentences."})
        await client.stream(spoken(STORY))
        await client.until("response.output_audio.delta")
        last = client.seen[-1]["server_event_seq"]
        client.ws.transport.abort()  # the network goes: no close frame
        await asyncio.sleep(0)
        again = Client(await connect(server + "&autostart=0", max_size=None))
        await again.send({"type": "session.resume", "session_id": created["session"]["id"],
                          "resume_token": created["resume_token"], "incarnation": created["incarnation"],
                          "last_received_server_event_seq": last})
        resumed = await again.until("session.resumed", "error")
        await again.until("rate_limits.updated")
        await again.send({"type": "session.close"})
        await again.until("session.closed")
        return client.seen, resumed, again.seen

    before, resumed, after = asyncio.run(run())
    assert resumed["type"] == "session.resumed" and resumed["attachment_generation"] == 2
    events = before + after[1:]
    numbers = [e["server_event_seq"] for e in events]
    assert numbers == list(range(1, len(numbers) + 1))
    kinds = [e["type"] for e in events]
    assert kinds.count("response.done") == 1 and kinds.count("response.created") == 1


def test_heartbeats_keep_the_lease_and_silence_lets_it_expire(server):
    async def run():
        client, _ = await open_session(server, {"idle_timeout_s": 1.0})
        acks = []
        for _ in range(3):
            await client.send({"type": "session.heartbeat"})
            acks.append(await client.until("session.heartbeat_ack"))
            await asyncio.sleep(0.5)
        expired = await client.until("session.expired")
        with pytest.raises(websockets.ConnectionClosed):
            await client.until("never")
        return acks, expired, client.kinds()

    acks, expired, kinds = asyncio.run(run())
    assert len(acks) == 3 and expired["reason"] == "idle_ttl_expired"
    assert kinds[-1] == "session.expired"


def test_the_session_cap_refuses_with_duplex_session_busy(server):
    async def run():
        first, _ = await open_session(server)
        second, _ = await open_session(server)
        third, busy = await open_session(server)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await third.until("never")
        await first.send({"type": "session.close"})
        await first.until("session.closed")
        fourth, created = await open_session(server)
        for client in (second, fourth):
            await client.send({"type": "session.close"})
            await client.until("session.closed")
        return busy, closed.value.rcvd.code if closed.value.rcvd else None, created

    busy, code, created = asyncio.run(run())
    assert busy["error"]["code"] == "duplex_session_busy" and code == 1013
    assert created["type"] == "session.created"
