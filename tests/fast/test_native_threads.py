"""A native library's computations run on its one thread (engine/native_threads.py): from whichever
thread they are asked, one after another, with the caller's result or exception, and again in a
forked child."""

import os
import signal
import threading

import pytest

from omnicli.engine.native_threads import LLAMA, WHISPER, NativeThread

native = NativeThread("omni-test")


def _idents_from(callers: int) -> tuple[set[int], set[int]]:
    ran, asked = set(), set()

    def ask() -> None:
        asked.add(threading.get_ident())
        ran.add(native.run(threading.get_ident))

    threads = [threading.Thread(target=ask) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return ran, asked


def test_calls_from_many_threads_all_run_on_one_other_thread():
    ran, asked = _idents_from(4)
    again, _ = _idents_from(2)
    assert len(ran) == 1 and ran == again
    assert not ran & asked and threading.get_ident() not in ran


def test_llama_cpp_and_ctranslate2_each_have_a_thread_of_their_own():
    """Each carries its own libgomp: a transcript need not wait for a token, nor a token for it."""
    assert LLAMA.run(threading.get_ident) != WHISPER.run(threading.get_ident)


def test_the_callers_result_and_exception_come_back():
    assert native.run(lambda a, b=0: a + b, 2, b=3) == 5
    with pytest.raises(ValueError, match="no such prompt"):
        native.run(lambda: (_ for _ in ()).throw(ValueError("no such prompt")))


def test_a_call_from_the_thread_itself_runs_in_place_instead_of_waiting_for_itself():
    outer = native.run(lambda: (threading.get_ident(), native.run(threading.get_ident)))
    assert outer[0] == outer[1]


def test_a_forked_child_gets_a_thread_of_its_own():
    native.run(threading.get_ident)  # the parent's thread exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its copy of the parent's executor has no thread behind it
        signal.alarm(10)  # waiting for that thread forever ends the child with SIGALRM
        try:
            os.write(write, b"ok" if native.run(lambda: 6 * 7) == 42 else b"no")
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert os.waitpid(pid, 0)[1] == 0
        assert os.read(read, 8) == b"ok"
    finally:
        os.close(read)
