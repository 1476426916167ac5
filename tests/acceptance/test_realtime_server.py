"""`/v1/realtime` on `omni serve`: the official openai client, protocol abuse, responses, VAD."""

import asyncio
import base64
import json

import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.omni_processes import start_server
from tests.helpers.speech_check import wer

SERVER_EVENT = TypeAdapter(RealtimeServerEvent)
QUESTION = "How many days are there in a week?"


def pcm_b64(samples: np.ndarray) -> str:
    return base64.b64encode((np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes()).decode()


@pytest.fixture(scope="module")
def question() -> np.ndarray:
    return synthesize(QUESTION)


def ws_url(http_url: str) -> str:
    return "ws://" + http_url.split("://", 1)[1] + "/v1/realtime"


class Raw:
    """A plain WebSocket client that reads events until the one it waits for."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.seen: list[dict] = []

    async def send(self, event: dict | str | bytes) -> None:
        await self.ws.send(event if isinstance(event, (str, bytes)) else json.dumps(event))

    async def until(self, kind: str, timeout: float = 60) -> dict:
        async def wait():
            while True:
                event = json.loads(await self.ws.recv())
                SERVER_EVENT.validate_python(event)
                self.seen.append(event)
                if event["type"] == kind:
                    return event
        return await asyncio.wait_for(wait(), timeout)


async def raw_session(url: str, **connect) -> Raw:
    ws = await websockets.connect(ws_url(url), max_size=None, **connect)
    raw = Raw(ws)
    await raw.until("conversation.created")
    return raw


def test_openai_client_spoken_question_spoken_answer(omni_server, question, judge):
    async def run():
        client = AsyncOpenAI(base_url=f"{omni_server}/v1", api_key="unused")
        events, audio = [], []
        async with client.realtime.connect(model="omni-embedded") as conn:
            await conn.session.update(session={"type": "realtime", "output_modalities": ["audio"],
                                               "instructions": "Answer in one short sentence."})
            pcm = pcm_b64(question)
            step = 4800 * 4 // 3  # 100 ms of base64 PCM16
            for start in range(0, len(pcm), step):
                await conn.input_audio_buffer.append(audio=pcm[start:start + step])
            await conn.input_audio_buffer.commit()
            await conn.response.create()
            async for event in conn:
                events.append(event)
                if event.type == "response.output_audio.delta":
                    audio.append(base64.b64decode(event.delta))
                if event.type == "response.done":
                    break
        return events, b"".join(audio)

    events, audio = asyncio.run(run())
    kinds = [e.type for e in events]
    assert kinds[:2] == ["session.created", "conversation.created"]
    for kind in ["input_audio_buffer.committed", "response.created", "response.output_item.added",
                 "response.content_part.added", "response.output_audio.delta", "response.output_audio.done",
                 "response.output_audio_transcript.done", "response.output_item.done", "response.done"]:
        assert kind in kinds, kind
    heard = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    assert wer(QUESTION, heard.transcript) < 0.3
    done = events[-1]
    assert done.response.status == "completed" and done.response.usage.output_tokens > 0
    transcript = next(e for e in events if e.type == "response.output_audio_transcript.done").transcript
    samples = np.frombuffer(audio, dtype="<i2").astype(np.float32) / 32768
    assert judge.cer_of(transcript, samples, 24000) < 0.2


ABUSE = [
    ("not json at all", "invalid_json"),
    ({"type": "no.such.event"}, "unknown_event"),
    ({"type": "input_audio_buffer.append", "audio": "@@@not-base64@@@"}, "invalid_base64"),
    ({"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\x01\x02\x03").decode()}, "invalid_audio"),
    ({"type": "input_audio_buffer.append", "audio": "A" * (21 * 1024 * 1024)}, "audio_too_large"),
    ({"type": "input_audio_buffer.commit"}, "input_audio_buffer_commit_empty"),
    ({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}},
     "unsupported_audio_format"),
    ({"type": "conversation.item.delete", "item_id": "item_missing"}, "item_not_found"),
    ({"type": "conversation.item.retrieve", "item_id": "item_missing"}, "item_not_found"),
    ({"type": "conversation.item.truncate", "item_id": "item_missing", "content_index": 0, "audio_end_ms": 10}, "item_not_found"),
    ({"type": "response.cancel"}, "response_cancel_not_active"),
    ({"type": "input_audio_buffer.append"}, "invalid_event"),
    (b"\x00\x01binary", "invalid_event"),
]


def test_every_malformed_event_gets_an_error_and_the_session_lives_on(omni_server):
    async def run():
        raw = await raw_session(omni_server)
        codes = []
        for event, _ in ABUSE:
            await raw.send(event)
            codes.append((await raw.until("error"))["error"]["code"])
        # ... and it still answers.
        await raw.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}})
        await raw.send({"type": "response.create", "response": {"output_modalities": ["text"], "max_output_tokens": 20}})
        done = await raw.until("response.done")
        await raw.ws.close()
        return codes, done, raw.seen

    codes, done, seen = asyncio.run(run())
    assert codes == [code for _, code in ABUSE]
    assert done["response"]["status"] == "completed"
    assert any(e["type"] == "response.output_text.delta" for e in seen)


def test_session_update_drops_what_it_does_not_support(omni_server):
    async def run():
        raw = await raw_session(omni_server)
        await raw.send({"type": "session.update", "session": {
            "type": "realtime", "instructions": "Be brief.", "tools": [], "tool_choice": "auto",
            "audio": {"input": {"transcription": {"model": "whisper-1"}, "noise_reduction": {"type": "near_field"}},
                      "output": {"voice": "joe"}}}})
        updated = await raw.until("session.updated")
        await raw.ws.close()
        return updated

    session = asyncio.run(run())["session"]
    assert session["instructions"] == "Be brief."
    assert "transcription" not in session["audio"]["input"]
    assert session["audio"]["output"]["voice"] == "joe"


def long_answer_request(raw: Raw):
    return raw.send({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Tell me a long story about a dragon."}]}})


def test_new_response_cancels_the_running_one_and_cancel_works(omni_server):
    async def run():
        raw = await raw_session(omni_server)
        await long_answer_request(raw)
        await raw.send({"type": "response.create", "response": {"max_output_tokens": 400}})
        await raw.until("response.output_audio_transcript.delta")
        await raw.send({"type": "response.create", "response": {"max_output_tokens": 400}})
        first_done = await raw.until("response.done")
        await raw.until("response.output_audio_transcript.delta")
        await raw.send({"type": "response.cancel"})
        second_done = await raw.until("response.done")
        await raw.ws.close()
        return first_done, second_done

    first, second = asyncio.run(run())
    assert first["response"]["status"] == "cancelled"
    assert second["response"]["status"] == "cancelled"
    assert second["response"]["status_details"]["reason"] == "client_cancelled"
    assert second["response"]["output"][0]["status"] == "incomplete"


def test_truncate_keeps_what_was_heard(omni_server):
    async def run():
        raw = await raw_session(omni_server)
        await raw.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Name three fruits, in three sentences."}]}})
        await raw.send({"type": "response.create", "response": {"max_output_tokens": 80}})
        done = await raw.until("response.done")
        item = done["response"]["output"][0]
        audio_ms = sum(len(base64.b64decode(e["delta"])) // 2 for e in raw.seen if e["type"] == "response.output_audio.delta") * 1000 // 24000
        await raw.send({"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0, "audio_end_ms": audio_ms + 500})
        too_far = await raw.until("error")
        await raw.send({"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0, "audio_end_ms": audio_ms // 2})
        truncated = await raw.until("conversation.item.truncated")
        await raw.send({"type": "conversation.item.retrieve", "item_id": item["id"]})
        retrieved = await raw.until("conversation.item.retrieved")
        await raw.ws.close()
        return item, too_far, truncated, retrieved, audio_ms

    item, too_far, truncated, retrieved, audio_ms = asyncio.run(run())
    assert too_far["error"]["param"] == "audio_end_ms"
    assert truncated["audio_end_ms"] == audio_ms // 2
    full = item["content"][0]["transcript"]
    cut = retrieved["item"]["content"][0]["transcript"]
    assert 0 < len(cut.split()) < len(full.split())
    assert full.split()[: len(cut.split())] == cut.split()


def test_server_vad_commits_answers_and_interrupts(omni_server, question):
    async def run():
        raw = await raw_session(omni_server)
        await raw.send({"type": "session.update", "session": {
            "type": "realtime", "instructions": "Answer with a long story of at least ten sentences.",
            "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 400}}}}})
        await raw.until("session.updated")
        silence = np.zeros(24000, dtype=np.float32)
        audio = np.concatenate([silence, question, silence])
        for start in range(0, len(audio), 2400):
            await raw.send({"type": "input_audio_buffer.append", "audio": pcm_b64(audio[start:start + 2400])})
        started = await raw.until("input_audio_buffer.speech_started")
        stopped = await raw.until("input_audio_buffer.speech_stopped")
        await raw.until("input_audio_buffer.committed")
        await raw.until("response.created")
        # The user speaks again over the answer (a short one: speak while it is being made):
        # it is cancelled for the new turn.
        for start in range(0, len(question), 2400):
            await raw.send({"type": "input_audio_buffer.append", "audio": pcm_b64(question[start:start + 2400])})
        interrupted = await raw.until("response.done")
        await raw.ws.close()
        return started, stopped, interrupted

    started, stopped, interrupted = asyncio.run(run())
    assert 500 <= started["audio_start_ms"] <= 1000
    assert stopped["audio_end_ms"] > started["audio_start_ms"] + 1000
    assert started["item_id"] == stopped["item_id"]
    assert interrupted["response"]["status"] == "cancelled"
    assert interrupted["response"]["status_details"]["reason"] == "turn_detected"


@pytest.fixture(scope="module")
def keyed_server():
    proc, url = start_server("--api-key", "k3y")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_realtime_auth_by_header_or_subprotocol(keyed_server):
    async def run():
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(ws_url(keyed_server))
        by_header = await raw_session(keyed_server, additional_headers={"Authorization": "Bearer k3y"})
        await by_header.ws.close()
        by_protocol = await raw_session(keyed_server, subprotocols=["realtime", "openai-insecure-api-key.k3y"])
        assert by_protocol.ws.subprotocol == "realtime"
        await by_protocol.ws.close()
        return refused.value.response.status_code

    assert asyncio.run(run()) == 403


def test_a_pause_before_the_commit_is_used_to_hear_the_turn(omni_server, question):
    """Speech, a pause, then commit: the transcript comes with the commit, before any response."""
    async def run():
        raw = await raw_session(omni_server)
        audio = np.concatenate([question, np.zeros(12000, dtype=np.float32)])
        for start in range(0, len(audio), 2400):
            await raw.send({"type": "input_audio_buffer.append", "audio": pcm_b64(audio[start:start + 2400])})
        await asyncio.sleep(1.0)
        await raw.send({"type": "input_audio_buffer.commit"})
        committed = await raw.until("input_audio_buffer.committed")
        heard = await raw.until("conversation.item.input_audio_transcription.completed", timeout=10)
        kinds = [e["type"] for e in raw.seen]
        await raw.ws.close()
        return committed, heard, kinds

    committed, heard, kinds = asyncio.run(run())
    assert heard["item_id"] == committed["item_id"]
    assert wer(QUESTION, heard["transcript"]) < 0.3
    assert "response.created" not in kinds
