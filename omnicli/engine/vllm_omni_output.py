"""What vLLM-Omni's AsyncOmni yields, read once into omni's text and 24 kHz audio chunks.

Its outputs come in several shapes, all read here and nowhere else:
- `final_output_type` says whether an output carries text (the thinker) or audio (the talker);
- text arrives as deltas (AsyncOmni makes streams DELTA when no sampling params say otherwise);
- `multimodal_output` is a `MultimodalPayload` or a plain dict; its audio is under "audio" (or
  "model_outputs"), as one tensor per step (a new piece each time) or as a list that grows with
  every step (only its new tail is new);
- the sample rate is "sr" (or "sample_rate"), an int, a 0-d tensor or a list of them (the latest
  counts), and absent for Qwen3-Omni, whose talker speaks 24 kHz;
- a failed request is an output with `error` set.
Older releases wrap each output (`.request_output`, sometimes a list): both are read.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.audio.pcm import resample
from omnicli.errors import OmniError, UsageError

DEFAULT_RATE = 24000
_RATE_KEYS = ("sr", "sample_rate", "audio_sample_rate")
_AUDIO_KEYS = ("audio", "model_outputs")


def sample_rate(payload: Mapping) -> int:
    """The rate of a payload's audio; 24 kHz where it names none."""
    for key in _RATE_KEYS:
        value = payload.get(key)
        if isinstance(value, (list, tuple)):
            value = next((item for item in reversed(value) if item is not None), None)
        if value is not None:
            rate = int(value.item() if hasattr(value, "item") else value)
            if rate <= 0:
                raise OmniError(f"vLLM-Omni gave audio at an impossible sample rate ({rate})")
            return rate
    return DEFAULT_RATE


def samples(value: Any) -> np.ndarray:
    """A tensor or array of any shape (and any float dtype) as flat float32 samples."""
    if hasattr(value, "detach"):  # a torch tensor, on any device, bf16 included
        value = value.detach().float().cpu().numpy()
    return np.asarray(value, dtype=np.float32).reshape(-1)


@dataclass
class OutputReader:
    """Reads one request's outputs in order: the new text and the new audio of each."""

    text: list[str] = field(default_factory=list)
    _seen_chunks: int = 0

    def read(self, output: Any) -> tuple[str, list[AudioChunk]]:
        """The text delta and the audio chunks (24 kHz) that `output` adds; raises its error."""
        said, chunks = [], []
        for result in _unwrapped(output):
            error = getattr(result, "error", None)
            if error:
                raise _error(result, error)
            kind = getattr(output, "final_output_type", None) or getattr(result, "final_output_type", "text")
            if kind == "audio":
                chunks.extend(self._audio(result))
            elif kind == "text":
                piece = "".join(c.text for c in getattr(result, "outputs", []) if getattr(c, "text", None))
                if piece:
                    said.append(piece)
        self.text.extend(said)
        return "".join(said), chunks

    def _audio(self, result: Any) -> list[AudioChunk]:
        payload = getattr(result, "multimodal_output", None)
        if not payload:
            completions = getattr(result, "outputs", None) or []
            payload = next((c.multimodal_output for c in completions if getattr(c, "multimodal_output", None)), None)
        if not isinstance(payload, Mapping):
            return []
        key = next((k for k in _AUDIO_KEYS if k in payload), None)
        if key is None:
            return []
        value = payload[key]
        if isinstance(value, (list, tuple)):  # grows with each step: only its tail is new
            new, self._seen_chunks = list(value[self._seen_chunks:]), len(value)
        else:
            new = [] if value is None else [value]
        rate = sample_rate(payload)
        chunks = []
        for piece in new:
            flat = samples(piece)
            if flat.size:
                chunks.append(AudioChunk(resample(flat, rate, SPEECH_RATE)))
        return chunks


def _unwrapped(output: Any) -> Iterator[Any]:
    inner = getattr(output, "request_output", None)
    if inner is None:
        yield output
    elif isinstance(inner, list):
        yield from inner
    else:
        yield inner


def _error(result: Any, error: str) -> OmniError:
    status = getattr(result, "error_status_code", None)
    message = f"vLLM-Omni failed the request: {error}"
    return UsageError(message) if status is not None and 400 <= int(status) < 500 else OmniError(message)
