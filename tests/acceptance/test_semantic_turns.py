"""Semantic turns on a live `omni serve`: `turn_detection: semantic_vad` (Smart Turn v3.2 after a
short pause, and the words heard so far) over the WebSocket, on real speech from the embedded Piper voice. Which turns end and
in what order, never how many milliseconds it took."""

import asyncio

import numpy as np

from tests.acceptance.test_realtime_server import pcm_b64, raw_session
from tests.helpers.clips import quiet
from tests.helpers.turn_speech import QUESTION, UNFINISHED, paused, say

BUFFER_EVENTS = ("input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped", "input_audio_buffer.committed")


async def _configured(url: str, detection: dict):
    raw = await raw_session(url)
    await raw.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": detection}}}})
    updated = await raw.until("session.updated")
    assert updated["session"]["audio"]["input"]["turn_detection"]["type"] == detection["type"]
    return raw


async def _append(raw, audio: np.ndarray, commits: int = 0) -> list[str]:
    """Append `audio` in 100 ms pieces; the buffer events it caused, once `commits` turns were
    committed and the server has carried out every append (events are handled in order, so the
    error for a missing item comes last). A semantic turn end is decided while the audio goes on,
    so its commit may come after the appends are carried out."""
    mark = len(raw.seen)
    for start in range(0, len(audio), 2400):
        await raw.send({"type": "input_audio_buffer.append", "audio": pcm_b64(audio[start:start + 2400])})
    for _ in range(commits):
        await raw.until("input_audio_buffer.committed", timeout=30)
    await raw.send({"type": "conversation.item.retrieve", "item_id": "item_marker"})
    await raw.until("error")
    return [e["type"] for e in raw.seen[mark:] if e["type"] in BUFFER_EVENTS]


async def _decided_in_the_pause(url: str, eagerness: str, halves: tuple[str, str], pause_s: float, turns: tuple[int, int]) -> list[str]:
    """The two `halves` said with a pause between, on a fresh semantic_vad session: appended up to
    300 ms into the pause, then 2 s for the pause's turn end to be decided by the words, not by the
    voice coming back (as where the answer is begun within the pause), then the rest. The buffer
    events, once `turns` were committed: so many in the first part and in the rest."""
    audio = paused(*halves, pause_s=pause_s)
    judged = int(1.3 * 24000) + len(say(halves[0]))
    raw = await _configured(url, {"type": "semantic_vad", "eagerness": eagerness, "create_response": False})
    seen = await _append(raw, audio[:judged], turns[0])
    await asyncio.sleep(2.0)
    seen += await _append(raw, audio[judged:], turns[1])
    await raw.ws.close()
    return seen


def test_a_pause_inside_a_sentence_ends_no_semantic_turn_but_ends_a_300_ms_silence_turn(omni_server):
    audio = paused(*UNFINISHED, pause_s=0.5)

    async def turns(detection: dict, commits: int) -> list[str]:
        raw = await _configured(omni_server, {**detection, "create_response": False})
        seen = await _append(raw, audio, commits)
        await raw.ws.close()
        return seen

    assert asyncio.run(turns({"type": "semantic_vad", "eagerness": "auto"}, 1)) == list(BUFFER_EVENTS)
    assert asyncio.run(turns({"type": "server_vad", "silence_duration_ms": 300}, 2)) == list(BUFFER_EVENTS) * 2


def test_a_pause_that_sounds_final_but_reads_unfinished_ends_no_turn_unless_eagerness_is_high(omni_server):
    """Smart Turn calls "The children built a small" finished at the pause (Piper's falling pitch);
    the words the server heard (real Whisper, then SmolLM2) do not read finished. High eagerness
    does not read the words, and cuts the sentence in two."""
    def turns(eagerness: str, commits: tuple[int, int]) -> list[str]:
        halves = ("The children built a small", "castle out of sand and pebbles.")
        return asyncio.run(_decided_in_the_pause(omni_server, eagerness, halves, 0.4, commits))

    assert turns("auto", (0, 1)) == list(BUFFER_EVENTS)
    assert turns("high", (1, 1)) == list(BUFFER_EVENTS) * 2


def test_a_first_half_that_reads_as_a_sentence_ends_a_turn_only_where_500_ms_of_silence_would(omni_server):
    """Smart Turn calls "Remember to save your work" finished at the pause, and its words read like a
    short sentence: only maybe finished, so the turn ends only if the pause lasts 500 ms."""
    def turns(eagerness: str, pause_s: float, commits: tuple[int, int]) -> list[str]:
        halves = ("Remember to save your work", "before you shut down the computer.")
        return asyncio.run(_decided_in_the_pause(omni_server, eagerness, halves, pause_s, commits))

    assert turns("high", 0.4, (1, 1)) == list(BUFFER_EVENTS) * 2  # Smart Turn alone cuts it at once
    assert turns("auto", 0.4, (0, 1)) == list(BUFFER_EVENTS)
    assert turns("auto", 0.8, (0, 2)) == list(BUFFER_EVENTS) * 2  # once 500 ms of silence are heard, as server_vad


def test_a_finished_question_ends_the_turn_before_500_ms_of_silence_would(omni_server):
    """After the question and 400 ms of quiet, the semantic turn is committed and the 500 ms
    silence turn is not; more quiet ends that one too."""
    question = np.concatenate([quiet(1.0), say(QUESTION), quiet(0.4)])

    async def turns(detection: dict) -> tuple[list[str], list[str]]:
        raw = await _configured(omni_server, {**detection, "create_response": False})
        early = await _append(raw, question)
        later = await _append(raw, quiet(1.0))
        await raw.ws.close()
        return early, later

    assert asyncio.run(turns({"type": "semantic_vad", "eagerness": "high"})) == (list(BUFFER_EVENTS), [])
    assert asyncio.run(turns({"type": "server_vad", "silence_duration_ms": 500})) == (
        ["input_audio_buffer.speech_started"], ["input_audio_buffer.speech_stopped", "input_audio_buffer.committed"])


def test_semantic_turns_answer_and_a_bad_eagerness_leaves_the_session_working(omni_server):
    async def run():
        raw = await _configured(omni_server, {"type": "semantic_vad", "eagerness": "medium"})
        await raw.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {
            "turn_detection": {"type": "semantic_vad", "eagerness": "sometimes"}}}}})
        refused = await raw.until("error")
        await raw.send({"type": "session.update", "session": {"type": "realtime", "instructions": "Answer in one short sentence."}})
        kept = (await raw.until("session.updated"))["session"]["audio"]["input"]["turn_detection"]
        audio = np.concatenate([quiet(1.0), say(QUESTION), quiet(1.0)])
        for start in range(0, len(audio), 2400):
            await raw.send({"type": "input_audio_buffer.append", "audio": pcm_b64(audio[start:start + 2400])})
        done = await raw.until("response.done", timeout=120)
        await raw.ws.close()
        return refused, kept, done, [e["type"] for e in raw.seen if e["type"] in (*BUFFER_EVENTS, "response.created")]

    refused, kept, done, order = asyncio.run(run())
    assert refused["error"]["param"] == "session.audio.input.turn_detection.eagerness"
    assert kept == {"type": "semantic_vad", "eagerness": "medium", "create_response": True, "interrupt_response": True}
    assert order == [*BUFFER_EVENTS, "response.created"]
    assert done["response"]["status"] == "completed"
    transcript = " ".join(part.get("transcript") or "" for item in done["response"]["output"] for part in item["content"])
    assert transcript.strip()
