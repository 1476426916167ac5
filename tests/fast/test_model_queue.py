"""One job per model at a time, even when the caller of the job running gives up on it."""

import asyncio
import threading

import pytest

from omnicli.engine.workers import ModelQueue

SAFETY_S = 10
"""Only so a broken test fails instead of hanging."""


def test_a_cancelled_caller_returns_at_once_but_the_next_job_waits_for_the_thread():
    queue = ModelQueue("voice")
    first_may_end = threading.Event()
    inside: list[str] = []
    overlapped: list[bool] = []

    def job(name: str, hold: threading.Event | None = None) -> str:
        overlapped.append(bool(inside))
        inside.append(name)
        if hold is not None:
            hold.wait(SAFETY_S)
        inside.remove(name)
        return name

    async def main():
        first = asyncio.create_task(queue.run(job, "first", first_may_end))
        while not inside:
            await asyncio.sleep(0.001)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first  # the caller is free at once, its thread still in the model
        assert inside == ["first"] and queue.busy
        second = asyncio.create_task(queue.run(job, "second"))
        await asyncio.sleep(0.05)
        assert not second.done() and inside == ["first"]  # not entered beside the first
        first_may_end.set()
        result = await asyncio.wait_for(second, SAFETY_S)
        return result, queue.busy

    result, busy = asyncio.run(main())
    assert result == "second" and overlapped == [False, False] and not busy


def test_a_failing_job_fails_its_caller_and_frees_the_model():
    queue = ModelQueue("asr")

    def broken() -> None:
        raise RuntimeError("the model broke")

    async def main():
        with pytest.raises(RuntimeError, match="the model broke"):
            await queue.run(broken)
        return await queue.run(lambda: "next")

    assert asyncio.run(main()) == "next"
