"""`omni talk` in its own interpreter against a vLLM-Omni-shaped turn-based server: what a user
sees on stderr up to the very end of the process."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.cli_harness import CLEAN_ENV
from tests.helpers.scripted import ScriptedEngine
from tests.helpers.turn_speech import speech_file
from tests.helpers.vllm_realtime_shape import VllmTurnBasedShape, served


def omni_process(*args: str | Path) -> subprocess.CompletedProcess:
    """The real `omni` in its own interpreter: what a user sees on stderr, up to the very end
    (asyncio reports a task nobody awaited only when it is collected, even at exit)."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env["OMNI_CONFIG"] = CLEAN_ENV["OMNI_CONFIG"]
    return subprocess.run([sys.executable, "-m", "omnicli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60, stdin=subprocess.DEVNULL)


def test_a_model_the_server_rejects_ends_the_talk_with_its_message(tmp_path):
    shape = VllmTurnBasedShape(ScriptedEngine())
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    with served(shape.handler) as url:
        result = omni_process("talk", "--server", url, "--model", "no-such-model", "--input-file", speech_file(),
                              "--output-file", said, "--transcript", log)
    assert result.returncode == 1
    assert result.stderr.splitlines() == ["omni: error: the server refused the session: The model `no-such-model` does not exist."]
    assert not said.exists()
    assert [json.loads(line)["event"]["type"] for line in log.read_text().splitlines()] == ["error"]
