"""Shared real parts for the tests: the omni CLI as a subprocess, a live `omni serve`, the
Whisper tiny.en judge from the package index, and a PulseAudio speaker."""

import os

import pytest

from tests.helpers.omni_processes import DATA, Omni, start_server
from tests.helpers.speech_check import Judge

os.environ.setdefault("OMNI_LLM", "smollm2")
"""The suite runs on the smallest thinker (the default, Qwen2.5 1.5B, is ~6x slower per token):
the tests check omni's machinery; benchmarks/thinker.py measures answers. Tests of the default
itself clear it (`env={"OMNI_LLM": ""}`)."""



@pytest.fixture(scope="session")
def omni() -> Omni:
    return Omni()


@pytest.fixture(scope="session")
def sentences() -> list[str]:
    return (DATA / "sentences_dev.txt").read_text().splitlines()


@pytest.fixture(scope="session")
def judge() -> Judge:
    return Judge()


@pytest.fixture(scope="session")
def omni_server():
    """A live `omni serve` (embedded engine, no key); its URL."""
    proc, url = start_server()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def pulse(tmp_path_factory):
    from tests.helpers.pulse import PulseAudio

    audio = PulseAudio(tmp_path_factory.mktemp("pulse"))
    audio.start()
    yield audio
    audio.stop()
