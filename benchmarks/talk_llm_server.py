"""`omni talk --llm-server` (llama-cpp-python's OpenAI server as the thinker) against the thinker
in process, side by side: the same spoken questions, headless, turns found by client VAD.

Both runs use the same GGUF (SmolLM2-135M-Instruct), local Whisper ears and the local Piper
voice; only where the thinker runs differs (on a 2-core machine the server competes for the same
CPUs, as it would on a laptop). Per turn: commit -> first audio delta.
Goal: --llm-server p50 within 1.3x of in process.
Usage: python benchmarks/talk_llm_server.py [--questions N]
"""

import argparse
import asyncio
import json
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf
from talk import quantile_ms  # benchmarks/talk.py: a quantile in ms, "-" for none

from omnicli.bench.scoring import percentile
from omnicli.engine.llama_load import llama_server_command

QUESTIONS = [
    "How many days are there in a week?", "What do cats like to eat?", "What color is the sky?",
    "Is it cold in winter?", "What is two plus two?", "Where do fish live?", "What do bees make?",
    "How many legs does a spider have?", "What is the opposite of hot?", "Can birds fly?",
]
GOAL = 1.3


def start_llama_server(gguf: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """llama-cpp-python's server on a free port, warmed up (its first completion is slow)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as handle:
        process = subprocess.Popen(llama_server_command("--model", str(gguf), "--host", "127.0.0.1", "--port", str(port)),
                                   stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"llama-cpp-python's server did not start; see {log}")
        time.sleep(0.1)
    httpx.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}, timeout=120)
    return process, url


def commit_to_first_audio(engine, dialog: Path, work: Path, label: str) -> list[float]:
    """Run the dialog through a headless talk session on `engine`; seconds per answered turn."""
    from omnicli.talk.client import TalkClient, TalkOptions
    from omnicli.talk.sources import FileVoice
    from omnicli.talk.speakers import FileSpeaker
    from omnicli.talk.transport import LocalTransport
    from omnicli.talk.view import EventLog
    from omnicli.turns.modes import TurnMode

    class Quiet:
        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    path = work / f"events-{label}.jsonl"
    log = EventLog(str(path))
    client = TalkClient(LocalTransport(engine), FileVoice(str(dialog)), FileSpeaker(), TalkOptions(turns=TurnMode.CLIENT), Quiet(), log)
    asyncio.run(client.run(asyncio.Event()))
    log.close()
    turns, current = [], None
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        kind = entry["event"]["type"]
        if kind == "input_audio_buffer.commit":
            current = {"commit": entry["t"]}
            turns.append(current)
        elif kind == "response.output_audio.delta" and current is not None:
            current.setdefault("audio", entry["t"])
    return [t["audio"] - t["commit"] for t in turns if "audio" in t]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    args = parser.parse_args()

    from omnicli.cli.engines import EngineChoice, Engines, stage_servers
    from omnicli.config import Connection
    from omnicli.engine.base import SpeechRequest
    from omnicli.engine.thinker import resolve_llm

    here = Engines()
    local = here.engine(EngineChoice(Connection(None, None)))

    async def speak(text):
        return np.concatenate([c.samples async for c in local.speech(SpeechRequest(text=text))])

    questions = QUESTIONS[: args.questions]
    gap = np.zeros(24000 * 4, dtype=np.float32)
    work = Path(tempfile.mkdtemp(prefix="omni-talk-llm-"))
    dialog = work / "dialog.wav"
    sf.write(dialog, np.concatenate([x for q in questions for x in (asyncio.run(speak(q)), gap)]), 24000)

    process, url = start_llama_server(resolve_llm(None), work / "llama-server.log")
    try:
        remote = here.engine(EngineChoice(Connection(None, None), stages=stage_servers(llm=url)))
        runs = {"--llm-server (llama-cpp-python)": commit_to_first_audio(remote, dialog, work, "server"),
                "in process": commit_to_first_audio(local, dialog, work, "local")}
    finally:
        process.terminate()
        process.wait(timeout=10)

    print(f"{len(questions)} spoken questions, headless, client VAD; thinker SmolLM2-135M-Instruct either way")
    print(f"{'commit -> first audio delta, ms':<40}{'turns':>6}{'p50':>8}{'p90':>8}")
    for name, values in runs.items():
        print(f"{name:<40}{len(values):>6}{quantile_ms(values, .5):>8}{quantile_ms(values, .9):>8}")
    server, inproc = (percentile(v, .5) for v in runs.values())
    if server is None or inproc is None:
        print(f"ratio of p50s: - (goal <= {GOAL}x): a run answered no turn")
        return
    ratio = server / inproc
    print(f"ratio of p50s: {ratio:.2f}x (goal <= {GOAL}x): {'met' if ratio <= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
