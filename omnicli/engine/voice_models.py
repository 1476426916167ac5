"""The embedded engine's voices: which model a name means, each loaded once per process, one piece spoken at a time.

Two families: hibari's `heart` (24 kHz, the default) and Piper's `joe` (22050 Hz), both in wheels; any Piper
`.onnx` model (with its `.onnx.json` beside it) can also be named by path.
"""

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnicli.engine.base import Voice
from omnicli.engine.hibari_voice import HEART, heart_path, load_hibari, synthesize_hibari
from omnicli.engine.piper_voice import JOE, checked_model_path, joe_path, load_piper, synthesize_piper
from omnicli.engine.voices import closest_voice, voice_menu
from omnicli.errors import UsageError

EMBEDDED_VOICES: tuple[Voice, ...] = (HEART, JOE)
"""The voices in omni's wheels, the default first."""

DEFAULT_VOICE = EMBEDDED_VOICES[0].name
"""The voice spoken when none is named (benchmarks/README.md, "Voices", says why this one)."""


@dataclass(frozen=True)
class VoiceModel:
    """A voice the embedded engine can load: its name, its family (piper or hibari) and its .onnx file."""

    name: str
    family: str
    path: Path


def embedded_model(name: str) -> VoiceModel:
    """The model of one of `EMBEDDED_VOICES`."""
    if name == HEART.name:
        return VoiceModel(HEART.name, "hibari", heart_path())
    return VoiceModel(JOE.name, "piper", joe_path())


def embedded_voices() -> list[Voice]:
    """The voices the embedded engine lists, each with the file it speaks from."""
    return [Voice(voice.name, voice.description, {"path": str(embedded_model(voice.name).path)},
                  voice.language, voice.gender, voice.quality) for voice in EMBEDDED_VOICES]


def resolve_voice(name: str | None) -> VoiceModel:
    """A voice name the embedded engine knows (OpenAI's mapped to the closest), or a path to a Piper .onnx model."""
    if name in (None, "", "default"):
        return embedded_model(DEFAULT_VOICE)
    if name in (voice.name for voice in EMBEDDED_VOICES):
        return embedded_model(name)
    if name == joe_path().stem:
        return embedded_model(JOE.name)
    path = checked_model_path(name)
    if path is not None:
        return VoiceModel(path.stem, "piper", path)
    closest = closest_voice(name, list(EMBEDDED_VOICES))
    if closest is not None:
        return embedded_model(closest.name)
    raise UsageError(
        f"unknown voice {name!r} for the embedded engine; voices: {voice_menu(list(EMBEDDED_VOICES))}, "
        "or a path to a Piper .onnx"
    )


_loaded: dict[Path, object] = {}
_load_lock = threading.Lock()


def load(model: VoiceModel):
    """The synthesizer for `model`, loaded on first use and kept for the process."""
    with _load_lock:
        voice = _loaded.get(model.path)
        if voice is None:
            voice = load_hibari(model.path) if model.family == "hibari" else load_piper(model.path)
            _loaded[model.path] = voice
        return voice


def synthesize(model: VoiceModel, loaded, text: str, speed: float) -> tuple[np.ndarray, int]:
    """Speak `text` (one piece) with `loaded`, the synthesizer of `model`, at `speed` times its pace."""
    if model.family == "hibari":
        return synthesize_hibari(loaded, text, speed)
    return synthesize_piper(loaded, text, speed)
