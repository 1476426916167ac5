"""Hearing a turn before its commit: an eager pause starts a transcript only while no other early
transcript runs (one talker: the ASR is idle), a longer pause starts one in any case; what was
heard early is the commit's transcript when only silence came after. Real Silero on real speech."""

import asyncio

import numpy as np

from omnicli.audio.pcm import float_to_pcm16
from omnicli.realtime.early_asr import EarlyTranscriber

from realtime_harness import silence, speech
from scripted import ScriptedEngine


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
        first, second = EarlyTranscriber(engine), EarlyTranscriber(engine)
        first_pcm, second_pcm = bytearray(), bytearray()
        hear(first, first_pcm, np.concatenate([spoken(), silence(0.2)]))  # an eager pause (Silero: ~100 ms of it)
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


def test_new_speech_voids_what_was_heard_early():
    async def go():
        engine = SlowEars()
        early, pcm = EarlyTranscriber(engine), bytearray()
        hear(early, pcm, np.concatenate([spoken(), silence(0.3)]))
        await asyncio.sleep(0.05)
        hear(early, pcm, np.concatenate([spoken(), silence(0.05)]))  # the user goes on: a new turn so far
        engine.gate.set()
        return engine.asked, await early.take(bytes(pcm))

    asked, heard = asyncio.run(go())
    assert asked == 1 and heard is None  # heard at the commit instead, with all of it
