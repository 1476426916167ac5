"""Files given with `-a/--attach`: audio becomes an `input_audio` part, an image an image part."""

from pathlib import Path

from omnicli.engine.base import AudioPart, ImagePart, Part
from omnicli.errors import UsageError

AUDIO_SUFFIXES = {".wav": "wav", ".mp3": "mp3", ".flac": "flac", ".ogg": "ogg", ".opus": "ogg"}
IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif"}


def read_attachment(path: str) -> Part:
    suffix = Path(path).suffix.lower()
    if suffix not in AUDIO_SUFFIXES and suffix not in IMAGE_SUFFIXES:
        kinds = ", ".join(sorted(AUDIO_SUFFIXES) + sorted(IMAGE_SUFFIXES))
        raise UsageError(f"cannot attach {path}: unknown kind of file (attach {kinds})")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read attachment {path}: {exc.strerror or exc}") from exc
    if suffix in IMAGE_SUFFIXES:
        return ImagePart(data, IMAGE_SUFFIXES[suffix])
    from omnicli.audio.formats import decode

    try:
        decode(data)
    except ValueError as exc:
        raise UsageError(f"cannot attach {path}: not a readable audio file") from exc
    return AudioPart(data, AUDIO_SUFFIXES[suffix])
