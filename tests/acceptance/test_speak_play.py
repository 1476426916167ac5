"""`omni speak --play` on a real (PulseAudio pipe-sink) speaker: what the sink receives is the speech."""

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
