"""Memory a closed realtime session freed, given back to the system.

A closed session's audio buffers stay held in reference cycles until a full garbage collection,
which a server that makes few Python objects seldom runs, and what worker threads (base64, VAD,
Whisper) free stays in glibc's per-thread arenas instead of going back to the system; so without
this a server's RSS grew by about the size of every closed session's buffer. A collection, then
`malloc_trim(0)`, returns both. Where the C library is not glibc only the collection runs.
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
        self._running = False
        self._again = False

    async def trim(self) -> None:
        """Free what closed sessions left and return it (in a worker thread); asked while a trim
        runs, one more follows it."""
        if self._running:
            self._again = True
            return
        self._running = True
        try:
            self._again = True
            while self._again:
                self._again = False
                await asyncio.to_thread(self._collect_and_trim, self._trim)
        finally:
            self._running = False

    @staticmethod
    def _collect_and_trim(trim: Callable[[int], int] | None) -> None:
        gc.collect()
        if trim is not None:
            trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc: no malloc_trim
        return None
