"""One thread for each native library that computes on an OpenMP team: llama.cpp and CTranslate2.

Both compute on an OpenMP (libgomp) team, one team per thread that calls them, kept alive as long
as that thread lives, and a token or a Whisper layer crosses many of the team's barriers. While
libgomp manages no more threads than the machine has cores, a thread waiting at a barrier spins;
once a second calling thread keeps its own team alive, libgomp puts every waiter to sleep instead,
and every token and every transcript is then much slower than from one calling thread
(`python benchmarks/native_threads.py` compares the two).

Here each library's native calls (loading, each token step, a prompt read ahead, a transcript)
run one after another on that library's one thread, between which others interleave; locks and
waits stay with the callers. The two libraries carry their own libgomp each, so one thread apiece.
"""

import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class NativeThread:
    """One long-lived thread on which a native library's calls run, one after another."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._forget()
        _all.add(self)

    def _forget(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._ident: int | None = None
        self._starting = threading.Lock()

    def _remember(self) -> None:
        self._ident = threading.get_ident()

    def _pool(self) -> ThreadPoolExecutor:
        with self._starting:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name,
                                                    initializer=self._remember)
            return self._executor

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on this thread, waited for (directly when called from it). `fn`
        must not wait for anything that waits for this thread: hold locks around `run`, not inside."""
        if threading.get_ident() == self._ident:
            return fn(*args, **kwargs)
        return self._pool().submit(fn, *args, **kwargs).result()


_all: "weakref.WeakSet[NativeThread]" = weakref.WeakSet()

LLAMA = NativeThread("omni-llama")
"""llama.cpp: the thinker and the words check."""
WHISPER = NativeThread("omni-whisper")
"""CTranslate2: Whisper."""


def _forget_after_fork() -> None:
    """A forked child has no copy of the threads: each starts its own when it first needs one."""
    for native in list(_all):
        native._forget()  # noqa: SLF001


os.register_at_fork(after_in_child=_forget_after_fork)
