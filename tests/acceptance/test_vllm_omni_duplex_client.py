"""vLLM-Omni's own duplex client (`vllm_omni.clients.duplex`, run in a process of its own, as its
docstring shows) against `omni serve`'s duplex lane over a scripted engine."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import resample
from omnicli.turns.models import TurnModels
from tests.fast.test_talk_duplex_serve import SAFETY_S, serving
from tests.helpers.realtime_harness import silence
from tests.helpers.scripted import ScriptedEngine, answer
from tests.helpers.turn_speech import speech

DRIVER = Path(__file__).resolve().parents[1] / "helpers" / "vllm_duplex_driver.py"


def _question_wav_16k(path: Path) -> Path:
    sf.write(str(path), resample(np.concatenate([speech(), silence(1.5)]), SPEECH_RATE, 16000), 16000, subtype="PCM_16")
    return path


def test_vllm_omnis_own_duplex_client_is_answered_by_omni_serve(tmp_path):
    """vLLM-Omni's `DuplexClient` itself (vllm_omni/clients/duplex.py, run as its docstring shows):
    it connects with `autostart=0` and opens the session with `session.update`, streams PCM16 with a
    per-append `format`, acknowledges every numbered event, heartbeats, acks playback; the server's
    turn detection ends the question and the answer comes back through the client's own demux."""
    wav = _question_wav_16k(tmp_path / "question-16k.wav")
    with serving(ScriptedEngine(chat=answer("It is noon.", audio_seconds=1.0)), TurnModels()) as url:
        proc = subprocess.run([sys.executable, str(DRIVER), url.replace("http://", "ws://"), str(wav)],
                              capture_output=True, text=True, timeout=SAFETY_S * 4)
    if proc.returncode == 77:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert seen["session_id"].startswith("sess") and seen["created"]["capabilities"]["supports_session_resume"]
    assert seen["decisions"][-1] == "speak" and set(seen["decisions"][:-1]) <= {"listen"}
    assert seen["audio_bytes"] == 2 * SPEECH_RATE and seen["played_ms"] == 1000  # 1 s of 24 kHz PCM16, all of it
    assert seen["transcript"].strip() == "It is noon."
    events = seen["events"]
    kinds = [e["type"] for e in events]
    assert "error" not in kinds, [e for e in events if e["type"] == "error"]
    seqs = [e["server_event_seq"] for e in events if "server_event_seq" in e]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    acknowledged = [e["event"]["played_ms"] for e in events if e["type"] == "playback.acknowledged"]
    assert acknowledged and acknowledged[-1] == 1000
    assert kinds[-1] == "session.closed"
