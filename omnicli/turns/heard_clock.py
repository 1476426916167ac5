"""The clock a turn end's waits run on: the audio heard, not the wall clock.

A wait of "one second" while a turn end is decided means one second of the user's audio: what they
said meanwhile decides. Audio streamed in real time makes the two the same; audio sent faster (a
file sent whole) or heard late (a busy server) would otherwise be judged on what happened to be
heard when the wall clock ran out. Should the audio stop coming, the wall clock ends the wait.
"""

import asyncio
from collections.abc import Callable

AUDIO_STOPPED_S = 0.5
"""No audio heard for this long: the client is not streaming (a file sent whole, a push-to-talk
release), so a wait ends on the wall clock, never sooner than this."""


class HeardClock:
    """Waits measured in the audio a turn detector has heard (`position()`, in milliseconds)."""

    def __init__(self, position: Callable[[], int]) -> None:
        self._position = position
        self._ticked = asyncio.Event()

    def tick(self) -> None:
        """More audio was heard (call on the event loop): waits look again."""
        self._ticked.set()
        self._ticked = asyncio.Event()

    async def wait(self, ready: Callable[[], bool], seconds: float, wake: asyncio.Future | None = None) -> bool:
        """Until `ready()` (looked at as audio is heard, and once `wake` is done), at most `seconds`
        of further audio, or as long on the wall clock (at least `AUDIO_STOPPED_S`) with none
        heard. Whether it came ready."""
        until_ms = self._position() + seconds * 1000
        stopped_s = max(seconds, AUDIO_STOPPED_S)
        while not ready():
            if self._position() >= until_ms or (wake is not None and wake.done()):
                return ready()
            ticked = asyncio.ensure_future(self._ticked.wait())
            try:
                done, _ = await asyncio.wait([ticked, *([wake] if wake is not None else [])], timeout=stopped_s,
                                             return_when=asyncio.FIRST_COMPLETED)
            finally:
                ticked.cancel()
            if not done:
                return ready()
        return True
