"""Semantic end of turn: Smart Turn v3.2 (pipecat's 8 MB ONNX audio model, BSD-2) says whether what
was said so far sounds finished, so a pause in the middle of a sentence does not end the turn.

The model ships inside the `pipecat-ai` wheel; it is read from disk (pipecat is never imported),
checked against a pinned SHA-256 and run with onnxruntime on one thread, like Silero. Its input is
the last 8 s of 16 kHz audio, zero-padded at the front, as Whisper log-mel features (faster-whisper's
numpy extractor); its output is the probability that the turn is complete.
"""

import hashlib
import threading
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.errors import OmniError

RATE = 16000
WINDOW_S = 8
MODEL_FILE = "smart-turn-v3.2-cpu.onnx"
MODEL_SHA256 = "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"
"""smart-turn-v3.2-cpu.onnx as pipecat-ai 1.14.0 ships it."""


def model_path() -> Path:
    """Where the Smart Turn model lies inside the installed pipecat-ai wheel."""
    from omnicli.packages import package_dir

    return package_dir("pipecat", "pipecat-ai") / "audio" / "turn" / "smart_turn" / "data" / MODEL_FILE


class SmartTurn:
    """Smart Turn's onnxruntime session and feature extractor, made on first use and shared by
    every caller of a process: both are safe to call from several threads (the extractor keeps
    no state between calls)."""

    def __init__(self) -> None:
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def load(self) -> tuple[Any, Any]:
        """The session and the extractor, loaded now if not yet; OmniError when the model is not the one expected."""
        with self._lock:
            if self._loaded is None:
                import onnxruntime
                from faster_whisper.feature_extractor import FeatureExtractor

                from omnicli.audio.blas import one_thread

                one_thread()  # the features are a matrix product: see audio/blas.py

                path = model_path()
                data = path.read_bytes() if path.is_file() else b""
                if hashlib.sha256(data).hexdigest() != MODEL_SHA256:
                    raise OmniError(f"{path} is not the Smart Turn v3.2 model omni expects (pip install pipecat-ai==1.14.0)")
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
                session = onnxruntime.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])
                self._loaded = (session, FeatureExtractor(feature_size=80, sampling_rate=RATE, chunk_length=WINDOW_S))
            return self._loaded

    def features(self, audio: np.ndarray) -> np.ndarray:
        """(80, 800) log-mel features of the last 8 s of 16 kHz `audio`, padded at the front."""
        _, extractor = self.load()
        window = RATE * WINDOW_S
        x = np.asarray(audio, dtype=np.float32)[-window:]
        x = np.pad(x, (window - len(x), 0))
        x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)  # Whisper's zero-mean, unit-variance input
        return extractor(x, padding=0).astype(np.float32)

    def completion_probability(self, audio: np.ndarray) -> float:
        """How likely it is that the speaker has finished, from 16 kHz mono float audio of the turn."""
        session, _ = self.load()
        logits = session.run(None, {"input_features": self.features(audio)[None]})
        return float(np.asarray(logits[0]).reshape(-1)[0])
