"""Shared real parts for the tests: the omni CLI as a subprocess, a live `omni serve`, the
Whisper tiny.en judge from the package index, and a PulseAudio speaker."""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from speech_check import Judge

os.environ.setdefault("OMNI_LLM", "smollm2")
"""The suite runs on the smallest thinker (the default, Qwen2.5 1.5B, is ~6x slower per token):
the tests check omni's machinery; benchmarks/thinker.py measures answers. Tests of the default
itself clear it (`env={"OMNI_LLM": ""}`)."""

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def free_port() -> int:
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


@pytest.fixture(scope="session")
def omni() -> Omni:
    return Omni()


@pytest.fixture(scope="session")
def sentences() -> list[str]:
    return (DATA / "sentences_dev.txt").read_text().splitlines()


@pytest.fixture(scope="session")
def judge() -> Judge:
    return Judge()


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


@pytest.fixture(scope="session")
def omni_server():
    """A live `omni serve` (embedded engine, no key); its URL."""
    proc, url = start_server()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def pulse(tmp_path_factory):
    from pulse import PulseAudio

    audio = PulseAudio(tmp_path_factory.mktemp("pulse"))
    audio.start()
    yield audio
    audio.stop()
