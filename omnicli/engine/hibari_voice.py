"""hibari's `heart` voice: a ~6 M-parameter ONNX model distilled from Kokoro-82M's af_heart, inside the `hibari-tts` wheel.

Only `heart` is used: hibari's other voices are downloaded at run time, which omni never does.
"""

from pathlib import Path

import numpy as np

from omnicli.engine.base import Voice

HEART = Voice(
    name="heart",
    description="US English, female (hibari, distilled from Kokoro-82M af_heart, 24000 Hz)",
    language="en-US",
    gender="female",
    quality="high",
)
"""The hibari voice omni ships, as it is listed."""

PAUSE_BEFORE_S, PAUSE_AFTER_S = 0.04, 0.15
"""The quiet kept before and after each piece's sound at speed 1 (shorter as it speaks faster), about
Piper's: hibari pads more, which, streamed piece by piece, is heard as a pause inside the answer
(benchmarks/README.md, "Voices")."""

NATIVE_SPEEDS = (0.5, 2.0)
"""The speeds hibari's model makes itself (its durations); beyond them the tempo is changed after."""


def heart_path() -> Path:
    """The .onnx file of the `heart` voice in the `hibari-tts` wheel (no download)."""
    from hibari.voices import voice_path

    return Path(voice_path(HEART.name, download_missing=False))


def load_hibari(path: Path):
    """A hibari synthesizer for the model at `path`, its ONNX session on one thread."""
    from hibari import Hibari

    voice = Hibari(voice=HEART.name, model=str(path), threads=1)
    _ = voice.g2p  # its lexicons and tagger, read now rather than on the first piece
    return voice


def synthesize_hibari(voice, text: str, speed: float) -> tuple[np.ndarray, int]:
    """Speak `text` (one piece) at `speed` times the voice's pace: hibari's own durations between
    0.5 and 2.0, the tempo changed beyond them (pitch unchanged)."""
    from omnicli.audio.pcm import trim_quiet_ends
    from omnicli.audio.tempo import change_tempo

    native = min(max(speed, NATIVE_SPEEDS[0]), NATIVE_SPEEDS[1])
    rate = voice.sample_rate
    samples = np.asarray(voice(text, speed=native), dtype=np.float32)
    samples = trim_quiet_ends(samples, rate, before_s=PAUSE_BEFORE_S / native, after_s=PAUSE_AFTER_S / native, relative=0.03)
    return change_tempo(samples, rate, speed / native), rate
