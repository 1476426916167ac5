"""Loading a GGUF model with llama-cpp-python, safely on CPUs with AMX.

llama-cpp-python compiles llama.cpp for the machine it is installed on. On an Intel CPU with AMX
(Sapphire Rapids and later) that build puts the weights in llama.cpp's AMX buffers, and under a
virtual machine that advertises AMX without enabling its tile state (seen on this project's
Firecracker VMs) the first matrix product crashes the process with a segmentation fault. Where
the CPU reports AMX, models are loaded without llama.cpp's extra CPU buffer types (AMX and the
repacked layouts), which llama-cpp-python's `Llama` has no argument for: the default model
parameters are wrapped while it loads. Elsewhere nothing changes.
"""

import functools
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_patching = threading.Lock()


@functools.cache
def cpu_has_amx() -> bool:
    """Whether the CPU reports Intel AMX (Linux's /proc/cpuinfo flags; False where unreadable)."""
    try:
        with Path("/proc/cpuinfo").open() as info:
            for line in info:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


@contextmanager
def plain_cpu_buffers() -> Iterator[None]:
    """While inside, llama-cpp-python loads models without llama.cpp's extra CPU buffer types,
    where the CPU has AMX (a no-op elsewhere). Also for running `llama_cpp.server` in process."""
    if not cpu_has_amx():
        yield
        return
    import llama_cpp.llama as wrapper

    bindings = wrapper.llama_cpp
    with _patching:
        default = bindings.llama_model_default_params

        def without_extra_buffers():
            params = default()
            params.use_extra_bufts = False
            return params

        bindings.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            bindings.llama_model_default_params = default


def load_llama(path: Path | str, **options: Any):
    """`llama_cpp.Llama(path, **options)`, with plain CPU buffers where the CPU has AMX."""
    from llama_cpp import Llama

    with plain_cpu_buffers():
        return Llama(model_path=str(path), **options)


_SERVE = ("import runpy\nfrom omnicli.engine.llama_load import plain_cpu_buffers\n"
          "with plain_cpu_buffers():\n    runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)")


def llama_server_command(*args: str) -> list[str]:
    """`python -m llama_cpp.server *args` (llama-cpp-python's OpenAI server, for tests and
    benchmarks that talk to it), with plain CPU buffers where the CPU has AMX."""
    return [sys.executable, "-c", _SERVE, *args]
