"""Audio container formats omni reads and writes, and the one place that encodes them.

Everything inside omni is float32 mono; bytes exist only at the edges (files, stdout, HTTP).
`pcm` is raw little-endian PCM16 mono with no header.
"""

import io
import re
from enum import Enum
from pathlib import Path
from typing import Any

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import UsageError


class AudioFormat(str, Enum):
    """The audio file formats omni reads and writes, by their `--format` names."""

    WAV = "wav"
    MP3 = "mp3"
    FLAC = "flac"
    OPUS = "opus"
    PCM = "pcm"

    @property
    def content_type(self) -> str:
        """The MIME type an HTTP answer in this format carries."""
        return _CONTENT_TYPES[self]


SUPPORTED_FORMATS = ", ".join(f.value for f in AudioFormat)
PCM_RATE = SPEECH_RATE
"""The rate of headerless `pcm` unless a caller says otherwise: the engines' common contract."""

_CONTENT_TYPES = {
    AudioFormat.WAV: "audio/wav",
    AudioFormat.MP3: "audio/mpeg",
    AudioFormat.FLAC: "audio/flac",
    AudioFormat.OPUS: "audio/ogg",
    AudioFormat.PCM: "audio/pcm",
}
_SUFFIXES = {
    ".wav": AudioFormat.WAV,
    ".mp3": AudioFormat.MP3,
    ".flac": AudioFormat.FLAC,
    ".opus": AudioFormat.OPUS,
    ".ogg": AudioFormat.OPUS,
    ".pcm": AudioFormat.PCM,
    ".raw": AudioFormat.PCM,
}
# soundfile (format, subtype) per container; PCM is handled without libsndfile.
_SNDFILE = {
    AudioFormat.WAV: ("WAV", "PCM_16"),
    AudioFormat.MP3: ("MP3", "MPEG_LAYER_III"),
    AudioFormat.FLAC: ("FLAC", "PCM_16"),
    AudioFormat.OPUS: ("OGG", "OPUS"),
}
_RATES = {
    AudioFormat.OPUS: (8000, 12000, 16000, 24000, 48000),
    AudioFormat.MP3: (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
}


def parse_format(value: str) -> AudioFormat:
    """Read a user's format name; `pcm16` is an alias of `pcm` (chat APIs spell it so)."""
    name = value.strip().lower()
    if name == "pcm16":
        name = "pcm"
    try:
        return AudioFormat(name)
    except ValueError:
        raise UsageError(
            f"unsupported audio format {value!r}; supported formats: {SUPPORTED_FORMATS}"
        ) from None


def format_from_path(path: str | Path) -> AudioFormat | None:
    """The format a file name's suffix names, or None when it names none."""
    return _SUFFIXES.get(Path(path).suffix.lower())


def choose_format(explicit: str | None, path: str | None) -> AudioFormat:
    """`--format`, which must agree with the output's suffix when that names a format; otherwise
    the suffix; otherwise WAV. (MP3 bytes in a .wav file fool every player that trusts the name.)"""
    if explicit:
        fmt = parse_format(explicit)
        named = format_from_path(path) if path and path != "-" else None
        if named is not None and named is not fmt:
            raise UsageError(
                f"--format {explicit} contradicts the output {path} (a {named.value} file); "
                "drop --format or change the suffix"
            )
        return fmt
    if path and path != "-":
        suffix = Path(path).suffix
        if suffix:
            from_suffix = format_from_path(path)
            if from_suffix is None:
                raise UsageError(
                    f"cannot tell the audio format from {path!r}; use --format "
                    f"({SUPPORTED_FORMATS})"
                )
            return from_suffix
    return AudioFormat.WAV


def check_rate(fmt: AudioFormat, rate: int) -> None:
    """Refuse, before any work, a sample rate the format cannot be written at."""
    allowed = _RATES.get(fmt)
    if rate <= 0 or (allowed and rate not in allowed):
        choices = ", ".join(map(str, allowed)) if allowed else "a positive rate"
        raise UsageError(f"{fmt.value} cannot be written at {rate} Hz; use {choices}")


def encode(samples, rate: int, fmt: AudioFormat) -> bytes:
    """Encode float32 mono samples in [-1, 1] into a complete file of `fmt`."""
    import numpy as np

    samples = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    if fmt is AudioFormat.PCM:
        from omnicli.audio.pcm import float_to_pcm16

        return float_to_pcm16(samples)
    import soundfile as sf

    check_rate(fmt, rate)
    container, subtype = _SNDFILE[fmt]
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format=container, subtype=subtype)
    return buffer.getvalue()


def decode(data: bytes, *, pcm_rate: int = PCM_RATE, fmt: AudioFormat | None = None):
    """Decode a complete file (or raw PCM16 when `fmt` is PCM) to (float32 mono, rate).

    Raises ValueError when the bytes are not audio.
    """
    import numpy as np

    if fmt is AudioFormat.PCM:
        from omnicli.audio.pcm import pcm16_to_float

        return pcm16_to_float(data), pcm_rate
    import soundfile as sf

    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
        reason = getattr(exc, "error_string", None) or re.sub(r"<[^<>]* at 0x[0-9a-fA-F]+>:?\s*", "", str(exc))
        raise ValueError(f"not a decodable audio file ({reason.strip() or 'unknown format'})") from exc
    return np.ascontiguousarray(samples.mean(axis=1), dtype=np.float32), int(rate)


def read_audio_file(path: str | Path, flag: str) -> tuple[bytes, Any, int]:
    """The audio file a flag names: (its bytes, its samples, their rate); one usage error naming
    the flag where it cannot be read or decoded."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {flag} {path}: {exc.strerror or exc}") from exc
    try:
        samples, rate = decode(data)
    except ValueError as exc:
        raise UsageError(f"{flag} {path} is not a readable audio file") from exc
    return data, samples, rate
