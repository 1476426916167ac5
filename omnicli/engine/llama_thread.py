"""One thread for every llama.cpp computation in this process.

llama.cpp's CPU backend computes each token on an OpenMP (libgomp) team: one team per thread that
calls it, kept alive as long as that thread lives, and a token crosses hundreds of the team's
barriers. While libgomp manages no more threads than the machine has cores, a thread waiting at a
barrier spins; once a second calling thread keeps its own team alive, libgomp puts every waiter to
sleep instead, and a token costs three times as long (SmolLM2-135M on two cores: 8.5 ms a token
from one thread, 29 ms from either of two; `python benchmarks/llama_threads.py`). The thinker's
answers ran in whichever worker thread was free, and the words check (engine/text_turn.py) in
another, so every answer after the first was that slow.

Here the native calls (loading, each token step, a prompt read ahead) run one after another on a
single thread, between which others interleave; locks and waits stay with the callers.
"""

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_executor: ThreadPoolExecutor | None = None
_ident: int | None = None
_starting = threading.Lock()


def _remember() -> None:
    global _ident
    _ident = threading.get_ident()


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _starting:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="omni-llama", initializer=_remember)
        return _executor


def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on the llama thread, waited for (directly when called from it). `fn`
    must not wait for anything that waits for this thread: hold locks around `run`, not inside."""
    if threading.get_ident() == _ident:
        return fn(*args, **kwargs)
    return _pool().submit(fn, *args, **kwargs).result()


def _forget_after_fork() -> None:
    """A forked child has no copy of the thread: it starts its own when it first needs one."""
    global _executor, _ident, _starting
    _executor, _ident, _starting = None, None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
