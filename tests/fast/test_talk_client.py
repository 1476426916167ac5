"""The `omni talk` loop over the in-memory session and a scripted engine: push-to-talk, client VAD
turns, the echo gate, barge-in, and failures that must end the conversation (not vanish)."""

import asyncio

import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import ServerError
from omnicli.talk.transport import LocalTransport
from tests.helpers.models import TURN_MODELS
from tests.helpers.realtime_harness import run, silence
from tests.helpers.scripted import Hold, ScriptedEngine, answer
from tests.helpers.synthetic_speech import speech
from tests.helpers.talk_harness import FRAME, Device, Talk


def frames_of(samples: np.ndarray) -> int:
    return -(-len(samples) // FRAME)


def test_push_to_talk_sends_the_turn_and_plays_the_answer():
    engine = ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.5))

    async def go():
        async with Talk(engine, "ptt") as t:
            t.client.toggle_push_to_talk()
            await t.log.until("out", "input_audio_buffer.clear")
            t.voice.say(speech())
            await t.log.until("out", "input_audio_buffer.append", frames_of(speech()))
            t.client.toggle_push_to_talk()
            await t.log.until("in", "response.done")
            return t

    t = run(go())
    assert t.log.kinds("out") == ["session.update", "input_audio_buffer.clear",
                                  *["input_audio_buffer.append"] * frames_of(speech()),
                                  "input_audio_buffer.commit", "response.create"]
    assert t.log.of("out", "session.update")[0]["session"]["audio"]["input"]["turn_detection"] is None
    assert sum(len(s) for s in t.client.said) == t.speaker.played_frames == 12000
    [turn] = t.client.state.timings
    assert turn.by_key and turn.waited is not None and turn.asked_at >= turn.started_at


def test_a_failing_push_to_talk_toggle_ends_the_conversation_with_its_error():
    class Broken(LocalTransport):
        async def send(self, event: dict) -> None:
            if event["type"] == "input_audio_buffer.clear":
                raise ServerError("the realtime connection closed")
            await super().send(event)

    async def go():
        talk = Talk(ScriptedEngine(), "ptt", transport=Broken(ScriptedEngine()))
        await talk.__aenter__()
        talk.client.toggle_push_to_talk()
        await talk.task

    with pytest.raises(ServerError, match="connection closed"):
        run(go())


class SlowAppends(LocalTransport):
    """A link that takes 80 ms to send each of the first `slow` appends: twice a frame's length,
    so the microphone's frames queue up behind it, as behind a busy event loop."""

    def __init__(self, engine: ScriptedEngine, slow: int) -> None:
        super().__init__(engine, models=TURN_MODELS)
        self.slow = slow

    async def send(self, event: dict) -> None:
        if event["type"] == "input_audio_buffer.append" and self.slow > 0:
            self.slow -= 1
            await asyncio.sleep(0.08)
        await super().send(event)


@pytest.mark.parametrize("turns", ["smart", "semantic"])
def test_a_turns_wait_is_timed_from_when_its_speech_ended_not_from_when_the_end_was_decided_or_heard(turns):
    """Smart Turn (here or in the session) takes time to call a turn over, and frames that queued
    meanwhile are not later speech: the wait shown begins when the voice went quiet."""
    engine = ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.3))
    heard = np.concatenate([silence(0.3), speech(), silence(1.2)])
    last_loud = np.flatnonzero(np.abs(heard) > 0.02)[-1] + 1

    async def go():
        async with Talk(engine, turns, transport=SlowAppends(engine, 25)) as t:
            began = asyncio.get_running_loop().time()
            for k, start in enumerate(range(0, len(heard), FRAME)):  # recorded in real time
                await asyncio.sleep(max(0.0, began + k * 0.04 - asyncio.get_running_loop().time()))
                t.voice.frames.put_nowait(heard[start:start + FRAME])
            await t.log.until("in", "response.done")
            return t, began - 0.04 + last_loud / SPEECH_RATE  # (the loop's clock is time.monotonic)

    t, went_quiet_at = run(go())
    [turn] = t.client.state.timings
    # a VAD hears the voice stop up to a few 32 ms chunks after its last loud sample (Silero: 90-100 ms)
    assert went_quiet_at - 0.04 <= turn.started_at <= went_quiet_at + 0.16, turn.started_at - went_quiet_at


def test_client_vad_commits_a_spoken_turn_with_its_preroll():
    engine = ScriptedEngine(chat=answer("It is noon.", audio_seconds=0.3))

    async def go():
        async with Talk(engine, "client") as t:
            t.voice.say(np.concatenate([silence(0.5), speech(), silence(0.8)]))
            await t.log.until("in", "response.done")
            return t

    t = run(go())
    out = t.log.kinds("out")
    assert out[0] == "session.update" and out[-2:] == ["input_audio_buffer.commit", "response.create"]
    appended = len(out) - 3
    # The turn is speech plus the preroll (up to 300 ms) plus the silence VAD waited for: 0.8 s < sent < 2 s.
    assert 0.8 < appended * 0.04 < 2.0
    assert t.log.of("in", "response.done")[0]["response"]["status"] == "completed"
    [turn] = t.client.state.timings
    assert not turn.by_key and turn.asked_at > turn.started_at  # the wait began at the end of speech, before the commit
    assert turn.waited is not None


async def play_an_answer_and_speak_over_it(t: "Talk", hold: Hold, loudness: float) -> None:
    t.voice.say(np.concatenate([speech(), silence(0.8)]))
    await t.log.until("in", "response.output_audio.delta")
    await hold.reached.wait()
    while t.speaker.queued < 24000:  # the whole 1 s piece (ten 100 ms deltas) reached the speaker
        await asyncio.sleep(0.01)
    t.speaker.play(6000)  # 250 ms of the answer heard so far
    t.voice.say(np.concatenate([loudness * speech(), silence(0.8)]))


@pytest.mark.parametrize("turns", ["client", "server"])
def test_barge_in_cancels_and_truncates_at_what_was_played(turns):
    """Speech over the answer: cut at what the speaker played; the client cancels the answer unless
    the server's VAD heard the speech (then the server cancels it by itself)."""
    hold = Hold()
    engine = ScriptedEngine(chat=lambda req: [*answer("A long story.", audio_seconds=1.0)[:2], hold, *answer("x")[1:]])

    async def go():
        async with Talk(engine, turns, speaker=Device()) as t:
            await play_an_answer_and_speak_over_it(t, hold, 1.0)
            truncated = await t.log.until("in", "conversation.item.truncated")
            done = await t.log.until("in", "response.done")
            return t, truncated, done

    t, truncated, done = run(go())
    out = t.log.kinds("out")
    if turns == "client":
        assert out[out.index("response.cancel") + 1] == "conversation.item.truncate"
    else:
        assert "response.cancel" not in out
    truncate = t.log.of("out", "conversation.item.truncate")[0]
    assert truncate["audio_end_ms"] == truncated["audio_end_ms"] == 250
    assert truncate["item_id"] == done["response"]["output"][0]["id"]
    assert done["response"]["status"] == "cancelled" and t.speaker.flushed >= 1


def test_the_echo_gate_keeps_quiet_speech_out_while_the_answer_plays():
    async def quiet_speech_during_playback(echo_gate: bool) -> list[str]:
        hold = Hold()
        engine = ScriptedEngine(chat=lambda req: [*answer("A long story.", audio_seconds=1.0)[:2], hold, *answer("x")[1:]])
        async with Talk(engine, "client", speaker=Device(), echo_gate=echo_gate) as t:
            await play_an_answer_and_speak_over_it(t, hold, 0.1)
            while not t.voice.frames.empty():
                await asyncio.sleep(0)
            kinds = t.log.kinds("out")
            if not echo_gate:
                await t.log.until("out", "conversation.item.truncate")
                kinds = t.log.kinds("out")
            hold.open()
            await t.log.until("in", "response.done")
            return kinds

    async def go():
        return await quiet_speech_during_playback(True), await quiet_speech_during_playback(False)

    gated, open_mic = run(go())
    assert "response.cancel" not in gated and "conversation.item.truncate" not in gated
    assert "response.cancel" in open_mic and "conversation.item.truncate" in open_mic
