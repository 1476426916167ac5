"""`omni serve` on 127.0.0.1 for the benchmarks that measure it: started on a free port, waited
for until healthy, stopped at the end; or its app on an engine of the benchmark's own, in process."""

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen) -> None:
    import httpx

    for _ in range(600):
        if server.poll() is not None:
            sys.exit(f"omni serve exited with {server.returncode} before it was healthy")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    sys.exit("omni serve did not become healthy in 5 minutes")


@contextlib.contextmanager
def omni_serve(llm: str | None = None) -> Iterator[str]:
    """A healthy `omni serve` (with `OMNI_LLM=llm` when given); its URL."""
    port = free_port()
    env = {**os.environ, **({"OMNI_LLM": llm} if llm else {})}
    server = subprocess.Popen([sys.executable, "-m", "omnicli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url
    finally:
        server.terminate()
        server.wait(30)


@contextlib.contextmanager
def serve_here(engine) -> Iterator[str]:
    """`omni serve`'s app on `engine`, in this process (uvicorn on a thread, 127.0.0.1); its URL."""
    import uvicorn

    from omnicli.server.app import create_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(create_app(engine), log_level="warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.1)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            thread.join(30)
