"""numpy's BLAS (OpenBLAS, in numpy's wheels) on one thread.

omni's own matrix products are small: the log-mel features Smart Turn and Whisper read (a few
MFLOP). OpenBLAS runs them on a team of threads that spin for a while after each call, and on few
cores that spinning takes a core from whichever model runs next (the words check right after Smart
Turn's features, for one). The models compute on threads of their own, budgeted in engine/cores.py.
"""

import threading

_limited = False
_lock = threading.Lock()


def one_thread() -> None:
    """Limit the process's BLAS to one thread (once; it holds for the whole process)."""
    global _limited
    with _lock:
        if not _limited:
            from threadpoolctl import threadpool_limits

            threadpool_limits(1, user_api="blas")
            _limited = True
