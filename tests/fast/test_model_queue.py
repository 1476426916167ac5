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


def test_a_job_that_steps_aside_lets_the_waiting_one_go_first_then_holds_the_model_again():
    queue = ModelQueue("thinker")
    order: list[str] = []

    async def main():
        second_waits = asyncio.Event()

        async def first():
            async with queue.turn() as turn:
                order.append("first")
                await second_waits.wait()
                assert queue.newcomers == 1
                await turn.step_aside()
                order.append("first again")

        async def second():
            second_waits.set()
            async with queue.turn():
                assert queue.waiting == 1 and queue.newcomers == 0  # the first, queued again
                order.append("second")

        one = asyncio.create_task(first())
        await asyncio.sleep(0)
        await asyncio.wait_for(asyncio.gather(one, second()), SAFETY_S)
        return queue.busy, queue.waiting

    assert asyncio.run(main()) == (False, 0)
    assert order == ["first", "second", "first again"]


def test_a_job_cancelled_while_it_stood_aside_leaves_the_model_to_the_others():
    queue = ModelQueue("thinker")

    async def main():
        holder_in = asyncio.Event()

        async def first():
            async with queue.turn() as turn:
                while queue.newcomers == 0:
                    await asyncio.sleep(0.001)
                await turn.step_aside()

        async def holder():
            async with queue.turn():
                holder_in.set()
                await asyncio.sleep(SAFETY_S)

        one = asyncio.create_task(first())
        await asyncio.sleep(0)
        other = asyncio.create_task(holder())
        await asyncio.wait_for(holder_in.wait(), SAFETY_S)
        assert queue.waiting == 1  # the first, stood aside
        one.cancel()
        await asyncio.gather(one, return_exceptions=True)
        assert queue.busy and queue.waiting == 0  # the holder still has it: nobody released it twice
        other.cancel()
        await asyncio.gather(other, return_exceptions=True)
        async with queue.turn():  # free again
            return True

    assert asyncio.run(main())
