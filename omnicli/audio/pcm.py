"""PCM16 <-> float32 conversion, loudness and resampling: the sample-level helpers every layer shares."""

import numpy as np


def float_to_pcm16(samples: np.ndarray) -> bytes:
    """Float samples in [-1, 1] as little-endian PCM16 bytes (clipped, not wrapped)."""
    clipped = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


def pcm16_to_float(data: bytes) -> np.ndarray:
    """Little-endian PCM16 bytes as float32 samples in [-1, 1)."""
    if len(data) % 2:
        raise ValueError("PCM16 data must hold whole 2-byte samples")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def rms(samples: np.ndarray) -> float:
    """The loudness of `samples` as their root mean square; 0 for none."""
    return float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if len(samples) else 0.0


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Resample a whole clip (soxr, high quality). Streams use `soxr.ResampleStream` instead."""
    if from_rate == to_rate or len(samples) == 0:
        return np.asarray(samples, dtype=np.float32)
    import soxr

    return soxr.resample(np.asarray(samples, dtype=np.float32), from_rate, to_rate).astype(
        np.float32
    )


def trim_quiet_ends(samples: np.ndarray, rate: int, *, before_s: float, after_s: float,
                    relative: float = 0.05) -> np.ndarray:
    """The clip from `before_s` before its first loud sample to `after_s` after its last, a loud
    sample being one above `relative` of the peak; a clip with no sound is returned whole."""
    peak = float(np.max(np.abs(samples))) if len(samples) else 0.0
    if peak <= 0:
        return samples
    loud = np.flatnonzero(np.abs(samples) > relative * peak)
    return samples[max(0, loud[0] - int(before_s * rate)) : loud[-1] + 1 + int(after_s * rate)]
