"""The realtime session over `LocalTransport` and a scripted engine: exact events, their order
and fields, and what the engine was asked."""

import asyncio
import base64
import json

import numpy as np
import pytest

from omnicli.engine.base import DEFAULT_MAX_TOKENS, AudioPart, ChatRequest, TextDelta, TextPart, TranscriptDelta
from omnicli.errors import ContextWindowError, OmniError
from omnicli.session.settings import DEFAULT_INSTRUCTIONS
from tests.helpers.models import TURN_MODELS
from tests.helpers.realtime_harness import Session, pcm_b64, run, silence, user_text
from tests.helpers.scripted import Hold, ScriptedEngine, answer
from tests.helpers.synthetic_speech import speech

LIFECYCLE_AUDIO = [
    "response.created", "conversation.item.added", "response.output_item.added", "response.content_part.added",
    "response.output_audio_transcript.delta", "response.output_audio_transcript.delta",
    *["response.output_audio.delta"] * 6,  # two 250 ms pieces, each as 100 + 100 + 50 ms
    "response.output_audio.done", "response.output_audio_transcript.done", "response.content_part.done",
    "response.output_item.done", "conversation.item.done", "response.done",
]
FAILED_TAIL = ["error", "response.content_part.done", "response.output_item.done", "conversation.item.done", "response.done"]


def chats(engine: ScriptedEngine) -> list[ChatRequest]:
    return [r for r in engine.requests if isinstance(r, ChatRequest)]


def test_the_session_greets_then_updates_what_it_supports():
    async def go():
        async with Session() as s:
            await s.send({"type": "session.update", "session": {
                "type": "realtime", "instructions": "Be brief.", "tools": [], "tracing": "auto",
                "audio": {"input": {"transcription": {"model": "whisper-1"}, "turn_detection": {"type": "server_vad", "threshold": 0.7}},
                          "output": {"voice": "joe", "speed": 1.25}}}})
            return s.seen[:2], await s.until("session.updated")

    greeting, updated = run(go())
    assert [e["type"] for e in greeting] == ["session.created", "conversation.created"]
    assert greeting[0]["session"]["instructions"] == DEFAULT_INSTRUCTIONS
    session = updated["session"]
    assert session["instructions"] == "Be brief."
    assert "tools" not in session and "tracing" not in session
    assert session["audio"]["input"] == {
        "format": {"type": "audio/pcm", "rate": 24000},
        "turn_detection": {"type": "server_vad", "threshold": 0.7, "prefix_padding_ms": 300, "silence_duration_ms": 500,
                           "create_response": True, "interrupt_response": True}}
    assert session["audio"]["output"] == {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "joe", "speed": 1.25}


def test_append_commit_and_clear():
    async def go():
        async with Session() as s:
            empty = await s.error({"type": "input_audio_buffer.commit"})
            await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(silence(0.2))})
            await s.send({"type": "input_audio_buffer.clear"})
            await s.until("input_audio_buffer.cleared")
            after_clear = await s.error({"type": "input_audio_buffer.commit"})
            mark = len(s.seen)
            await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(silence(0.5))})
            await s.send({"type": "input_audio_buffer.commit"})
            done = await s.until("conversation.item.done")
            return empty, after_clear, s.seen[mark:], done

    empty, after_clear, committed, done = run(go())
    assert empty["code"] == after_clear["code"] == "input_audio_buffer_commit_empty"
    assert [e["type"] for e in committed] == ["input_audio_buffer.committed", "conversation.item.added", "conversation.item.done"]
    assert committed[0]["item_id"] == done["item"]["id"] and committed[0]["previous_item_id"] is None
    assert done["item"]["role"] == "user" and done["item"]["content"] == [{"type": "input_audio", "transcript": None}]


def test_a_response_runs_its_whole_lifecycle():
    engine = ScriptedEngine(chat=answer("Hello", " there.", audio_seconds=0.5))

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("Hi!"))
            await s.until("conversation.item.done")
            mark = len(s.seen)
            await s.send({"type": "response.create"})
            await s.until("response.done")
            return s.seen[mark:]

    events = run(go())
    assert [e["type"] for e in events] == LIFECYCLE_AUDIO
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["status_details"] is None
    assert done["usage"] == {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}
    item = done["output"][0]
    assert item["status"] == "completed" and item["content"] == [{"type": "output_audio", "transcript": "Hello there."}]
    assert events[-4]["part"] == {"type": "audio", "transcript": "Hello there."}
    deltas = [base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta"]
    assert [len(d) // 2 for d in deltas] == [2400, 2400, 1200] * 2
    assert {e["response_id"] for e in events if "response_id" in e} == {done["id"]}
    (request,) = chats(engine)
    assert [(m.role, m.text) for m in request.messages] == [("system", DEFAULT_INSTRUCTIONS), ("user", "Hi!")]
    assert (request.max_tokens, request.temperature, request.modalities, request.voice) == (DEFAULT_MAX_TOKENS, 0.0, ("text", "audio"), "joe")


def test_a_text_response_with_its_own_instructions_and_limit():
    engine = ScriptedEngine(chat=answer("Four."))

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("Two plus two?"))
            mark = len(s.seen)
            await s.send({"type": "response.create", "response": {"output_modalities": ["text"], "instructions": "Be exact.",
                                                                   "max_output_tokens": 20}})
            await s.until("response.done")
            return [e for e in s.seen[mark:] if e["type"].startswith("response.output_text")]

    text_events = run(go())
    assert [(e["type"], e.get("delta", e.get("text"))) for e in text_events] == [
        ("response.output_text.delta", "Four."), ("response.output_text.done", "Four.")]
    (request,) = chats(engine)
    assert request.messages[0].text == "Be exact." and request.max_tokens == 20 and request.modalities == ("text",)


def test_the_engine_hears_committed_audio_and_the_transcript_comes_first():
    engine = ScriptedEngine(chat=[TranscriptDelta("what time is it"), *answer("Noon.")])

    clip = speech()
    clip = clip[:np.flatnonzero(np.abs(clip) > 0.01)[-1]]  # no pause at the end: nothing is heard early

    async def go():
        async with Session(engine) as s:
            await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(clip)})
            await s.send({"type": "input_audio_buffer.commit"})
            committed = await s.until("input_audio_buffer.committed")
            mark = len(s.seen)
            await s.send({"type": "response.create"})
            await s.until("response.done")
            await s.send({"type": "conversation.item.retrieve", "item_id": committed["item_id"]})
            return committed, s.kinds(mark), await s.until("conversation.item.retrieved")

    committed, kinds, retrieved = run(go())
    assert kinds.index("conversation.item.input_audio_transcription.completed") < kinds.index("response.output_audio_transcript.delta")
    assert retrieved["item"]["content"][0]["transcript"] == "what time is it"
    (request,) = chats(engine)
    assert isinstance(request.messages[1].parts[0], AudioPart) and request.messages[1].parts[0].format == "wav"


def test_cancel_ends_the_running_response_as_cancelled():
    hold = Hold()
    engine = ScriptedEngine(chat=[TextDelta("Once upon"), hold, *answer(" a time.")])

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("A story?"))
            await s.send({"type": "response.create"})
            await s.until("response.output_audio_transcript.delta")
            await hold.reached.wait()
            mark = len(s.seen)
            await s.send({"type": "response.cancel"})
            done = await s.until("response.done")
            kinds = s.kinds(mark)
            return kinds, done, await s.error({"type": "response.cancel"})

    kinds, done, again = run(go())
    assert kinds == ["response.content_part.done", "response.output_item.done", "conversation.item.done", "response.done"]
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert done["response"]["output"][0]["status"] == "incomplete"
    assert done["response"]["output"][0]["content"][0]["transcript"] == "Once upon"
    assert again["code"] == "response_cancel_not_active"


def test_cancel_naming_another_response_is_refused_and_cancels_nothing():
    hold = Hold()
    engine = ScriptedEngine(chat=[TextDelta("Once"), hold, *answer(" upon a time.")])

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("A story?"))
            await s.send({"type": "response.create"})
            created = await s.until("response.created")
            await hold.reached.wait()
            wrong = await s.error({"type": "response.cancel", "response_id": "resp_someone_else"})
            hold.open()
            return created, wrong, await s.until("response.done")

    created, wrong, done = run(go())
    assert wrong["code"] == "response_not_found" and wrong["param"] == "response_id"
    assert done["response"]["id"] == created["response"]["id"] and done["response"]["status"] == "completed"


def test_cancel_naming_the_running_response_cancels_it():
    hold = Hold()
    engine = ScriptedEngine(chat=[hold, *answer("Never.")])

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("Hi"))
            await s.send({"type": "response.create"})
            created = await s.until("response.created")
            await hold.reached.wait()
            await s.send({"type": "response.cancel", "response_id": created["response"]["id"]})
            return await s.until("response.done")

    assert run(go())["response"]["status"] == "cancelled"


def test_a_new_response_replaces_the_running_one():
    hold = Hold()
    engine = ScriptedEngine(chat=lambda req: [hold, *answer("First.")] if len(chats(engine)) == 1 else answer("Second."))

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("Hi"))
            await s.send({"type": "response.create"})
            await hold.reached.wait()
            await s.send({"type": "response.create"})
            first = await s.until("response.done")
            second = await s.until("response.done")
            return first, second, s.kinds()

    first, second, kinds = run(go())
    assert first["response"]["status"] == "cancelled" and first["response"]["status_details"]["reason"] == "client_cancelled"
    assert second["response"]["status"] == "completed"
    assert second["response"]["output"][0]["content"][0]["transcript"] == "Second."
    assert kinds.count("response.created") == 2


def test_a_response_cancelled_before_it_ran_still_ends_with_response_done():
    async def go():
        async with Session(ScriptedEngine(chat=answer("Hi."))) as s:
            await s.send(user_text("Hi"))
            session = s.transport.session
            await asyncio.gather(session.handle('{"type": "response.create"}'), session.handle('{"type": "response.cancel"}'))
            done = await s.until("response.done")
            return done, s.kinds().count("response.done")

    done, count = run(go())
    assert done["response"]["status"] == "cancelled" and count == 1


def test_truncate_keeps_what_was_heard():
    engine = ScriptedEngine(chat=answer("One two three.", " Four five six.", audio_seconds=1.0))

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("Count."))
            await s.send({"type": "response.create"})
            item = (await s.until("response.done"))["response"]["output"][0]
            too_far = await s.error({"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0, "audio_end_ms": 1200})
            await s.send({"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0, "audio_end_ms": 750})
            truncated = await s.until("conversation.item.truncated")
            await s.send({"type": "conversation.item.retrieve", "item_id": item["id"]})
            return too_far, truncated, (await s.until("conversation.item.retrieved"))["item"]

    too_far, truncated, item = run(go())
    assert too_far["param"] == "audio_end_ms" and too_far["code"] == "invalid_value"
    assert truncated["audio_end_ms"] == 750
    assert item["content"][0]["transcript"] == "One two three. Four"


@pytest.mark.parametrize("failure", [
    OmniError("the talker failed"), ValueError("bad value"), MemoryError("bad_alloc"),
    UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), RuntimeError(),
], ids=lambda e: type(e).__name__)
def test_an_engine_failure_mid_response_ends_it_failed_and_the_session_lives_on(failure):
    engine = ScriptedEngine(chat=lambda req: [TextDelta("Hel"), failure] if len(chats(engine)) == 1 else answer("Hello."))

    async def go():
        async with Session(engine) as s:
            await s.send(user_text("Hi"))
            await s.send({"type": "response.create"})
            await s.until("response.output_audio_transcript.delta")
            mark = len(s.seen)
            done = await s.until("response.done")
            tail = s.seen[mark:]
            await s.send({"type": "response.create"})
            return tail, done, await s.until("response.done")

    tail, done, after = run(go())
    assert [e["type"] for e in tail] == FAILED_TAIL
    assert tail[0]["error"]["type"] == "server_error" and tail[0]["error"]["code"] == "engine_error"
    assert tail[0]["error"]["message"] == (str(failure) or type(failure).__name__)
    assert done["response"]["status"] == "failed"
    assert done["response"]["status_details"]["error"]["message"] == tail[0]["error"]["message"]
    assert after["response"]["status"] == "completed"


def refuses_over(limit: int):
    """A thinker with a tiny context: it refuses any prompt of more than `limit` messages."""
    def script(req: ChatRequest):
        if len(req.messages) > limit:
            return [ContextWindowError(f"the thinker refused the prompt: Requested tokens exceed context window ({len(req.messages)})")]
        return answer(f"I remember {len(req.messages) - 1}.")
    return script


def test_a_long_conversation_leaves_out_its_oldest_turns_to_fit_the_context():
    engine = ScriptedEngine(chat=refuses_over(4))

    async def go():
        async with Session(engine) as s:
            for n in range(6):
                await s.send(user_text(f"turn {n}"))
            await s.send({"type": "response.create"})
            first = await s.until("response.done")
            await s.send(user_text("turn 6"))
            await s.send({"type": "response.create"})
            second = await s.until("response.done")
            return first, second, s.kinds()

    first, second, kinds = run(go())
    assert first["response"]["status"] == second["response"]["status"] == "completed"
    assert "error" not in kinds
    sent = [[m.text for m in r.messages] for r in chats(engine)]
    # 7 messages refused, forget 1 -> 6 refused, forget 2 more -> 4 fit; the next turn starts from
    # there (answer + new turn: 6) and forgets 1, then 2 more.
    assert [len(m) for m in sent] == [7, 6, 4, 6, 5, 3]
    assert sent[2] == [DEFAULT_INSTRUCTIONS, "turn 3", "turn 4", "turn 5"]
    assert sent[5] == [DEFAULT_INSTRUCTIONS, "I remember 3.", "turn 6"]


def test_instructions_over_the_context_end_the_response_failed():
    engine = ScriptedEngine(chat=refuses_over(0))

    async def go():
        async with Session(engine) as s:
            await s.send({"type": "session.update", "session": {"type": "realtime", "instructions": "x " * 20000}})
            await s.send(user_text("one"))
            await s.send(user_text("two"))
            await s.send({"type": "response.create"})
            done = await s.until("response.done")
            return done, [e for e in s.seen if e["type"] == "error"]

    done, errors = run(go())
    assert done["response"]["status"] == "failed"
    assert len(errors) == 1 and "context window" in errors[0]["error"]["message"]
    assert [len(r.messages) for r in chats(engine)] == [3, 2]


OUT_OF_RANGE = [
    ({"audio": {"output": {"speed": -1}}}, "session.audio.output.speed"),
    ({"audio": {"output": {"speed": 0.01}}}, "session.audio.output.speed"),
    ({"audio": {"output": {"speed": 100}}}, "session.audio.output.speed"),
    ({"max_output_tokens": -5}, "session.max_output_tokens"),
    ({"max_output_tokens": 0}, "session.max_output_tokens"),
    ({"max_output_tokens": 5000}, "session.max_output_tokens"),
    ({"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 1.5}}}}, "session.audio.input.turn_detection.threshold"),
    ({"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": -0.1}}}}, "session.audio.input.turn_detection.threshold"),
    ({"audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": -1}}}},
     "session.audio.input.turn_detection.silence_duration_ms"),
    ({"audio": {"input": {"turn_detection": {"type": "server_vad", "prefix_padding_ms": -300}}}},
     "session.audio.input.turn_detection.prefix_padding_ms"),
]


def test_out_of_range_values_are_refused_and_change_nothing():
    async def go():
        async with Session() as s:
            errors = [await s.error({"type": "session.update", "session": {"type": "realtime", **update}}) for update, _ in OUT_OF_RANGE]
            errors.append(await s.error({"type": "response.create", "response": {"max_output_tokens": -5}}))
            await s.send({"type": "session.update", "session": {"type": "realtime", "audio": {"output": {"speed": 1.5}}}})
            return errors, (await s.until("session.updated"))["session"]

    errors, session = run(go())
    assert [(e["code"], e["param"]) for e in errors] == [("invalid_value", p) for _, p in OUT_OF_RANGE] + [
        ("invalid_value", "response.max_output_tokens")]
    assert session["max_output_tokens"] == "inf" and session["audio"]["input"]["turn_detection"] is None
    assert session["audio"]["output"]["speed"] == 1.5


def test_hostile_shapes_are_invalid_events():
    async def go():
        async with Session() as s:
            deep_json = await s.error('{"type": "session.update", "session": ' + "[" * 100000 + "]" * 100000 + "}")
            nested = {"type": "realtime"}
            for _ in range(40):
                nested = {"x": nested}
            deep_dict = await s.error({"type": "session.update", "session": nested})
            surrogate = await s.error('{"type": "conversation.item.create", "item": {"type": "message", "role": "user", '
                                      '"content": [{"type": "input_text", "text": "hi \\ud800"}]}}')
            unknown = await s.error({"type": "output_audio_buffer.clear"})
            return deep_json, deep_dict, surrogate, unknown

    deep_json, deep_dict, surrogate, unknown = run(go())
    assert deep_json["code"] == deep_dict["code"] == "invalid_event"
    assert deep_json["type"] == "invalid_request_error"
    assert surrogate["code"] == "invalid_event" and surrogate["param"] == "item.content.0.text"
    assert unknown["code"] == "unknown_event"


def test_server_vad_commits_the_turn_answers_and_a_new_turn_interrupts():
    hold = Hold()
    engine = ScriptedEngine(chat=lambda req: answer("It is noon.", audio_seconds=0.3) if len(chats(engine)) == 1 else [hold, *answer("x")])

    async def send_audio(s: Session, samples: np.ndarray) -> None:
        for start in range(0, len(samples), 2400):
            await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(samples[start:start + 2400])})

    async def go():
        async with Session(engine) as s:
            await s.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": {
                "type": "server_vad", "silence_duration_ms": 300}}}}})
            await s.until("session.updated")
            mark = len(s.seen)
            await send_audio(s, np.concatenate([silence(1.0), speech(), silence(0.6)]))
            first = await s.until("response.done")
            turn = [e for e in s.seen[mark:] if e["type"].startswith(("input_audio_buffer", "response.created", "response.done"))]
            await send_audio(s, np.concatenate([speech(), silence(0.6)]))
            await hold.reached.wait()
            await send_audio(s, speech())
            interrupted = await s.until("response.done")
            return turn, first, interrupted

    turn, first, interrupted = run(go())
    assert [e["type"] for e in turn] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                                         "input_audio_buffer.committed", "response.created", "response.done"]
    started, stopped, committed = turn[:3]
    assert 500 <= started["audio_start_ms"] <= 1000 and stopped["audio_end_ms"] > started["audio_start_ms"] + 400
    assert started["item_id"] == stopped["item_id"] == committed["item_id"]
    assert first["response"]["status"] == "completed"
    assert interrupted["response"]["status"] == "cancelled"
    assert interrupted["response"]["status_details"]["reason"] == "turn_detected"
    user = chats(engine)[0].messages[-1]
    assert user.role == "user" and isinstance(user.parts[0], (AudioPart, TextPart))


def test_a_large_append_is_decoded_off_the_event_loop():
    """While a 1 MiB append is being decoded, another session is served: the work is not on the loop."""
    big = pcm_b64(np.random.default_rng(0).uniform(-0.1, 0.1, 512 * 1024).astype(np.float32))

    async def go():
        async with Session() as a, Session() as b:
            appending = asyncio.create_task(a.send({"type": "input_audio_buffer.append", "audio": big}))
            await asyncio.sleep(0)  # the append starts
            await b.send({"type": "session.update", "session": {"type": "realtime", "instructions": "hi"}})
            await b.until("session.updated")
            served_during = not appending.done()
            await appending
            await a.send({"type": "input_audio_buffer.commit"})
            return served_during, await a.until("input_audio_buffer.committed")

    served_during, committed = run(go())
    assert served_during
    assert committed["item_id"].startswith("item_")


def test_a_served_session_takes_voice_names_only_and_a_local_one_takes_paths_too():
    from omnicli.session.turn_based import RealtimeSession
    from omnicli.turns.scheduler import AnswerScheduler

    def voice_update(voice: str) -> dict:
        return {"type": "session.update", "session": {"type": "realtime", "audio": {"output": {"voice": voice}}}}

    async def served() -> list[dict]:
        sent: list[dict] = []

        async def send(event: dict) -> None:
            sent.append(event)

        session = RealtimeSession(ScriptedEngine(), send, scheduler=AnswerScheduler(), models=TURN_MODELS)
        for voice in ("~/x.onnx", "/etc/voice.onnx", "nobody", "joe"):
            await session.handle(json.dumps(voice_update(voice)))
        return sent

    sent = run(served())
    errors = [e["error"] for e in sent if e["type"] == "error"]
    assert [(e["code"], e["param"]) for e in errors] == [("invalid_value", "session.audio.output.voice")] * 3
    assert "not a path" in errors[0]["message"] and "~" not in errors[0]["message"]
    assert "unknown voice 'nobody'; voices: joe" in errors[2]["message"]
    assert [e["session"]["audio"]["output"]["voice"] for e in sent if e["type"] == "session.updated"] == ["joe"]

    async def local() -> dict:
        async with Session() as s:  # LocalTransport: omni talk in process
            await s.send(voice_update("/voices/mine.onnx"))
            return await s.until("session.updated")

    assert run(local())["session"]["audio"]["output"]["voice"] == "/voices/mine.onnx"
