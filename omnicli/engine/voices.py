"""Which voice a client's name means: the engine's own names, and OpenAI's mapped to the closest.

OpenAI clients send OpenAI's voice names (alloy, nova, ...); a drop-in server speaks each with the
voice it has that is closest (the same gender where it has one, else its first, the default).
A Piper `.onnx` path is a local-CLI feature; over HTTP or a realtime socket, probing a path must
neither work nor tell anything about the server's files.
"""

from omnicli.engine.base import Engine, Voice
from omnicli.errors import OmniError, UsageError

OPENAI_VOICES: dict[str, str] = {
    "alloy": "neutral", "ash": "male", "ballad": "male", "coral": "female", "echo": "male",
    "fable": "male", "nova": "female", "onyx": "male", "sage": "female", "shimmer": "female",
    "verse": "male", "marin": "female", "cedar": "male",
}
"""Every voice name OpenAI documents for speech and realtime, with the gender it is heard as."""


def closest_voice(requested: str, voices: list[Voice]) -> Voice | None:
    """The voice of `voices` that OpenAI's voice `requested` is spoken with; None for a name
    that is not OpenAI's (or no voices)."""
    gender = OPENAI_VOICES.get(requested.strip().lower())
    if gender is None or not voices:
        return None
    return next((voice for voice in voices if voice.gender and voice.gender == gender), voices[0])


def openai_names_for(voice: Voice, voices: list[Voice]) -> list[str]:
    """OpenAI's voice names that `voice`, one of `voices`, speaks."""
    own = {v.name for v in voices}  # an engine's own voice of an OpenAI name is taken as itself
    return [name for name in OPENAI_VOICES if name not in own and closest_voice(name, voices) == voice]


def voice_menu(voices: list[Voice]) -> str:
    """The voices to name in an error: the engine's own, then OpenAI's that map to them."""
    return f"{', '.join(v.name for v in voices)} (or OpenAI's: {', '.join(OPENAI_VOICES)})"


async def served_voice(engine: Engine, voice: str | None) -> str | None:
    """The engine's own name for the voice a network client asked for: one of its names as it
    is, one of OpenAI's as the closest it has; a path or an unknown name is one UsageError."""
    if voice is None:
        return None
    if any(mark in voice for mark in ("/", "\\", "~")) or voice.startswith(".") or voice.endswith(".onnx"):
        raise UsageError("voice must be a voice name (GET /v1/audio/voices lists them), not a path")
    try:
        voices = await engine.voices()
    except OmniError:
        return voice  # an engine that cannot list its voices judges the name itself
    if not voices or voice in (v.name for v in voices):
        return voice
    closest = closest_voice(voice, voices)
    if closest is None:
        raise UsageError(f"unknown voice {voice!r}; voices: {voice_menu(voices)}")
    return closest.name
