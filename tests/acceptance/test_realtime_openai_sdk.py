"""Whole conversations with `omni serve` through the official `openai` package's realtime client,
as an application written against it holds them: text in, audio and its transcript out; speech in,
its turn ended by server VAD; a cancel; a truncate. (A spoken question committed by hand is in
test_realtime_server.py.) Every event the client reads is the SDK's own typed model."""

import asyncio
import base64

import numpy as np
import pytest
from openai import AsyncOpenAI

from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.speech_check import wer

QUESTION = "What is the capital of France?"
SAFETY_S = 180
"""Only so a broken server fails the test instead of hanging it."""


def pcm_b64(samples: np.ndarray) -> str:
    return base64.b64encode((np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes()).decode()


def pcm_samples(deltas: list[str]) -> np.ndarray:
    return np.frombuffer(b"".join(base64.b64decode(d) for d in deltas), dtype="<i2").astype(np.float32) / 32768


async def read_until(conn, kind: str, events: list) -> object:
    """Read the SDK's events into `events` until one of type `kind`; that event."""
    async def read():
        async for event in conn:
            events.append(event)
            if event.type == kind:
                return event
        raise AssertionError(f"the connection closed before {kind}")
    return await asyncio.wait_for(read(), SAFETY_S)


def converse(omni_server: str, conversation) -> list:
    """Run `conversation(conn, events)` on one SDK connection; every event it read."""
    async def run():
        client = AsyncOpenAI(base_url=f"{omni_server}/v1", api_key="unused")
        events: list = []
        async with client.realtime.connect(model="omni-embedded") as conn:
            await conversation(conn, events)
        return events

    return asyncio.run(run())


def test_text_in_audio_and_transcript_out_in_an_openai_voice(omni_server, judge):
    async def conversation(conn, events):
        await conn.session.update(session={"type": "realtime", "output_modalities": ["audio"],
                                           "instructions": "Answer in one short sentence.",
                                           "audio": {"output": {"voice": "alloy"}}})
        await read_until(conn, "session.updated", events)
        await conn.conversation.item.create(item={"type": "message", "role": "user",
                                                  "content": [{"type": "input_text", "text": QUESTION}]})
        await conn.response.create()
        await read_until(conn, "response.done", events)

    events = converse(omni_server, conversation)
    assert not [e for e in events if e.type == "error"], [e.error for e in events if e.type == "error"]
    updated = next(e for e in events if e.type == "session.updated")
    assert updated.session.audio.output.voice == "heart"  # alloy (neutral), spoken with the default voice
    done = events[-1]
    assert done.response.status == "completed" and done.response.usage.output_tokens > 0
    transcript = next(e for e in events if e.type == "response.output_audio_transcript.done").transcript
    assert "paris" in transcript.lower()
    audio = pcm_samples([e.delta for e in events if e.type == "response.output_audio.delta"])
    assert judge.cer_of(transcript, audio, 24000) < 0.2


def test_speech_in_with_server_vad_is_heard_and_answered_without_a_commit(omni_server):
    question = synthesize(QUESTION)

    async def conversation(conn, events):
        await conn.session.update(session={"type": "realtime", "instructions": "Answer in one short sentence.",
                                           "audio": {"input": {"turn_detection": {"type": "server_vad"}}}})
        await read_until(conn, "session.updated", events)
        pcm = pcm_b64(np.concatenate([np.zeros(4800, np.float32), question, np.zeros(24000, np.float32)]))
        step = 4800 * 4 // 3  # 100 ms of base64 PCM16
        for start in range(0, len(pcm), step):
            await conn.input_audio_buffer.append(audio=pcm[start:start + step])
        await read_until(conn, "response.done", events)

    events = converse(omni_server, conversation)
    kinds = [e.type for e in events]
    for kind in ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                 "input_audio_buffer.committed", "response.created", "response.output_audio.delta"]:
        assert kind in kinds, kind
    assert kinds.index("input_audio_buffer.speech_stopped") < kinds.index("input_audio_buffer.committed") < kinds.index("response.created")
    heard = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    assert wer(QUESTION, heard.transcript) < 0.3
    assert events[-1].response.status == "completed"


def test_a_cancel_stops_the_answer_and_a_truncate_keeps_only_what_was_played(omni_server):
    async def conversation(conn, events):
        await conn.session.update(session={"type": "realtime", "instructions": "Tell long, detailed stories."})
        await read_until(conn, "session.updated", events)
        await conn.conversation.item.create(item={"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Tell me a long story about a lighthouse keeper."}]})
        await conn.response.create()
        delta = await read_until(conn, "response.output_audio.delta", events)
        await conn.response.cancel()
        await read_until(conn, "response.done", events)
        await conn.conversation.item.truncate(item_id=delta.item_id, content_index=0, audio_end_ms=200)
        await read_until(conn, "conversation.item.truncated", events)
        await conn.conversation.item.retrieve(item_id=delta.item_id)
        await read_until(conn, "conversation.item.retrieved", events)

    events = converse(omni_server, conversation)
    assert not [e for e in events if e.type == "error"], [e.error for e in events if e.type == "error"]
    done = next(e for e in events if e.type == "response.done")
    assert done.response.status == "cancelled"
    truncated = next(e for e in events if e.type == "conversation.item.truncated")
    assert (truncated.content_index, truncated.audio_end_ms) == (0, 200)
    item = events[-1].item
    assert item.status == "incomplete"
    [part] = item.content
    assert part.transcript is not None and len(part.transcript.split()) <= 3  # 200 ms hold a word or two


@pytest.mark.parametrize(("voice", "spoken_by"), [("alloy", "heart"), ("shimmer", "heart"), ("cedar", "joe"),
                                                 ("joe", "joe"), ("heart", "heart")])
def test_openai_voice_names_and_the_servers_own_are_taken_by_a_realtime_session(omni_server, voice, spoken_by):
    async def conversation(conn, events):
        await conn.session.update(session={"type": "realtime", "audio": {"output": {"voice": voice}}})
        await read_until(conn, "session.updated", events)

    events = converse(omni_server, conversation)
    assert [e.type for e in events if e.type == "error"] == []
    assert events[-1].session.audio.output.voice == spoken_by
