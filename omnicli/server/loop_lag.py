"""How late the event loop runs what is due: the one measure of anything blocking it.

Every session of `omni serve` (and the talk client's microphone, speaker and keys) shares one
event loop; a CPU-bound call on it delays them all. Rather than trust a reading of the code, a
small task asks to wake every `interval` seconds and records how late it woke: the lag is the
time the loop spent on something else that did not yield.
"""

import asyncio
from collections.abc import Callable


class LoopLag:
    """Measures the loop's lag, keeping each reading or handing it to `observe`."""

    def __init__(self, interval: float = 0.02, observe: Callable[[float], None] | None = None) -> None:
        self.interval = interval
        self._observe = observe
        self.lags: list[float] = []
        """Every lag measured, in seconds (kept for benchmarks; a server observes and forgets)."""
        self.keep = observe is None

    @property
    def worst(self) -> float:
        """The largest lag measured, in seconds (0 before any)."""
        return max(self.lags, default=0.0)

    async def run(self) -> None:
        """Measure until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time()
            await asyncio.sleep(self.interval)
            lag = max(0.0, loop.time() - asked - self.interval)
            if self.keep:
                self.lags.append(lag)
            if self._observe is not None:
                self._observe(lag)
