"""Files given with `-a/--attach`: audio becomes an `input_audio` part, an image an image part.

Audio suffixes come from the one table in `audio/formats.py` (`.ogg` is Opus there and here);
headerless PCM cannot be attached, since nothing would say its rate.
"""

from pathlib import Path

from omnicli.audio.formats import AudioFormat, format_from_path
from omnicli.engine.base import AudioPart, ImagePart, Part
from omnicli.errors import UsageError

IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif"}


def _audio_format(path: str) -> AudioFormat | None:
    """The attachable audio format `path`'s suffix names, if any."""
    fmt = format_from_path(path)
    return None if fmt is AudioFormat.PCM else fmt


def read_attachment(path: str) -> Part:
    """The file as a message part, audio checked to decode, or a usage error naming what can be attached."""
    suffix = Path(path).suffix.lower()
    fmt = _audio_format(path)
    if fmt is None and suffix not in IMAGE_SUFFIXES:
        audio = sorted({f.value for f in AudioFormat} - {AudioFormat.PCM.value})
        raise UsageError(f"cannot attach {path}: unknown kind of file (attach {', '.join(audio)} audio "
                         f"or {', '.join(sorted(IMAGE_SUFFIXES))} images)")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read attachment {path}: {exc.strerror or exc}") from exc
    if fmt is None:
        return ImagePart(data, IMAGE_SUFFIXES[suffix])
    from omnicli.audio.formats import decode

    try:
        decode(data)
    except ValueError as exc:
        raise UsageError(f"cannot attach {path}: not a readable audio file") from exc
    return AudioPart(data, fmt.value)
