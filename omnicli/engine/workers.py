"""One queue per model: blocking inference runs in a worker thread, one job at a time, in the
order requests asked for it. Concurrent requests interleave fairly (sentence by sentence for the
voice) instead of racing for threads, and models that are not thread-safe (espeak inside Piper,
a llama.cpp context) are never entered twice at once. A long job may step aside for the jobs
waiting and queue again (`Turn.step_aside`)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable


class ModelQueue:
    """Runs one model's blocking jobs in a thread, one at a time, in the order they were asked for."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._newcomers = 0
        self._returning = 0

    def _lock(self) -> asyncio.Lock:
        # asyncio locks belong to one loop; an engine may outlive a loop (one REPL turn each).
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {other: held for other, held in self._locks.items() if not other.is_closed()}
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    @property
    def busy(self) -> bool:
        """A job holds the model (on this loop)."""
        return self._lock().locked()

    @property
    def newcomers(self) -> int:
        """Jobs waiting for their first turn (not ones that stepped aside)."""
        return self._newcomers

    @property
    def waiting(self) -> int:
        """Jobs waiting for the model: newcomers and those that stepped aside."""
        return self._newcomers + self._returning

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator["Turn"]:
        """Hold the model for a longer job (a whole generation). FIFO across waiters; the job
        may step aside for the others and queue again (`Turn.step_aside`)."""
        lock = self._lock()
        self._newcomers += 1
        try:
            await lock.acquire()
        finally:
            self._newcomers -= 1
        turn = Turn(self, lock)
        try:
            yield turn
        finally:
            if turn.held:
                lock.release()

    async def run(self, fn: Callable, *args):
        """Run one blocking job in a thread when this model's turn comes. A caller cancelled while
        the job runs returns at once, but the model stays held until the thread is done with it:
        the next job must not enter it beside the one still running (espeak is not thread-safe, and
        two Whisper runs at once slow each other down)."""
        lock = self._lock()
        await lock.acquire()
        try:
            job = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        except BaseException:
            lock.release()
            raise
        job.add_done_callback(_release(lock))
        return await asyncio.shield(job)


class Turn:
    """A job's hold on the model (`ModelQueue.turn`)."""

    def __init__(self, queue: ModelQueue, lock: asyncio.Lock) -> None:
        self._queue, self._lock = queue, lock
        self.held = True

    async def step_aside(self) -> None:
        """Let every job waiting now have the model first, then hold it again."""
        self._lock.release()
        self.held = False
        self._queue._returning += 1  # noqa: SLF001 - the queue's own count, kept by its turns
        try:
            await self._lock.acquire()
        finally:
            self._queue._returning -= 1  # noqa: SLF001
        self.held = True


def _release(lock: asyncio.Lock) -> Callable[[asyncio.Future], None]:
    def done(job: asyncio.Future) -> None:
        """Free the model once the job's thread is done with it."""
        lock.release()
        if not job.cancelled():
            job.exception()  # retrieved: a job nobody waits for any more does not log its failure as lost
    return done
