"""Turn-taking test audio laid out in time at 24 kHz, whatever speaks it (Piper's real voice in
`turn_speech.py`, tone syllables in `synthetic_speech.py`): silence, speech with silence around
it, two pieces of speech with a pause between, and a clip as a WAV file."""

import atexit
import shutil
import tempfile
from pathlib import Path

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE


def quiet(seconds: float) -> np.ndarray:
    """`seconds` of silence at 24 kHz."""
    return np.zeros(int(seconds * SPEECH_RATE), np.float32)


def with_silence(speech: np.ndarray, tail_s: float) -> np.ndarray:
    """One second of silence, `speech`, then `tail_s` of silence."""
    return np.concatenate([quiet(1.0), speech, quiet(tail_s)])


def with_pause(first: np.ndarray, second: np.ndarray, pause_s: float, tail_s: float) -> np.ndarray:
    """One second of silence, `first`, a pause, `second`, then `tail_s` of silence."""
    return np.concatenate([quiet(1.0), first, quiet(pause_s), second, quiet(tail_s)])


def wav_file(samples: np.ndarray, name: str) -> Path:
    """`samples` as a WAV file `name` in a temporary folder removed when the test run ends."""
    from omnicli.audio.formats import AudioFormat, encode

    folder = tempfile.mkdtemp(prefix="omni-clips-")
    atexit.register(shutil.rmtree, folder, True)
    path = Path(folder) / name
    path.write_bytes(encode(samples, SPEECH_RATE, AudioFormat.WAV))
    return path
