"""Tempo without pitch: Rubber Band (through pedalboard) stretches speech by an exact factor.

Not Piper's own length scale: each phoneme keeps at least one frame, so it cannot shorten speech
by much, `--speed 2` would not halve anything and 4x would be out of reach.
"""

import numpy as np


def change_tempo(samples: np.ndarray, rate: int, speed: float) -> np.ndarray:
    """`speed` 2.0 halves the duration; pitch and formants stay."""
    if speed == 1.0 or len(samples) == 0:
        return samples
    from pedalboard import time_stretch

    stretched = time_stretch(np.asarray(samples, dtype=np.float32)[None, :], float(rate), float(speed))
    return np.ascontiguousarray(stretched[0], dtype=np.float32)
