"""What `omni talk` shows, driven by what happens: the talk client over the in-memory session and a
scripted engine tells its `TalkState`; the state follows the speaker, holds input until the session
is ready, drops turns with no speech, cuts interrupted answers where the listener stopped hearing,
and times each turn from where the user's wait began. The live panel is rendered as text."""

import asyncio
import io
import time

import numpy as np
import pytest

from omnicli.engine.base import AudioDelta, TextDelta, TranscriptDelta
from omnicli.talk import state as states
from omnicli.talk.answer_text import Answer
from omnicli.talk.client import TalkClient, TalkOptions
from omnicli.talk.latency import TurnTiming, summary
from omnicli.talk.state import TalkState
from omnicli.talk.transport import LocalTransport
from omnicli.talk.view import LiveView
from tests.helpers.models import TURN_MODELS
from tests.helpers.realtime_harness import run, silence
from tests.helpers.scripted import Hold, ScriptedEngine, answer, tone
from tests.helpers.synthetic_speech import speech
from tests.helpers.talk_harness import FRAME, Device, Log, Recorder, Talk, Voice


async def until(condition) -> None:
    """Wait for `condition` (the test's safety timeout bounds it; nothing is timed)."""
    while not condition():
        await asyncio.sleep(0.01)


def frames_of(samples: np.ndarray) -> int:
    return -(-len(samples) // FRAME)


class Snapshots(Recorder):
    """A view that also keeps the state's label and badges at the moment each line was said."""

    def __init__(self) -> None:
        super().__init__()
        self.state: TalkState | None = None
        self.at_lines: list[tuple[str, list[str]]] = []

    def show(self, state: TalkState) -> None:
        self.state = state

    def said(self, who: str, text: str, detail: str = "") -> None:
        super().said(who, text, detail)
        assert self.state is not None
        self.at_lines.append((self.state.label, self.state.badges))


# ---- the session comes first ---------------------------------------------------------------


class SlowToLoad(LocalTransport):
    """The in-process session while the models load: `open` waits for the test."""

    def __init__(self, engine: ScriptedEngine) -> None:
        super().__init__(engine)
        self.loaded = asyncio.Event()

    async def open(self) -> None:
        await self.loaded.wait()
        await super().open()


def test_nothing_is_heard_and_no_key_acts_until_the_session_is_ready():
    async def go():
        voice, log, stop = Voice(), Log(), asyncio.Event()
        transport = SlowToLoad(ScriptedEngine())
        client = TalkClient(transport, voice, Device(), TalkOptions(turns="ptt"), Recorder(), log, TURN_MODELS)
        task = asyncio.create_task(client.run(stop))
        await asyncio.sleep(0)
        loading = client.state.label
        client.toggle_push_to_talk()  # pressed while loading: nothing
        client.toggle_mute()
        transport.loaded.set()
        await voice.started.wait()
        ready = client.state.label
        client.toggle_push_to_talk()
        await until(lambda: client.state.label == states.HEARING)
        stop.set()
        await task
        return loading, ready, client, log

    loading, ready, client, log = run(go())
    assert loading == states.LOADING and ready == states.IDLE
    assert not client.mic_muted
    assert log.kinds("out") == ["session.update", "input_audio_buffer.clear"]  # only the key pressed once ready


# ---- push-to-talk: states follow what the speaker plays -------------------------------------


def test_push_to_talk_states_follow_the_speaker_not_the_server():
    # Heard early (a pause in the voice) or in the answer's stream: the same words either way.
    engine = ScriptedEngine(chat=[TranscriptDelta("what time is it"), *answer("It is noon.", audio_seconds=0.5)],
                            transcripts=["what time is it"])
    view = Snapshots()

    async def go():
        async with Talk(engine, "ptt", speaker=Device(), view=view) as t:
            s, seen = t.client.state, {}
            seen["ready"] = s.label
            t.client.toggle_push_to_talk()
            await until(lambda: s.label == states.HEARING)
            t.voice.say(speech())
            await t.log.until("out", "input_audio_buffer.append", frames_of(speech()))
            seen["recorded"] = s.recorded
            t.client.toggle_push_to_talk()
            await t.log.until("in", "response.done")
            seen["all audio in, none played"] = s.label
            seen["waited before playing"] = s.timing.waited
            t.speaker.play(6000)
            await until(lambda: s.label == states.SPEAKING)
            seen["lines while speaking"] = list(view.lines)
            t.speaker.play(6000)
            await until(lambda: s.label == states.IDLE)
            seen["timing"] = s.timing
            t.client.toggle_push_to_talk()
            await until(lambda: s.label == states.HEARING)
            seen["timing after a new turn began"] = s.timing
            return seen

    seen = run(go())
    assert seen["ready"] == states.IDLE
    assert seen["recorded"] == pytest.approx(len(speech()) / 24000)
    assert seen["all audio in, none played"] == states.THINKING
    assert seen["waited before playing"] is None
    assert seen["lines while speaking"] == ["you: what time is it"]  # the answer's line comes once it has played out
    assert view.lines == ["you: what time is it", "omni: It is noon."]
    timing = seen["timing"]
    assert timing.since == "from key press" and timing.headline().endswith("s from key press")
    assert [stage for stage, _ in timing.stages()] == ["ASR", "thinker", "talker", "playback"]
    assert seen["timing after a new turn began"] is None


def test_a_push_to_talk_turn_without_speech_is_not_sent():
    engine = ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.5))
    view = Recorder()

    async def go():
        async with Talk(engine, "ptt", view=view) as t:
            t.client.toggle_push_to_talk()
            await t.log.until("out", "input_audio_buffer.clear")
            t.voice.say(silence(0.4))
            await t.log.until("out", "input_audio_buffer.append", 10)
            t.client.toggle_push_to_talk()
            await until(lambda: len(view.hints) == 1)
            t.client.toggle_push_to_talk()  # and a turn with nothing recorded at all
            t.client.toggle_push_to_talk()
            await until(lambda: len(view.hints) == 2)
            return t

    t = run(go())
    assert view.hints == [states.NOT_CAUGHT, states.NOT_CAUGHT]
    out = t.log.kinds("out")
    assert "input_audio_buffer.commit" not in out and "response.create" not in out
    assert out == ["session.update", "input_audio_buffer.clear", *["input_audio_buffer.append"] * 10,
                   *["input_audio_buffer.clear"] * 3]  # each turn's start and its drop
    assert engine.requests == [] and t.client.state.label == states.IDLE and t.client.state.timings == []


def test_the_servers_empty_buffer_error_is_said_in_plain_words():
    view = Recorder()

    async def go():
        async with Talk(ScriptedEngine(), "ptt", view=view) as t:
            await t.client.ask(time.monotonic(), by_key=True)  # a commit with nothing appended
            await t.log.until("in", "error")
            await until(lambda: view.hints)
            return t

    t = run(go())
    assert "buffer is empty" in t.log.of("in", "error")[0]["error"]["message"]
    assert view.hints == [f"{states.NOT_CAUGHT}: no audio reached the server"] and view.problems == []


def test_space_while_muted_says_so_and_records_nothing():
    view = Recorder()

    async def go():
        async with Talk(ScriptedEngine(), "ptt", view=view) as t:
            t.client.toggle_mute()
            t.client.toggle_push_to_talk()
            return t, t.client.state.label, t.client.state.badges

    t, label, badges = run(go())
    assert label == states.MUTED and badges == []
    assert view.hints == ["the mic is muted: press m to unmute"]
    assert t.log.kinds("out") == ["session.update"]


# ---- voice activity ------------------------------------------------------------------------


def test_a_muted_mic_is_heard_as_silence_until_unmuted():
    engine = ScriptedEngine(chat=answer("Yes.", audio_seconds=0.2))

    async def go():
        async with Talk(engine, "client") as t:
            t.client.toggle_mute()
            t.voice.say(np.concatenate([speech(), silence(0.8)]))
            while not t.voice.frames.empty():
                await asyncio.sleep(0)
            muted = t.client.state.label, t.client.state.level
            t.client.toggle_mute()
            t.voice.say(np.concatenate([speech(), silence(0.8)]))
            await t.log.until("in", "response.done")
            return t, muted

    t, (label, level) = run(go())
    assert label == states.MUTED and level == 0.0
    out = t.log.kinds("out")
    assert out.count("input_audio_buffer.commit") == 1
    assert (len(out) - 3) * 0.04 < 2.0  # only the unmuted turn went out


def test_an_interrupted_answer_is_cut_where_the_listener_stopped_hearing():
    hold = Hold()
    scripts = iter([[TextDelta("one two three four"), AudioDelta(tone(1.0)), TextDelta(" five six."), hold],
                    answer("Sure.", audio_seconds=0.2)])
    engine = ScriptedEngine(chat=lambda req: next(scripts), transcripts=["tell me", "stop"])
    view = Snapshots()

    async def go():
        async with Talk(engine, "client", speaker=Device(), view=view) as t:
            t.voice.say(np.concatenate([speech(), silence(0.8)]))
            await hold.reached.wait()
            await until(lambda: t.client.state.label == states.THINKING and t.client.state.answer.audio)
            t.speaker.play(12000)  # half the answer's second of audio heard
            await until(lambda: t.client.state.label == states.SPEAKING)
            t.voice.say(np.concatenate([speech(), silence(0.8)]))
            await t.log.until("out", "conversation.item.truncate")
            await t.log.until("in", "response.done", 2)
            return t

    t = run(go())
    assert view.lines[0].startswith("you: ") and view.lines[1] == "omni: one two —[interrupted]"
    assert view.at_lines[1] == (states.HEARING, [states.INTERRUPTED])  # the user is heard, the answer marked
    assert t.log.of("out", "conversation.item.truncate")[0]["audio_end_ms"] == 500
    assert not t.client.state.interrupted  # the next turn was sent: the mark is history
    timing = t.client.state.timing
    assert timing.since == "from end of speech" and timing.stages()[0][0] == "turn end"


def test_an_answer_made_in_full_but_still_playing_is_cut_where_heard():
    """The usual case: the server finished the answer long before the speaker will have played it."""
    engine = ScriptedEngine(chat=answer("one two three four", audio_seconds=1.0))
    view = Recorder()

    async def go():
        async with Talk(engine, "client", speaker=Device(), view=view) as t:
            t.voice.say(np.concatenate([speech(), silence(0.8)]))
            await t.log.until("in", "response.done")
            t.speaker.play(6000)  # a quarter of it heard
            await until(lambda: t.client.state.label == states.SPEAKING)
            t.voice.say(np.concatenate([speech(), silence(0.8)]))
            await t.log.until("in", "conversation.item.truncated")
            return t

    t = run(go())
    assert "omni: one —[interrupted]" in view.lines  # a quarter of the 18 characters: "one t", whole words only
    assert t.log.of("out", "conversation.item.truncate")[0]["audio_end_ms"] == 250
    assert "response.cancel" not in t.log.kinds("out")  # nothing left to cancel


@pytest.mark.parametrize("turns", ["ptt", "server"])
def test_esc_stops_the_answer_where_it_was_heard_and_opens_no_turn(turns):
    hold = Hold()
    engine = ScriptedEngine(chat=[TranscriptDelta("tell me"), TextDelta("one two three four"), AudioDelta(tone(1.0)), hold],
                            transcripts=["tell me"])
    view = Recorder()

    async def go():
        async with Talk(engine, turns, speaker=Device(), view=view) as t:
            s = t.client.state
            if turns == "ptt":
                t.client.toggle_push_to_talk()
                await until(lambda: s.label == states.HEARING)
                t.voice.say(speech())
                await t.log.until("out", "input_audio_buffer.append", frames_of(speech()))
                t.client.toggle_push_to_talk()
            else:
                t.voice.say(np.concatenate([speech(), silence(1.0)]))
            await hold.reached.wait()
            await until(lambda: s.answer is not None and s.answer.audio)
            t.speaker.play(12000)  # half of the second of audio heard
            await until(lambda: s.label == states.SPEAKING)
            t.client.stop_answer()
            await t.log.until("out", "conversation.item.truncate")
            await t.log.until("in", "response.done")
            return t

    t = run(go())
    out = t.log.kinds("out")
    assert out.count("response.cancel") == 1  # also where the server's VAD cancels on speech: there was none
    assert t.log.of("out", "conversation.item.truncate")[0]["audio_end_ms"] == 500
    assert t.speaker.flushed == 1 and view.lines == ["you: tell me", "omni: one two —[interrupted]"]
    assert t.client.state.label == states.INTERRUPTED and not t.client.state.recording
    assert out.count("input_audio_buffer.clear") == (1 if turns == "ptt" else 0)  # no new turn was begun
    assert t.client.state.summary().startswith("0 turns answered, 1 interrupted, median ")


def test_server_vad_turns_show_the_same_states_and_honest_labels():
    engine = ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.3), transcripts=["what time is it"])
    view = Snapshots()

    async def go():
        async with Talk(engine, "server", view=view) as t:
            t.voice.say(np.concatenate([speech(), silence(1.0)]))
            await t.log.until("in", "input_audio_buffer.speech_started")
            await until(lambda: t.client.state.label == states.HEARING)
            await t.log.until("in", "response.done")
            await until(lambda: t.client.state.label == states.LISTENING)
            return t

    t = run(go())
    assert view.lines == ["you: what time is it", "omni: It is noon."]
    [timing] = t.client.state.timings
    assert timing.since == "from end of speech" and timing.waited is not None
    assert [stage for stage, _ in timing.stages()][0] == "turn end"


# ---- the estimate, the figures and the panel -----------------------------------------------


@pytest.mark.parametrize("played, done, heard", [
    (0, False, ""),
    (12000, False, "one two"),  # half of the 18 characters that came with the audio, whole words only
    (24000, False, "one two three four"),
    (12000, True, "one two three"),  # complete: the audio spoke all 29 characters
    (30000, True, "one two three four five six."),
])
def test_the_heard_text_is_the_played_fraction_of_the_text_that_came_with_the_audio(played, done, heard):
    a = Answer()
    a.add_text("one two three four")
    a.add_audio(24000)
    a.add_text(" five six.")
    a.done = done
    assert a.heard(played) == heard
    assert a.cut_at(played) == (f"{heard} —[interrupted]" if heard else "—[interrupted]")


def test_the_summary_counts_turns_in_good_english():
    one = TurnTiming(10.0, 10.0, by_key=True, first_played_at=10.8)
    more = [TurnTiming(0.0, 0.5, by_key=False, first_played_at=s) for s in (1.0, 2.0, 3.0)]
    assert summary([one]) == "1 turn answered, median 800 ms from key press to first audio"
    assert summary(more) == "3 turns answered, median 2000 ms from end of speech to first audio"
    assert summary([TurnTiming(0.0, 0.5, by_key=False)]) is None  # never heard: not a measured turn


def test_the_summary_counts_interrupted_turns_apart_from_answered_ones():
    cut = TurnTiming(0.0, 0.5, by_key=False, first_played_at=1.0, interrupted=True)
    stopped_early = TurnTiming(5.0, 5.5, by_key=False, interrupted=True)  # cut before a sound of it
    answered = TurnTiming(10.0, 10.5, by_key=False, first_played_at=12.0)
    assert summary([cut, stopped_early, answered]) == (
        "1 turn answered, 2 interrupted, median 1500 ms from end of speech to first audio")


def test_a_transcript_that_came_with_the_commit_reads_heard_early_not_zero():
    early = TurnTiming(0.0, 0.5, by_key=False, heard_at=0.5, first_text_at=0.7)
    late = TurnTiming(0.0, 0.5, by_key=False, heard_at=0.8, first_text_at=0.9)
    assert early.breakdown() == "turn end 0.50 s · ASR heard early · thinker 0.20 s"
    assert late.breakdown() == "turn end 0.50 s · ASR 0.30 s · thinker 0.10 s"


def render(state: TalkState, keys: str = "Space talk · Esc interrupt · m mute · q quit") -> list[str]:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=90, record=True, color_system=None)
    view = LiveView(keys, console=console)
    view.show(state)
    console.print(view._render())
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_the_panel_shows_state_meter_timer_and_this_turns_wait():
    clock = {"now": 0.0}
    state = TalkState("ptt", Recorder(), clock=lambda: clock["now"])
    assert "● loading models…" in render(state)[1]
    state.session_ready()
    idle = render(state)
    assert "● press Space to talk" in idle[1] and "mic  " + "░" * 24 in idle[2]
    assert "Space talk · Esc interrupt · m mute · q quit" in idle[-1]
    state.turn_started()
    for _ in range(25):  # one second of a loud voice
        state.mic(0.3 * np.sin(np.arange(960) * 0.1).astype(np.float32))
    hearing = render(state)
    assert "● hearing you" in hearing[1]
    assert "█" * 15 in hearing[2] and hearing[2].rstrip(" │").endswith("1.0 s")
    state.asked(started_at=0.0, by_key=True)
    for name, at in (("user_text", 0.2), ("answer_text", 0.35), ("answer_audio", 0.6)):
        clock["now"] = at
        getattr(state, name)("what time is it" if name == "user_text" else "It is noon." if name == "answer_text" else 2400)
    clock["now"] = 0.75
    state.playback(played=240, buffered=0.5)
    speaking = render(state)
    assert "● speaking" in speaking[1]
    assert not any("omni:" in line for line in speaking)  # a tenth of "It is noon." heard: not a word yet
    assert any("first audio 0.75 s from key press" in line for line in speaking)
    assert any("ASR 0.20 s · thinker 0.15 s · talker 0.25 s · playback 0.15 s" in line for line in speaking)
    state.answer_done("completed", buffered=0.05)
    state.playback(played=2400, buffered=0.05)
    assert any("omni: It is noon." in line for line in render(state))


def answering(clock: dict, text: str, audio_seconds: float) -> TalkState:
    """A state with an answer on its way: `text` all in, `audio_seconds` of its audio in, none played."""
    state = TalkState("client", Recorder(), clock=lambda: clock["now"])
    state.session_ready()
    state.turn_started()
    state.asked(started_at=0.0, by_key=False)
    state.answer_started()
    state.answer_text(text)
    state.answer_audio(round(audio_seconds * 24000))
    return state


def panel_answer(state: TalkState) -> str | None:
    lines = [line.strip("│ ") for line in render(state) if "omni: " in line]
    return lines[0] if lines else None


def test_the_panel_shows_the_answers_words_as_they_are_heard_not_as_they_came():
    """The server sent two sentences of text with the first second of audio: the panel follows the
    voice (at its pace while the answer is being made), and the cut line says the same."""
    clock = {"now": 1.0}
    state = answering(clock, "Once upon a time, there was a knight. One day, he rode out.", audio_seconds=1.0)
    assert state.label == states.THINKING and panel_answer(state) is None
    shown = []
    for played in (2400, 9600, 14400, 19200):
        state.playback(played=played, buffered=1.0)
        shown.append(panel_answer(state))
    assert shown == [None, "omni: Once", "omni: Once upon", "omni: Once upon a"]  # 15 characters a second of speech
    state.cut_off(19200)
    assert state.display.lines[-1] == "omni: Once upon a —[interrupted]"


def test_the_voices_pace_is_learned_from_the_answers_played_out():
    clock = {"now": 1.0}
    state = answering(clock, "One two three four five six seven eight nine ten.", audio_seconds=2.0)
    state.answer_done("completed", buffered=0.0)
    state.playback(played=48000, buffered=0.0)
    assert state.pace == pytest.approx(24.5)  # a quick voice: 49 characters in two seconds
    state.answer_started()
    state.answer_text("Eleven twelve thirteen fourteen. Fifteen sixteen seventeen.")
    state.answer_audio(48000)
    state.playback(played=24000, buffered=1.0)
    assert panel_answer(state) == "omni: Eleven twelve thirteen"  # 24 characters heard, whole words only


def test_the_speaker_running_dry_inside_an_answer_is_shown_counted_and_logged():
    clock, notes = {"now": 1.0}, []
    state = answering(clock, "On a clear day, the sky is", audio_seconds=1.0)
    state.notes = notes.append
    state.playback(played=24000, buffered=0.0, underruns=0)
    assert state.label == states.WAITING and state.answer.dry_since == 1.0
    clock["now"] = 3.0
    state.answer_text(" typically blue.")
    state.answer_audio(24000)
    clock["now"] = 3.5
    state.playback(played=36000, buffered=0.5, underruns=1)
    assert state.label == states.SPEAKING
    assert "● waiting for audio" not in render(state)[1]
    state.answer_done("completed", buffered=0.5)
    state.playback(played=48000, buffered=0.0, underruns=1)
    assert state.display.lines == ["omni: On a clear day, the sky is typically blue."]
    assert notes == [{"type": "omni.answer.played", "audio_ms": 2000, "heard_ms": 2000, "gaps": 1,
                      "longest_gap_ms": 2000, "underruns": 1}]
    assert state.label == states.LISTENING


def test_a_headless_speaker_never_runs_dry():
    clock = {"now": 1.0}
    state = answering(clock, "On a clear day,", audio_seconds=1.0)
    state.realtime_speaker = False
    state.playback(played=24000, buffered=0.0)
    assert state.label == states.SPEAKING


def test_the_last_turns_word_and_wait_go_once_all_is_quiet_and_at_once_on_mute():
    clock = {"now": 1.0}
    state = answering(clock, "It is noon.", audio_seconds=0.5)
    state.answer_done("completed", buffered=0.0)
    state.playback(played=12000, buffered=0.0)
    assert state.label == states.LISTENING and state.shown_timing() is not None
    clock["now"] = 1.0 + states.LINGER_S
    assert state.shown_timing() is None and not any("first audio" in line for line in render(state))
    state.turn_skipped()
    assert state.shown_hint() == states.NOT_CAUGHT
    clock["now"] += states.LINGER_S
    assert state.shown_hint() == ""
    state.turn_skipped()
    state.set_muted(True)
    assert state.shown_hint() == "" and states.NOT_CAUGHT not in "\n".join(render(state))
