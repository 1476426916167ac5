"""Memory a closed realtime session freed, given back to the system.

A session's audio passes through worker threads (base64, VAD, Whisper), and glibc keeps what
they free in its per-thread arenas instead of returning it, so without this a server's RSS grew
by about the size of every closed session's buffer. `malloc_trim(0)` returns the free pages of
every arena. Where the C library is not glibc it does nothing.
"""

import asyncio
import ctypes
import ctypes.util
import gc
from collections.abc import Callable


class HeapTrimmer:
    """Gives freed heap memory back to the system, one trim at a time."""

    def __init__(self) -> None:
        self._trim = _malloc_trim()
        self._lock = asyncio.Lock()

    async def trim(self) -> None:
        """Return the free pages now (in a worker thread); skipped while another trim runs."""
        if self._trim is None or self._lock.locked():
            return
        async with self._lock:
            await asyncio.to_thread(self._collect_and_trim, self._trim)

    @staticmethod
    def _collect_and_trim(trim: Callable[[int], int]) -> None:
        gc.collect()  # buffers held in reference cycles (a cancelled task's frames) are freed first
        trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc: no malloc_trim
        return None
