"""Tempo without pitch: Rubber Band (through pedalboard) stretches speech by an exact factor.

Piper's own length scale was the first choice, but it cannot go faster than ~0.5x duration (each
phoneme keeps at least one frame; measured 0.64x duration at length scale 0.5), so `--speed 2`
would not halve anything and 4x would be out of reach.
"""

import numpy as np


def change_tempo(samples: np.ndarray, rate: int, speed: float) -> np.ndarray:
    """`speed` 2.0 halves the duration; pitch and formants stay."""
    if speed == 1.0 or len(samples) == 0:
        return samples
    from pedalboard import time_stretch

    stretched = time_stretch(np.asarray(samples, dtype=np.float32)[None, :], float(rate), float(speed))
    return np.ascontiguousarray(stretched[0], dtype=np.float32)
