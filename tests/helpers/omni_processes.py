"""Real omni processes for the acceptance tests: the CLI as a subprocess, `omni serve` on a free
port, and the dev set's text."""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

DATA = Path(__file__).resolve().parents[1] / "data"
"""The dev set (`meta_dev.lst`, `sentences_dev.txt`)."""


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Omni:
    """Runs `python -m omnicli` for real, with a clean environment for server settings."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("OMNI_SERVER", "OMNI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
        self.env["OMNI_CONFIG"] = "/nonexistent/omni.toml"
        self.env.update(env or {})

    def __call__(self, *args: str, input: bytes | None = None, timeout: float = 180, env=None):
        return subprocess.run(
            [sys.executable, "-m", "omnicli", *args],
            input=input if input is not None else b"",
            capture_output=True,
            timeout=timeout,
            env={**self.env, **(env or {})},
        )


def start_server(*args: str, log=None, timeout: float = 60):
    """Start `omni serve --port 0`; (process, URL) once /health answers.

    The server binds its port before loading any model and names it on stderr, so no other
    process can take a port picked here beforehand. `log`: an open file for its stderr (kept)."""
    own_log = log is None
    if own_log:
        log = tempfile.NamedTemporaryFile(prefix="omni-serve-", suffix=".log")
    proc = subprocess.Popen([sys.executable, "-m", "omnicli", "serve", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=log)
    url, deadline = None, time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            url = url or _announced_url(Path(log.name))
            try:
                if url and httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    return proc, url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        proc.kill()
        raise RuntimeError(f"omni serve did not start: {Path(log.name).read_text(errors='replace')[-2000:]}")
    finally:
        if own_log:
            log.close()  # the server keeps its own descriptor; the name goes


def _announced_url(log: Path) -> str | None:
    found = re.search(r"listening on (http://\S+) ", log.read_text(errors="replace"))
    return found.group(1) if found else None
