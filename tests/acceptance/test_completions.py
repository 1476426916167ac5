"""The shipped completion scripts are what the app generates today, and they complete."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

COMPLETIONS = Path(__file__).resolve().parents[2] / "completions"


def generate(shell: str) -> str:
    env = {**os.environ, "_OMNI_COMPLETE": f"source_{shell}"}
    result = subprocess.run(
        [sys.executable, "-c", "from omnicli.cli.main import main; main()"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    return result.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_are_current(shell):
    shipped = (COMPLETIONS / f"omni.{shell}").read_text()
    assert generate(shell) == shipped, (
        f"completions/omni.{shell} is stale; regenerate with: "
        f"_OMNI_COMPLETE=source_{shell} omni > completions/omni.{shell}"
    )


def complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_OMNI_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    result = subprocess.run(
        [sys.executable, "-c", "from omnicli.cli.main import main; main()"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    return result.stdout.split()


def test_bash_completion_completes_commands_and_options():
    assert "speak" in complete("omni sp", 1)
    assert "--format" in complete("omni speak --for", 2)
