"""The clock a turn end's waits run on (omnicli/turns/heard_clock.py): audio heard, whatever its
pace, with the wall clock only once the audio stops coming. Assertions are on how a wait ends."""

import asyncio

from omnicli.turns.heard_clock import AUDIO_STOPPED_S, HeardClock

SAFETY_S = 10
"""Only so a broken wait fails instead of hanging."""


class Ears:
    """A position in the audio, heard in pieces as fast as a test likes."""

    def __init__(self) -> None:
        self.ms = 0
        self.clock = HeardClock(lambda: self.ms)

    async def hear(self, ms: int, pieces: int = 1) -> None:
        for _ in range(pieces):
            self.ms += ms
            self.clock.tick()
            await asyncio.sleep(0)


def test_a_wait_ends_once_its_audio_is_heard_however_fast_it_came():
    async def go():
        ears = Ears()
        waiting = asyncio.create_task(ears.clock.wait(lambda: False, 1.0))
        await ears.hear(40, pieces=24)  # 960 ms of audio, at once
        assert not waiting.done()
        await ears.hear(40)
        return await asyncio.wait_for(waiting, SAFETY_S)

    assert asyncio.run(go()) is False


def test_what_the_audio_shows_ends_the_wait_as_it_is_heard():
    async def go():
        ears, resumed = Ears(), []
        waiting = asyncio.create_task(ears.clock.wait(lambda: bool(resumed), 0.2))
        await ears.hear(40, pieces=2)
        resumed.append(True)
        await ears.hear(40)
        return await asyncio.wait_for(waiting, SAFETY_S)

    assert asyncio.run(go()) is True


def test_a_wait_on_a_task_ends_when_it_is_done_with_no_audio_heard():
    async def go():
        ears = Ears()
        telling = asyncio.create_task(asyncio.sleep(0.05))
        return await asyncio.wait_for(ears.clock.wait(telling.done, 60.0, wake=telling), SAFETY_S)

    assert asyncio.run(go()) is True


def test_audio_that_stops_coming_ends_the_wait_on_the_wall_clock():
    async def go():
        ears = Ears()
        await ears.hear(40)
        return await asyncio.wait_for(ears.clock.wait(lambda: False, 0.1), AUDIO_STOPPED_S + SAFETY_S)

    assert asyncio.run(go()) is False
