"""Hearing a turn before its commit: an eager pause starts a transcript only while no other early
transcript runs (one talker: the ASR is idle), a longer pause starts one in any case; what was
heard early is the commit's transcript when only silence came after, and the engine is offered
the request its answer will make. The stand-in VAD on synthetic speech (tests/helpers/models.py)."""

import asyncio
import logging

import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import float_to_pcm16
from omnicli.engine.base import ChatRequest
from omnicli.errors import OmniError
from omnicli.turns.early_transcript import EAGER, LATE, PARTIAL, STARTED, EarlyTranscriber
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from tests.helpers.models import TURN_MODELS, LingeringVAD
from tests.helpers.realtime_harness import Session, pcm_b64, run, silence, user_text
from tests.helpers.scripted import Hold, ScriptedEngine, answer, tone
from tests.helpers.synthetic_speech import QUESTION, say, speech


class SlowEars(ScriptedEngine):
    """Transcribes only when the test opens the gate, so an early transcript can be 'running'."""

    def __init__(self) -> None:
        super().__init__(transcripts=["what time is it"])
        self.gate = asyncio.Event()
        self.asked = 0

    async def transcribe(self, samples, rate, **options):
        self.asked += 1
        await self.gate.wait()
        return await super().transcribe(samples, rate, **options)


def spoken() -> np.ndarray:
    clip = speech()
    return clip[:np.flatnonzero(np.abs(clip) > 0.01)[-1]]


def hear(early: EarlyTranscriber, buffer: bytearray, samples: np.ndarray) -> None:
    buffer.extend(float_to_pcm16(samples))
    early.act(early.pauses(samples), buffer)


def test_an_eager_pause_waits_for_an_idle_asr_and_a_long_pause_does_not():
    async def go():
        engine = SlowEars()
        scheduler = AnswerScheduler()  # both sessions in one process
        first, second = EarlyTranscriber(engine, scheduler, TURN_MODELS), EarlyTranscriber(engine, scheduler, TURN_MODELS)
        first_pcm, second_pcm = bytearray(), bytearray()
        hear(first, first_pcm, np.concatenate([spoken(), silence(0.2)]))  # an eager pause
        await asyncio.sleep(0.05)
        started_alone = engine.asked
        hear(second, second_pcm, np.concatenate([spoken(), silence(0.2)]))  # the same, while the first runs
        await asyncio.sleep(0.05)
        started_beside = engine.asked
        hear(second, second_pcm, silence(0.2))  # the pause grows past 200 ms
        await asyncio.sleep(0.05)
        started_late = engine.asked
        engine.gate.set()
        return started_alone, started_beside, started_late, await first.take(bytes(first_pcm)), await second.take(bytes(second_pcm))

    alone, beside, late, first_heard, second_heard = asyncio.run(go())
    assert (alone, beside, late) == (1, 1, 2)
    assert first_heard == second_heard == "what time is it"


@pytest.fixture
def omni_log(caplog):
    """caplog at debug level for the "omni" logger (the CLI's tests may have stopped it propagating)."""
    omni, propagated = logging.getLogger("omni"), logging.getLogger("omni").propagate
    omni.propagate = True
    try:
        with caplog.at_level(logging.DEBUG, logger="omni"):
            yield caplog
    finally:
        omni.propagate = propagated


@pytest.mark.parametrize("kind, level", [(OmniError, logging.DEBUG), (TypeError, logging.WARNING)])
def test_reading_ahead_that_fails_leaves_the_turn_heard_and_a_bug_is_logged_as_a_warning(kind, level, omni_log):
    """Reading the turn ahead is a guess: its failure loses nothing, but a failure no engine
    reports (a bug) is not hidden at debug level."""
    failure = kind("reading ahead failed")  # made here: its traceback must not outlive the test

    async def go():
        early = EarlyTranscriber(ScriptedEngine(transcripts=["what time is it"]), AnswerScheduler(), TURN_MODELS)

        async def fails(text: str) -> None:
            raise failure
        early.on_heard = fails
        pcm = bytearray()
        hear(early, pcm, np.concatenate([spoken(), silence(0.3)]))
        while early.told is None:  # heard, and being told
            await asyncio.sleep(0.01)
        await early.told[1]
        return await early.take(bytes(pcm))

    assert run(go()) == "what time is it"
    assert [(r.levelno, r.exc_info[1]) for r in omni_log.records if "ahead failed" in r.message] == [(level, failure)]


class FailingEars(ScriptedEngine):
    """Its quick (early) transcript fails with `failure`."""

    def __init__(self, failure: Exception) -> None:
        super().__init__(transcripts=["what time is it"])
        self.failure = failure

    async def transcribe(self, samples, rate, **options):
        if options.get("quick"):
            raise self.failure
        return await super().transcribe(samples, rate, **options)


@pytest.mark.parametrize("kind, level", [(OmniError, logging.DEBUG), (ValueError, logging.WARNING)])
def test_an_early_transcript_that_fails_leaves_the_turn_to_the_commit_and_a_bug_is_logged_as_a_warning(
        kind, level, omni_log):
    """No early transcript is a turn heard the usual way, at its commit; a failure no engine
    reports (a bug) is not hidden at debug level."""
    failure = kind("the quick transcript failed")  # made here: its traceback must not outlive the test

    async def go():
        engine = FailingEars(failure)
        early = EarlyTranscriber(engine, AnswerScheduler(), TURN_MODELS)
        pcm = bytearray()
        hear(early, pcm, np.concatenate([spoken(), silence(0.3)]))
        heard_early = await early.now(pcm)
        return heard_early, await early.take(bytes(pcm))

    assert run(go()) == (None, None)  # the commit transcribes the turn itself
    assert [(r.levelno, r.exc_info[1]) for r in omni_log.records if "early failed" in r.message] == [(level, failure)]


def test_new_speech_voids_what_was_heard_early():
    async def go():
        engine = SlowEars()
        early, pcm = EarlyTranscriber(engine, AnswerScheduler(), TURN_MODELS), bytearray()
        hear(early, pcm, np.concatenate([spoken(), silence(0.3)]))
        await asyncio.sleep(0.05)
        hear(early, pcm, np.concatenate([spoken(), silence(0.05)]))  # the user goes on: a new turn so far
        engine.gate.set()
        return engine.asked, await early.take(bytes(pcm))

    asked, heard = asyncio.run(go())
    assert asked == 1 and heard is None  # heard at the commit instead, with all of it


def test_a_turn_heard_early_is_offered_to_the_engine_as_the_request_its_answer_then_makes():
    """The engine is told, before the commit, the very request the answer then makes (so an engine
    that reads it, writes its first words and speaks them ahead finds them taken)."""
    engine = ScriptedEngine(transcripts=["what time is it"])

    async def go():
        async with Session(engine) as s:
            await s.send({"type": "session.update", "session": {
                "type": "realtime", "instructions": "Be brief.", "max_output_tokens": 77,
                "audio": {"input": {"turn_detection": None}, "output": {"voice": "joe", "speed": 1.25}}}})
            await s.until("session.updated")
            await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(np.concatenate([spoken(), silence(0.4)]))})
            while not engine.prepared:
                await asyncio.sleep(0.01)
            await s.send({"type": "input_audio_buffer.commit"})
            await s.send({"type": "response.create"})
            await s.until("response.done")

    run(go())
    (ahead,) = engine.prepared
    (asked,) = [r for r in engine.requests if isinstance(r, ChatRequest)]
    assert ahead.messages == asked.messages
    assert [m.role for m in asked.messages] == ["system", "user"] and asked.messages[-1].parts[0].text == "what time is it"
    assert (ahead.temperature, ahead.max_tokens) == (asked.temperature, asked.max_tokens) == (asked.temperature, 77)
    assert (ahead.modalities, ahead.voice, ahead.speed) == (asked.modalities, asked.voice, asked.speed) == (("text", "audio"), "joe", 1.25)
    assert engine.began_answers == [True]  # the process's one talker


def test_a_committed_turn_is_not_heard_again_as_the_silence_after_it():
    """A turn committed early in its pause (semantic_vad, or the client's Smart Turn) is not
    transcribed a second time when that pause grows long: the silence is no turn, and Whisper on
    it would take the cores from the answer."""
    async def go():
        engine = SlowEars()
        early, pcm = EarlyTranscriber(engine, AnswerScheduler(), TURN_MODELS), bytearray()
        hear(early, pcm, np.concatenate([spoken(), silence(0.1)]))  # an eager pause: heard at once
        engine.gate.set()
        heard = await early.take(bytes(pcm))
        after = bytearray()
        hear(early, after, silence(0.4))  # the same pause, past 200 ms, after the commit
        await asyncio.sleep(0.05)
        return heard, engine.asked

    assert asyncio.run(go()) == ("what time is it", 1)


def test_a_turn_heard_early_beside_another_session_is_offered_to_be_begun_too():
    """With another talker in the process (omni serve), quiet or being answered, the engine is
    still offered to begin the answer: whether a guess would delay another answer's first words
    is the engine's to say (the embedded thinker's queue knows; tests/acceptance/test_thinker_prefill.py)."""
    hold = Hold()
    engine = ScriptedEngine(chat=[hold, *answer("Hello", " there.")], transcripts=["what time is it"])
    off = {"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}}}
    pause = {"type": "input_audio_buffer.append", "audio": pcm_b64(np.concatenate([spoken(), silence(0.4)]))}

    async def heard(s: Session) -> None:
        asked = len(engine.prepared)
        await s.send(pause)
        while len(engine.prepared) == asked:
            await asyncio.sleep(0.01)
        await s.send({"type": "input_audio_buffer.clear"})

    async def go():
        scheduler = AnswerScheduler()  # one process, as in omni serve
        async with Session(engine, scheduler) as answered:
            await answered.send(off)
            async with Session(engine, scheduler) as other:
                await other.send(off)
                await heard(other)  # beside a quiet session
                await answered.send(user_text("Hi."))
                await answered.send({"type": "response.create"})
                await hold.reached.wait()
                await heard(other)  # beside one being answered
                hold.open()
                await answered.until("response.done")
            await heard(answered)  # alone again

    run(go())
    assert engine.began_answers == [True, True, True]


class Guessing(ScriptedEngine):
    """Begins an answer when offered a turn and goes on until called off (counted)."""

    def __init__(self) -> None:
        super().__init__(transcripts=["what time is it"])
        self.began, self.called_off = asyncio.Event(), 0

    async def prepare(self, req, *, begin_answer: bool = False) -> None:
        await super().prepare(req, begin_answer=begin_answer)
        self.began.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.called_off += 1
            raise


async def guess_begun(s: Session, engine: Guessing) -> None:
    """A turn heard in a pause (no turn detection: nothing commits it) and its answer begun."""
    await s.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}}})
    await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(np.concatenate([spoken(), silence(0.2)]))})
    await engine.began.wait()


def test_what_the_engine_was_offered_is_called_off_when_the_user_goes_on():
    """New speech after a pause: the turn heard in it is stale, and so is an answer begun on it."""
    engine = Guessing()

    async def go():
        async with Session(engine) as s:
            await guess_begun(s, engine)
            await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(spoken())})  # the user goes on
            for _ in range(100):
                if engine.called_off:
                    break
                await asyncio.sleep(0.01)
            return engine.called_off

    assert run(go()) == 1


def test_what_the_engine_was_offered_on_a_committed_turn_is_not_called_off_after_the_commit():
    """The commit took the turn heard early: what was begun on it is that turn's answer now, and
    neither speech nor a clear after the commit calls it off (the duplex client clears its buffer
    after the server's own commit)."""
    engine = Guessing()

    async def go():
        async with Session(engine) as s:
            await guess_begun(s, engine)
            await s.send({"type": "input_audio_buffer.commit"})
            await s.until("input_audio_buffer.committed")
            await s.send({"type": "input_audio_buffer.append", "audio": pcm_b64(spoken())})  # the user goes on
            await s.send({"type": "input_audio_buffer.clear"})
            await s.until("input_audio_buffer.cleared")
            await asyncio.sleep(0.2)
            return engine.called_off

    assert run(go()) == 0


class ReadsAhead(ScriptedEngine):
    """An engine that keeps what it read (`reads_ahead`); a reading of words heard while the user
    still speaks (not `begin_answer`) lasts until the test opens `gate`."""

    reads_ahead = True

    def __init__(self, transcripts: list[str]) -> None:
        super().__init__(transcripts=transcripts)
        self.gate = asyncio.Event()
        self.heard = 0

    async def transcribe(self, samples, rate, **options):
        self.heard += 1
        return await super().transcribe(samples, rate, **options)

    async def prepare(self, req, *, begin_answer: bool = False) -> None:
        await super().prepare(req, begin_answer=begin_answer)
        if not begin_answer:
            await self.gate.wait()


def _words(req: ChatRequest) -> str:
    return req.messages[-1].parts[0].text


def test_words_heard_while_the_user_speaks_are_read_and_the_turn_heard_in_the_pause_waits_for_that_reading():
    """With one talker and an engine that keeps what it read, the words so far are heard while the
    user still speaks and offered to be read only; the turn heard in the pause is offered, an
    answer begun on it, once that reading is done, so the two never race for the thinker."""
    engine = ReadsAhead(["What is the capital", QUESTION])

    async def go():
        async with Session(engine) as s:
            await s.stream(np.concatenate([say(QUESTION), silence(0.4)]))
            while engine.heard < 2:  # the words so far, then the turn in the pause
                await asyncio.sleep(0.01)
            await s.error({"type": "conversation.item.retrieve", "item_id": "item_none"})  # all appends carried out
            offered_before = [(_words(r), began) for r, began in zip(engine.prepared, engine.began_answers, strict=True)]
            engine.gate.set()
            while len(engine.prepared) < 2:
                await asyncio.sleep(0.01)
            return offered_before, [(_words(r), began) for r, began in zip(engine.prepared, engine.began_answers, strict=True)]

    before, after = run(go())
    assert before == [("What is the capital", False)]
    assert after == [("What is the capital", False), (QUESTION, True)]
    assert engine.heard == 2  # no second reading while the first was under way


def test_an_engine_that_keeps_nothing_it_read_is_not_told_the_words_while_the_user_speaks():
    engine = ScriptedEngine(transcripts=[QUESTION])

    async def go():
        async with Session(engine) as s:
            await s.stream(np.concatenate([say(QUESTION), silence(0.4)]))
            while not engine.prepared:
                await asyncio.sleep(0.01)

    run(go())
    assert [r[0] for r in engine.requests if isinstance(r, tuple)] == ["transcribe"]
    assert [_words(r) for r in engine.prepared] == [QUESTION] and engine.began_answers == [True]


def _voice(seconds: float) -> np.ndarray:
    return tone(seconds).samples


def _verdicts(samples: np.ndarray) -> list[tuple[int, str]]:
    """What the early transcriber's VAD (Silero's lingering stand-in) says of `samples` appended in
    40 ms pieces: (ms of audio appended by then, verdict)."""
    early = EarlyTranscriber(ScriptedEngine(), AnswerScheduler(), TurnModels(silero=LingeringVAD()))
    step, found = SPEECH_RATE * 40 // 1000, []
    for start in range(0, len(samples), step):
        found += [((start + step) * 1000 // SPEECH_RATE, verdict) for verdict in early.pauses(samples[start:start + step])]
    return found


def test_the_words_so_far_are_not_heard_once_the_voice_is_quiet_while_the_vad_still_hears_it():
    """A reading of the words so far falling due just after the voice ended (the VAD still hearing
    it) is not begun: the pause's own transcript hears the whole turn, and a Whisper run begun
    there would only hold it up."""
    verdicts = _verdicts(np.concatenate([silence(0.3), _voice(0.56), silence(0.6)]))
    assert [v for _, v in verdicts] == [STARTED, EAGER, LATE]


def test_a_reading_of_the_words_so_far_due_in_a_quiet_gap_comes_once_the_voice_is_loud_again():
    """Due 600 ms into the speech, inside a 70 ms gap the VAD hears as voice."""
    verdicts = _verdicts(np.concatenate([silence(0.3), _voice(0.6), silence(0.07), _voice(0.5), silence(0.6)]))
    assert [v for _, v in verdicts] == [STARTED, PARTIAL, EAGER, LATE]
    partial_ms = next(ms for ms, v in verdicts if v == PARTIAL)
    assert 300 + 600 + 70 < partial_ms <= 300 + 600 + 70 + 40  # the first piece loud again
