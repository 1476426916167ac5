"""The event-loop lag probe: a call that blocks the loop shows up as a late wake, at least as
long as the block (a lower bound: a busy machine can only make it later)."""

import asyncio
import time

from omnicli.server.loop_lag import LoopLag


def test_a_blocking_call_on_the_loop_is_measured():
    observed: list[float] = []
    kept, forwarded = LoopLag(interval=0.01), LoopLag(interval=0.01, observe=observed.append)

    async def go() -> None:
        probes = [asyncio.create_task(kept.run()), asyncio.create_task(forwarded.run())]
        await asyncio.sleep(0.05)
        time.sleep(0.2)  # what an unthreaded CPU-bound call does to every session
        await asyncio.sleep(0.05)
        for probe in probes:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)

    asyncio.run(go())
    assert kept.worst >= 0.18 and max(observed) >= 0.18
    assert forwarded.lags == []  # a server observes into its histogram and keeps nothing
