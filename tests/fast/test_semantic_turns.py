"""Semantic turn detection: `turn_detection: semantic_vad` in the realtime session (accepted,
echoed, refused) and the TurnDetector's semantic mode, hearing synthetic speech through the
stand-in models (tests/helpers/models.py: a falling last syllable sounds finished; some last words
read unfinished). The real models on real speech: tests/acceptance/test_turn_models.py.
Assertions are on which turn ends happen and their order."""

import asyncio
import hashlib
from dataclasses import replace

import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import OmniError
from omnicli.turns import smart_turn
from omnicli.turns.models import TurnModels
from omnicli.turns.modes import SILENCE_RULE_MS
from omnicli.turns.silero import CHUNK, VAD_RATE
from omnicli.turns.smart_turn import SmartTurn
from omnicli.turns.text_turn import Reading
from omnicli.turns.vad import SEMANTIC_PAUSE_MS, SEMANTIC_REASK_MS, TurnDetector
from tests.helpers.models import TURN_MODELS, LastWordCheck, LoudnessVAD, SurerAfterSilence
from tests.helpers.realtime_harness import Session, pcm_b64, run, silence
from tests.helpers.scripted import ScriptedEngine, SlowToBegin, answer
from tests.helpers.synthetic_speech import QUESTION, UNFINISHED, paused, say, speech, spoken

SEMANTIC = {"type": "semantic_vad", "eagerness": "auto", "create_response": True, "interrupt_response": True}


RULE_END_MS = -(-SILENCE_RULE_MS // (CHUNK * 1000 // VAD_RATE)) * (CHUNK * 1000 // VAD_RATE)
"""The silence after which the silence rule ends a turn, on the VAD's 32 ms grid (512 ms)."""


def update(detection) -> dict:
    return {"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": detection}}}}


def feed(detector: TurnDetector, audio: np.ndarray, step: int = 960) -> list:
    """Events from `audio` fed 40 ms at a time, as a microphone would."""
    return [event for start in range(0, len(audio), step) for event in detector.feed(audio[start:start + step])]


# ---- the session contract -------------------------------------------------------------------

def test_semantic_vad_is_accepted_and_echoed_with_its_defaults():
    async def go():
        async with Session() as s:
            updates = []
            for detection in ({"type": "semantic_vad"}, {"type": "semantic_vad", "eagerness": "low", "create_response": False},
                              {"type": "semantic_vad", "eagerness": "high", "threshold": 0.3, "silence_duration_ms": 100},
                              {"type": "server_vad"}, None):
                await s.send(update(detection))
                updates.append((await s.until("session.updated"))["session"]["audio"]["input"]["turn_detection"])
            return updates

    default, low, high, server, off = run(go())
    assert default == SEMANTIC
    assert low == {**SEMANTIC, "eagerness": "low", "create_response": False}
    assert high == {**SEMANTIC, "eagerness": "high"}  # server_vad's fields have no meaning here
    assert server["type"] == "server_vad" and server["silence_duration_ms"] == 500 and "eagerness" not in server
    assert off is None


@pytest.mark.parametrize("detection, param", [
    ({"type": "semantic_vad", "eagerness": "eager"}, "session.audio.input.turn_detection.eagerness"),
    ({"type": "semantic_vad", "eagerness": 3}, "session.audio.input.turn_detection.eagerness"),
    ({"type": "smart_vad"}, "session.audio.input.turn_detection.type"),
])
def test_bad_turn_detection_is_an_error_event_and_the_session_lives_on(detection, param):
    async def go():
        async with Session() as s:
            await s.send(update({"type": "semantic_vad", "eagerness": "high"}))
            await s.until("session.updated")
            error = await s.error(update(detection))
            await s.send({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}})
            return error, (await s.until("session.updated"))["session"]

    error, session = run(go())
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_value", param)
    assert session["instructions"] == "Be brief."
    assert session["audio"]["input"]["turn_detection"] == {**SEMANTIC, "eagerness": "high"}


def test_semantic_vad_ends_a_spoken_question_commits_and_answers():
    engine = ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.3))

    async def go():
        async with Session(engine) as s:
            await s.send(update({"type": "semantic_vad"}))
            await s.until("session.updated")
            mark = len(s.seen)
            audio = np.concatenate([silence(1.0), speech(), silence(2.5)])
            for start in range(0, len(audio), 2400):
                await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(audio[start:start + 2400])})
            done = await s.until("response.done")
            return [e for e in s.seen[mark:] if e["type"].startswith(("input_audio_buffer", "response.created", "response.done"))], done

    turn, done = run(go())
    assert [e["type"] for e in turn] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                                         "input_audio_buffer.committed", "response.created", "response.done"]
    started, stopped, committed = turn[:3]
    assert started["item_id"] == stopped["item_id"] == committed["item_id"]
    assert 500 <= started["audio_start_ms"] < stopped["audio_end_ms"] <= 1000 + len(speech()) * 1000 // SPEECH_RATE + 32  # (a VAD chunk)
    assert done["response"]["status"] == "completed"


@pytest.mark.parametrize("pause_s", [0.4, 0.6])
def test_semantic_vad_does_not_cut_a_sentence_at_a_pause_where_server_vad_does(pause_s):
    async def turns(detection: dict) -> list[str]:
        async with Session() as s:
            await s.send(update(detection))
            await s.until("session.updated")
            mark = len(s.seen)
            audio = paused(*UNFINISHED, pause_s=pause_s)
            for start in range(0, len(audio), 4800):
                await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(audio[start:start + 4800])})
            await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})  # all appends carried out
            if detection["type"] == "semantic_vad":  # a turn end is decided beside the appends, or after them
                if "input_audio_buffer.committed" not in s.kinds(mark):
                    await s.until("input_audio_buffer.committed")
                await asyncio.sleep(0.5)
                await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})  # any decided since
            return [e["type"] for e in s.seen[mark:] if e["type"].startswith("input_audio_buffer")]

    one_turn = ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped", "input_audio_buffer.committed"]
    assert run(turns({"type": "semantic_vad", "create_response": False})) == one_turn
    assert run(turns({"type": "server_vad", "silence_duration_ms": 300, "create_response": False})) == one_turn * 2


def test_a_model_file_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    wrong = tmp_path / smart_turn.MODEL_FILE
    wrong.write_bytes(b"not a model")
    monkeypatch.setattr(smart_turn, "model_path", lambda: wrong)
    fresh = TurnModels(silero=LoudnessVAD(), smart_turn=SmartTurn(), words=LastWordCheck())  # the real loader

    async def go():
        async with Session(models=fresh) as s:
            error = await s.error(update({"type": "semantic_vad"}))
            await s.send(update({"type": "server_vad"}))
            return error, (await s.until("session.updated"))["session"]["audio"]["input"]["turn_detection"]["type"]

    error, kind = run(go())
    assert error["code"] == "unsupported_feature" and error["param"] == "session.audio.input.turn_detection.type"
    assert "not the Smart Turn v3.2 model" in error["message"]
    assert kind == "server_vad"
    with pytest.raises(OmniError, match="not the Smart Turn"):
        TurnDetector(SPEECH_RATE, fresh, semantic=True)


def test_the_installed_model_is_the_pinned_one():
    assert hashlib.sha256(smart_turn.model_path().read_bytes()).hexdigest() == smart_turn.MODEL_SHA256


# ---- the detector --------------------------------------------------------------------------

def test_a_finished_question_ends_after_the_short_pause_and_the_silence_rule_waits_longer():
    audio = spoken(QUESTION)
    semantic, plain = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True), TurnDetector(SPEECH_RATE, TURN_MODELS, silence_ms=500)
    ends = [[e for e in feed(d, audio) if e.kind == "stopped"] for d in (semantic, plain)]
    (by_meaning,), (by_silence,) = ends
    assert by_meaning.probability is not None and by_meaning.probability >= 0.5
    assert semantic.pause_ms <= by_meaning.silence_ms < by_silence.silence_ms == 500
    assert abs(by_meaning.ms - by_silence.ms) < 32  # the same end of speech (to a VAD chunk), heard sooner
    assert semantic.calls == 1


def test_an_unfinished_pause_goes_on_and_the_turn_ends_once_at_the_end():
    audio = paused(*UNFINISHED, pause_s=0.5, tail_s=3.5)
    plain = [e.kind for e in feed(TurnDetector(SPEECH_RATE, TURN_MODELS, silence_ms=300), audio)]
    assert plain == ["started", "stopped", "started", "stopped"]
    for eagerness in ("low", "auto", "high"):
        detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, eagerness=eagerness)
        events = feed(detector, audio)
        assert [e.kind for e in events] == ["started", "stopped"], eagerness
        assert detector.calls >= 2  # asked at the pause inside and at the end
        end = events[-1]
        assert (end.probability or 0) >= 0.5 or end.silence_ms >= detector.max_silence_ms


def test_the_ceiling_ends_a_turn_the_model_never_calls_finished():
    """Smart Turn is asked again as the silence grows; low eagerness waits for certainty it
    never reaches here, and ends the turn at its ceiling. High eagerness ends it sooner."""
    audio = spoken("So I was thinking that maybe", tail_s=3.5)
    ends = {}
    for eagerness in ("high", "low"):
        detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, eagerness=eagerness)
        (_, end) = feed(detector, audio)
        assert end.kind == "stopped"
        ends[eagerness] = (end, detector)
    end, detector = ends["low"]
    assert end.probability is None and end.silence_ms >= detector.max_silence_ms and detector.calls > 2
    assert ends["high"][0].silence_ms < end.silence_ms


FOLLOW_UP = "What is the capital of Spain?"
"""Said after QUESTION and a 400 ms pause: Smart Turn calls both finished at the first ask."""


def test_a_confirmed_stop_stands_and_the_audio_held_behind_it_is_heard_next():
    detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, confirm_stops=True)
    audio = paused(QUESTION, FOLLOW_UP, pause_s=0.4)
    started, stop = detector.feed(audio)  # all of it at once: what follows the stop waits
    assert (started.kind, stop.kind, stop.pending, stop.probability) == ("started", "stopped", True, None)
    assert stop.silence_ms == detector.pause_ms and detector.calls == 1
    assert detector.resumed  # the follow-up is held behind the stop: the voice came back
    assert detector.feed(silence(0.1)) == []  # held too
    probability = detector.judge()
    settled, again, second = detector.confirm(True, probability)
    assert settled == replace(stop, probability=probability, pending=False)
    assert (again.kind, second.kind, second.pending) == ("started", "stopped", True)
    assert again.ms > stop.ms
    assert detector.confirm(True) == [replace(second, pending=False)]
    with pytest.raises(RuntimeError, match="pending"):
        detector.confirm(True)


def test_a_stop_settled_as_maybe_ends_the_turn_only_once_the_pause_lasts_so_long():
    detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, confirm_stops=True)
    _, stop = detector.feed(spoken(QUESTION, tail_s=0.3))
    assert stop.pending
    assert detector.confirm(False, 0.95, ends_after_ms=500) == [] and detector.speaking  # 300 ms heard: too short
    (end,) = feed(detector, silence(0.3))
    assert (end.kind, end.pending, end.probability, end.ms) == ("stopped", False, 0.95, stop.ms)
    assert 500 <= end.silence_ms < 500 + 32  # (a VAD chunk)

    detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, confirm_stops=True)
    _, stop = detector.feed(paused(QUESTION, FOLLOW_UP, pause_s=0.4, tail_s=0.3))
    (again,) = detector.confirm(False, 0.95, ends_after_ms=500)  # the voice came back: no end at the pause
    assert again.pending and again.ms > stop.ms  # the follow-up's own pause, asked about afresh


def test_the_caller_asks_smart_turn_about_a_pending_stop_when_it_suits_it_and_hears_the_same_verdict():
    """A server asks when the answer begun in the pause is ready (two jobs at once slow both on two
    cores); the audio judged is the speech up to the first ask, as when asked at once. A pause
    Smart Turn calls unfinished is pending too: the caller hears so and the turn goes on."""
    for audio in (spoken(QUESTION, tail_s=0.3), spoken(UNFINISHED[0], tail_s=0.3)):
        at_once = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True)
        feed(at_once, audio)
        later = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, confirm_stops=True)
        (_, stop) = later.feed(audio)
        assert stop.pending and later.calls == at_once.calls == 1
        assert later.judge() == at_once.last_probability
    assert at_once.last_probability < 0.5  # the unfinished one: no stop where asked at once
    assert later.confirm(False) == [] and later.speaking


def test_the_voice_comes_back_behind_a_pending_stop_only_as_long_as_a_turn_starts():
    detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, confirm_stops=True)
    _, stop = detector.feed(spoken(QUESTION, tail_s=0.3))
    assert stop.pending and not detector.resumed
    detector.feed(np.concatenate([say(FOLLOW_UP)[:int(0.05 * SPEECH_RATE)], silence(0.2)]))  # a click of voice
    assert not detector.resumed and not detector.resuming
    onset = int(0.08 * SPEECH_RATE)
    detector.feed(say(FOLLOW_UP)[:onset])
    assert detector.resuming and not detector.resumed  # too short yet to tell
    detector.feed(say(FOLLOW_UP)[onset:])
    assert detector.resumed and not detector.resuming


def test_an_overruled_stop_goes_on_into_one_turn_and_only_first_asks_wait_for_a_second_opinion():
    detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, confirm_stops=True)
    _, stop = detector.feed(paused(QUESTION, FOLLOW_UP, pause_s=0.4, tail_s=0.3))
    (end,) = detector.confirm(False)  # Smart Turn or the words said unfinished: the pause was inside the turn
    assert end.kind == "stopped" and end.pending and end.ms > stop.ms
    assert detector.confirm(False) == []
    (late,) = feed(detector, silence(1.0))  # asked again before the silence rule's end: that answer is final
    assert late.kind == "stopped" and not late.pending and late.ms == end.ms
    assert late.silence_ms == RULE_END_MS
    plain = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True)
    assert [e.pending for e in feed(plain, paused(QUESTION, FOLLOW_UP, pause_s=0.4))] == [False] * 4


def test_a_pause_smart_turn_was_unsure_of_ends_where_the_silence_rule_would_once_it_sounds_finished():
    models = TurnModels(silero=LoudnessVAD(), smart_turn=SurerAfterSilence(), words=LastWordCheck())
    semantic, server = TurnDetector(SPEECH_RATE, models, semantic=True), TurnDetector(SPEECH_RATE, models)
    _, stop = feed(semantic, spoken(QUESTION, tail_s=1.5))
    _, rule = feed(server, spoken(QUESTION, tail_s=1.5))
    assert semantic.calls == 2 and stop.probability == pytest.approx(0.98)  # unsure at 128 ms, sure before 500
    assert stop.silence_ms == RULE_END_MS and stop.ms + stop.silence_ms == rule.ms + rule.silence_ms
    again = TurnDetector(SPEECH_RATE, models, semantic=True)
    events = feed(again, paused(QUESTION, QUESTION, pause_s=0.47, tail_s=1.5))
    assert [e.kind for e in events] == ["started", "stopped"]  # the voice came back before 500 ms: one turn


def test_a_pause_the_words_called_unfinished_is_asked_about_again_only_as_before():
    """Smart Turn called the pause finished and the words did not: hearing it again before the
    silence rule's end would only say the same, so the turn goes on to the next ask."""
    detector = TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, confirm_stops=True)
    _, stop = detector.feed(spoken(QUESTION, tail_s=0.3))
    assert stop.pending and detector.confirm(False, 0.98) == []
    (late,) = feed(detector, silence(1.0))
    assert late.silence_ms >= SEMANTIC_PAUSE_MS + SEMANTIC_REASK_MS and detector.calls == 2


async def _decided(s: Session) -> None:
    """Until the pause's turn end is decided (Smart Turn, then the words: ~0.1 s alone, longer on a
    busy machine), however long that takes."""
    await asyncio.sleep(0.3)
    turn_end = s.transport.session.input.turn_end
    for _ in range(1000):
        if not turn_end.deciding:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the turn end was not decided in 10 s")


def _at_the_pause(audio: np.ndarray) -> int:
    """Where FOLLOW_UP begins in `paused(QUESTION, FOLLOW_UP, pause_s=0.4)`."""
    return int(1.4 * SPEECH_RATE) + len(say(QUESTION))


def test_semantic_vad_keeps_a_turn_whose_words_read_unfinished_and_ends_one_that_reads_finished():
    """The same audio, a question, a 400 ms pause and a follow-up (Smart Turn calls the pause the end
    of the turn), the follow-up sent once the pause's turn end is decided; the scripted transcript
    of what was heard decides."""
    async def committed(transcript: str, eagerness: str = "auto") -> int:
        async with Session(ScriptedEngine(transcripts=[transcript])) as s:
            await s.send(update({"type": "semantic_vad", "eagerness": eagerness, "create_response": False}))
            await s.until("session.updated")
            mark = len(s.seen)
            audio = paused(QUESTION, FOLLOW_UP, pause_s=0.4)
            await s.stream(audio[:_at_the_pause(audio)])
            await _decided(s)
            await s.stream(audio[_at_the_pause(audio):])
            await _decided(s)  # the follow-up's own pause too
            await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})  # all events carried out
            return [e["type"] for e in s.seen[mark:]].count("input_audio_buffer.committed")

    assert run(committed("What is the capital of")) == 1
    assert run(committed("What is the capital of France?")) == 2
    assert run(committed("What is the capital of", "high")) == 2  # high: the soonest turn end, audio alone


@pytest.mark.parametrize("pause_s, turns", [(0.4, 1), (0.6, 2)])
def test_words_that_read_only_maybe_finished_end_a_semantic_turn_where_the_silence_rule_would(pause_s, turns):
    """Smart Turn calls the pause the end and the answer is begun at once, but the words heard may
    be a sentence's first half ("Remember to save your work | before..."): the turn ends only once
    the pause lasts server_vad's 500 ms, so a 400 ms pause is kept inside the turn (as server_vad
    keeps it) and a 600 ms one ends it, at 500 ms of silence. The pause is judged 300 ms into it."""
    async def committed() -> tuple[int, list[dict]]:
        async with Session(ScriptedEngine(transcripts=["Remember to save your work"])) as s:
            await s.send(update({"type": "semantic_vad", "eagerness": "auto", "create_response": False}))
            await s.until("session.updated")
            mark = len(s.seen)
            audio = paused(QUESTION, FOLLOW_UP, pause_s=pause_s)
            judged = int(1.3 * SPEECH_RATE) + len(say(QUESTION))
            await s.stream(audio[:judged])
            await _decided(s)
            await s.stream(audio[judged:])
            await _decided(s)
            await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})  # all events carried out
            stops = [e for e in s.seen[mark:] if e["type"] == "input_audio_buffer.speech_stopped"]
            return [e["type"] for e in s.seen[mark:]].count("input_audio_buffer.committed"), stops

    count, stops = run(committed())
    assert count == len(stops) == turns
    if turns == 2:  # the first stop is where the speech ended; it was decided 500 ms into the pause
        assert abs(stops[0]["audio_end_ms"] - (1000 + len(say(QUESTION)) * 1000 // SPEECH_RATE)) <= 96


def test_a_semantic_turn_end_waits_for_the_answer_begun_on_its_words():
    """It could not be played any sooner: the commit comes once the answer's first piece is ready."""
    heard = "What is the capital of France?"

    async def go():
        engine = SlowToBegin(0.6, transcripts=[heard])
        async with Session(engine) as s:
            engine.watch = s.seen
            await s.send(update({"type": "semantic_vad", "eagerness": "auto", "create_response": False}))
            await s.until("session.updated")
            await s.stream(spoken(QUESTION, tail_s=1.0))
            await s.until("input_audio_buffer.committed")
            return engine

    engine = run(go())
    assert engine.begun == [heard] and engine.began_answers == [True]
    assert engine.committed_when_begun == [0]


def test_an_answer_that_never_gets_begun_holds_a_semantic_turn_end_up_for_a_second_at_most():
    heard = "What is the capital of France?"

    async def go():
        engine = SlowToBegin(60.0, transcripts=[heard])
        async with Session(engine) as s:
            await s.send(update({"type": "semantic_vad", "eagerness": "auto", "create_response": False}))
            await s.until("session.updated")
            await s.stream(spoken(QUESTION, tail_s=1.0))
            return await asyncio.wait_for(s.until("input_audio_buffer.committed"), 5.0), engine

    committed, engine = run(go())
    assert committed["item_id"] and engine.began_answers == [True] and engine.begun == []


def test_the_voice_coming_back_before_a_turn_end_is_decided_keeps_the_sentence_whole():
    """A 400 ms pause Smart Turn calls the end, words that read finished, but the follow-up comes
    while the answer to the first half is still being begun: one turn, not two, and the answer
    begun on the half is called off."""
    async def go():
        engine = SlowToBegin(1.0, transcripts=["What is the capital of France?", "What is the capital of France? What is the capital of Spain?"])
        async with Session(engine) as s:
            engine.watch = s.seen
            await s.send(update({"type": "semantic_vad", "eagerness": "auto", "create_response": False}))
            await s.until("session.updated")
            mark = len(s.seen)
            await s.stream(paused(QUESTION, FOLLOW_UP, pause_s=0.4, tail_s=1.0))
            committed = await s.until("input_audio_buffer.committed")
            await asyncio.sleep(0.5)
            await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})  # all events carried out
            return engine, committed, s.kinds(mark)

    engine, committed, kinds = run(go())
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("input_audio_buffer.speech_stopped") == 1
    assert kinds.count("input_audio_buffer.speech_started") == 1
    assert engine.begun == ["What is the capital of France? What is the capital of Spain?"]  # the half's was called off
    assert len(engine.prepared) == 2


def test_a_turn_end_decided_as_the_voice_starts_again_waits_to_tell_it_from_a_click(monkeypatch):
    """The answer to the question is begun, Smart Turn and the words call the pause the end, but the
    audio held since ends in voice too short yet to count (80 ms): the decision waits for the next
    appends, which show the voice coming back. One turn, not two."""
    read: list[Reading] = []
    reading = TURN_MODELS.words.reading

    def reads(text: str) -> Reading:
        read.append(reading(text))
        return read[-1]

    class Gated(ScriptedEngine):
        async def prepare(self, req, *, begin_answer: bool = False) -> None:
            await super().prepare(req, begin_answer=begin_answer)
            await gate.wait()

    monkeypatch.setattr(TURN_MODELS.words, "reading", reads)
    onset, gate = int(0.08 * SPEECH_RATE), asyncio.Event()  # (bound to a loop only once waited on)

    async def go():
        async with Session(Gated(transcripts=[QUESTION, f"{QUESTION} {FOLLOW_UP}"])) as s:
            await s.send(update({"type": "semantic_vad", "eagerness": "auto", "create_response": False}))
            await s.until("session.updated")
            mark = len(s.seen)
            first, follow = spoken(QUESTION, tail_s=0.4), say(FOLLOW_UP)
            await s.stream(np.concatenate([first, follow[:onset]]))
            await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})  # all appends carried out
            gate.set()
            while not read:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # a turn end not waiting would be committed by now
            await s.stream(np.concatenate([follow[onset:], silence(1.0)]))
            await s.until("input_audio_buffer.committed")
            await asyncio.sleep(0.5)
            await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})
            return s.kinds(mark)

    kinds = run(go())
    assert read[0] is Reading.FINISHED  # the first half's words read finished: only the voice coming back kept the turn
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("input_audio_buffer.speech_started") == 1


class Ordered(ScriptedEngine):
    """Notes in `done` when it hears (taking `hearing_s`), and when it begins an answer and has
    begun it (taking `beginning_s`)."""

    def __init__(self, done: list, *, hearing_s: float = 0.0, beginning_s: float = 0.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.done, self.hearing_s, self.beginning_s = done, hearing_s, beginning_s

    async def transcribe(self, samples, rate, **kwargs):
        await asyncio.sleep(self.hearing_s)
        self.done.append(("heard",))
        return await super().transcribe(samples, rate, **kwargs)

    async def prepare(self, req, *, begin_answer: bool = False) -> None:
        self.done.append(("ahead", req.messages[-1].text))
        await super().prepare(req, begin_answer=begin_answer)
        await asyncio.sleep(self.beginning_s)
        self.done.append(("begun",))


def _noting_models(monkeypatch, done: list, smart_turn_s: float = 0.0) -> None:
    """Smart Turn (taking `smart_turn_s` more) and the words check note in `done` when they run."""
    import time

    reading, completion_probability = TURN_MODELS.words.reading, TURN_MODELS.smart_turn.completion_probability

    def reads(text: str) -> Reading:
        done.append(("read", text))
        return reading(text)

    def asks(audio: np.ndarray) -> float:
        done.append(("smart turn",))
        time.sleep(smart_turn_s)
        done.append(("smart turn done",))
        return completion_probability(audio)

    monkeypatch.setattr(TURN_MODELS.words, "reading", reads)
    monkeypatch.setattr(TURN_MODELS.smart_turn, "completion_probability", asks)


def _heard_early_at(audio: np.ndarray) -> int:
    """Where the early transcript of `audio`'s first pause starts (Smart Turn is asked 96 ms on)."""
    from omnicli.turns.early_transcript import EAGER_PAUSE_MS

    detector = TurnDetector(SPEECH_RATE, TURN_MODELS, silence_ms=EAGER_PAUSE_MS, prefix_padding_ms=0)
    for start in range(0, len(audio), 960):
        if any(e.kind == "stopped" for e in detector.feed(audio[start:start + 960])):
            return start + 960
    raise AssertionError("no pause")


async def _offered(done: list, heard: str) -> None:
    while ("ahead", heard) not in done:
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("pause_s", [0.4, 1.0])
def test_semantic_vad_begins_the_answer_then_asks_smart_turn_then_reads_the_words(monkeypatch, pause_s):
    """The early transcript, ready before the pause is judged, is offered to the thinker at once
    (the answer's first words are what the listener waits for); Smart Turn is asked about the pause
    once that answer is begun, and the words are read after it: one model at a time, never beside
    the answer. Not where the pause heard by then is as long as the silence rule waits (here the
    whole second of silence is sent at once): that rule would end the turn whatever the words."""
    done: list[tuple[str, ...]] = []
    _noting_models(monkeypatch, done)
    heard = "What is the capital of France?"
    audio = spoken(QUESTION, tail_s=pause_s)
    early = _heard_early_at(audio)

    async def go():
        async with Session(Ordered(done, beginning_s=0.3, transcripts=[heard])) as s:
            await s.send(update({"type": "semantic_vad", "eagerness": "auto", "create_response": False}))
            await s.until("session.updated")
            await s.stream(audio[:early])
            await asyncio.wait_for(_offered(done, heard), 5.0)  # heard, and offered, before Smart Turn's first ask
            await s.stream(audio[early:])
            await s.until("input_audio_buffer.committed")

    run(go())
    read = [("read", heard)] if pause_s < SILENCE_RULE_MS / 1000 else []
    assert done == [("heard",), ("ahead", heard), ("begun",), ("smart turn",), ("smart turn done",), *read]


def test_smart_turn_is_asked_beside_whisper_still_hearing_the_pause_and_the_answer_begun_after_it(monkeypatch):
    """Whisper leaves part of two cores idle: a pause judged while its transcript is still being
    made has Smart Turn asked at once, beside it; the answer is begun only once Smart Turn is done
    (here it takes longer than Whisper), and the words are read after the answer."""
    done: list[tuple[str, ...]] = []
    _noting_models(monkeypatch, done, smart_turn_s=0.4)
    heard = "What is the capital of France?"

    async def go():
        async with Session(Ordered(done, hearing_s=0.3, beginning_s=0.1, transcripts=[heard])) as s:
            await s.send(update({"type": "semantic_vad", "eagerness": "auto", "create_response": False}))
            await s.until("session.updated")
            await s.stream(spoken(QUESTION, tail_s=0.4))
            await s.until("input_audio_buffer.committed")

    run(go())
    assert done == [("smart turn",), ("heard",), ("smart turn done",), ("ahead", heard), ("begun",), ("read", heard)]


def test_semantic_mode_leaves_starts_alone_and_rejects_an_unknown_eagerness():
    audio = spoken(QUESTION)
    starts = [[e for e in feed(TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=s), audio) if e.kind == "started"] for s in (False, True)]
    assert starts[0] == starts[1] and len(starts[0]) == 1
    with pytest.raises(ValueError, match="eagerness"):
        TurnDetector(SPEECH_RATE, TURN_MODELS, semantic=True, eagerness="eager")
