"""`omni speak --play` on a real (PulseAudio pipe-sink) speaker: what the sink receives is the speech."""

import os
import signal
import subprocess
import sys
import time

import pytest

from pulse import RATE
from speech_check import trim_silence

TEXT = "Please call Stella and ask her to bring these things with her from the store."


def test_played_audio_transcribes_back(omni, pulse, judge):
    pulse.take_speaker()
    result = omni("speak", TEXT, "--play", env=pulse.env)
    assert result.returncode == 0, result.stderr
    heard = trim_silence(pulse.take_speaker())
    assert len(heard) / RATE > 2.0
    assert judge.wer_of(TEXT, heard, RATE) < 0.2


def test_play_and_write_together(omni, pulse, judge, tmp_path):
    pulse.take_speaker()
    path = tmp_path / "copy.flac"
    result = omni("speak", TEXT, "--play", "-o", str(path), env=pulse.env)
    assert result.returncode == 0, result.stderr
    assert path.stat().st_size > 0
    assert judge.wer_of(TEXT, trim_silence(pulse.take_speaker()), RATE) < 0.2


def test_missing_output_device_is_one_line(omni, tmp_path):
    env = {"PULSE_SERVER": f"unix:{tmp_path}/nothing-here"}
    result = omni("speak", "Hello.", "--play", env=env)
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("omni: error:"), lines


@pytest.mark.parametrize("source", ["server", "embedded"])
def test_play_streams_from_server_and_engine(omni, pulse, judge, omni_server, source):
    pulse.take_speaker()
    extra = ["--server", omni_server, "--stream"] if source == "server" else []
    result = omni("speak", TEXT, "--play", *extra, env=pulse.env)
    assert result.returncode == 0, result.stderr
    assert judge.wer_of(TEXT, trim_silence(pulse.take_speaker()), RATE) < 0.2


def test_ctrl_c_stops_playback_at_once(pulse):
    """Synthesis of this text ends within a few seconds; its playback would take about a minute.
    Ctrl-C while it plays stops it there, not when the audio runs out."""
    pulse.take_speaker()
    env = {**os.environ, "OMNI_CONFIG": "/nonexistent/omni.toml", **pulse.env}
    proc = subprocess.Popen([sys.executable, "-m", "omnicli", "speak", " ".join([TEXT] * 12), "--play"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    heard = 0.0
    while heard < 8.0:  # well past the end of synthesis, with most of the minute still to play
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
        heard += len(trim_silence(pulse.take_speaker())) / RATE
    proc.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    code = proc.wait(timeout=60)
    stopped_after = time.monotonic() - interrupted
    proc.stderr.close()
    time.sleep(0.5)
    after = pulse.take_speaker()
    assert code == 130
    assert stopped_after < 5, f"playback went on for {stopped_after:.1f} s after Ctrl-C"
    assert len(after) == 0 or float(abs(after).max()) < 0.01  # the speaker went quiet
