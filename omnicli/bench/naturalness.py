"""How natural each clip sounds, predicted: Microsoft's DNSMOS (its ITU-T P.808 MOS, and P.835's
signal, background and overall quality) from the ONNX models inside the `speechmos` wheel, on the
CPU. It is an optional extra (`pip install "omni[mos]"`), asked for with `bench-wer --mos`.
"""

import asyncio
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from omnicli.audio.pcm import resample
from omnicli.errors import UsageError

DNSMOS_RATE = 16000


class NaturalnessJudge(Protocol):
    """What predicts a clip's mean opinion score (bench-wer --mos)."""

    name: str
    """What the figures are, as the table and report name them."""

    async def preload(self) -> None:
        """Load the model before the first clip."""
        ...

    async def rate(self, samples: np.ndarray, rate: int) -> dict[str, float]:
        """`mos` (1-5), and any sub-scores, for one clip."""
        ...


class DnsMos:
    """DNSMOS from the `speechmos` wheel: P.808 MOS as `mos`, P.835 as `mos_sig`, `mos_bak`, `mos_ovrl`."""

    name = "DNSMOS P.808"

    def __init__(self) -> None:
        self._model = None
        self._lock = threading.Lock()

    @staticmethod
    def check() -> None:
        """Refuse --mos at once when the models are not installed."""
        import importlib.util

        if importlib.util.find_spec("speechmos") is None or importlib.util.find_spec("librosa") is None:
            raise UsageError('--mos needs DNSMOS: pip install "omni[mos]"')

    def _load(self):
        with self._lock:
            if self._model is None:
                from speechmos import dnsmos

                folder = Path(dnsmos.__file__).parent / "dnsmos_models"
                self._model = dnsmos.DNSMOS(str(folder / "sig_bak_ovr.onnx"), str(folder / "model_v8.onnx"))
            return self._model

    async def preload(self) -> None:
        """Load the two ONNX models, off the event loop."""
        await asyncio.to_thread(self._load)

    async def rate(self, samples: np.ndarray, rate: int) -> dict[str, float]:
        """The clip's DNSMOS figures, computed in a worker thread."""
        return await asyncio.to_thread(self._rate, samples, rate)

    def _rate(self, samples: np.ndarray, rate: int) -> dict[str, float]:
        audio = np.clip(resample(np.asarray(samples, dtype=np.float32), rate, DNSMOS_RATE), -1.0, 1.0)
        figures = self._load()(audio, DNSMOS_RATE, False)
        return {"mos": float(figures["p808_mos"]), "mos_sig": float(figures["sig_mos"]),
                "mos_bak": float(figures["bak_mos"]), "mos_ovrl": float(figures["ovrl_mos"])}
