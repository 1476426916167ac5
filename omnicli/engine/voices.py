"""Which voices a client may ask for over a network: names from the engine's list only.

A Piper `.onnx` path is a local-CLI feature; over HTTP or a realtime socket, probing a path must
neither work nor tell anything about the server's files.
"""

from omnicli.engine.base import Engine
from omnicli.errors import OmniError, UsageError


async def check_served_voice(engine: Engine, voice: str | None) -> None:
    """Refuse a path-like or unlisted voice with one clear UsageError."""
    if voice is None:
        return
    if any(mark in voice for mark in ("/", "\\", "~")) or voice.startswith(".") or voice.endswith(".onnx"):
        raise UsageError("voice must be a voice name (GET /v1/audio/voices lists them), not a path")
    try:
        names = [v.name for v in await engine.voices()]
    except OmniError:
        return  # an engine that cannot list its voices judges the name itself
    if names and voice not in names:
        raise UsageError(f"unknown voice {voice!r}; voices: {', '.join(names)}")
