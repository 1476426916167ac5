"""The one interface every command drives: an in-process engine or a server behind HTTP.

Audio crosses it as float32 mono chunks at `SPEECH_RATE`, whichever engine made it, so callers
never care where speech came from. `Engine` is the whole contract: what a caller may use is
declared here, with a default where an engine may lack it, and never sniffed with `hasattr`.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.errors import UnsupportedError

__all__ = ["SPEECH_RATE", "AudioChunk", "Engine", "Transcript"]
DEFAULT_MAX_TOKENS = 256


@dataclass(frozen=True)
class SpeechRequest:
    """What to speak and how: the text, its voice and speed, and what only some models take."""

    text: str
    voice: str | None = None
    speed: float = 1.0
    instructions: str | None = None
    language: str | None = None
    model: str | None = None
    ref_audio: str | None = None
    """Reference audio for voice cloning, as a data URI or URL."""
    ref_text: str | None = None


@dataclass(frozen=True)
class Voice:
    """A voice an engine speaks, as `omni speak --list-voices` and `GET /v1/audio/voices` show it."""

    name: str
    description: str = ""
    details: dict = field(default_factory=dict)
    language: str = ""
    """A language tag (en-US), where known."""
    gender: str = ""
    """female, male or neutral, where known: what OpenAI's voice names are matched on."""
    quality: str = ""


@dataclass(frozen=True)
class TextPart:
    """Text in a message, as its author wrote it."""

    text: str


@dataclass(frozen=True)
class AudioPart:
    """An attached audio file, kept as its bytes so a server gets exactly what the user gave."""

    data: bytes
    format: str
    """wav, mp3, flac or ogg."""


@dataclass(frozen=True)
class ImagePart:
    """An attached image, kept as its bytes and MIME type."""

    data: bytes
    mime: str


Part = TextPart | AudioPart | ImagePart


@dataclass
class Message:
    """One turn of a conversation: who said it, and its parts (text, audio, images)."""

    role: Literal["system", "user", "assistant"]
    parts: list[Part]

    @property
    def text(self) -> str:
        """The message's text parts, one per line (audio and images left out)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass
class ChatRequest:
    """A conversation to answer, with the output modalities, voice and sampling asked for."""

    messages: list[Message]
    modalities: tuple[str, ...] = ("text",)
    voice: str | None = None
    model: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 0.7
    speed: float = 1.0

    @property
    def wants_audio(self) -> bool:
        """Whether the answer is to be spoken as well as written."""
        return "audio" in self.modalities


@dataclass(frozen=True)
class TextDelta:
    """The next piece of an answer's text."""

    text: str


@dataclass(frozen=True)
class AudioDelta:
    """The next chunk of an answer's speech."""

    chunk: AudioChunk


@dataclass(frozen=True)
class TranscriptDelta:
    """What the engine heard in an audio attachment (embedded engine: its ASR stage)."""

    text: str


@dataclass(frozen=True)
class ChatDone:
    """The end of an answer: its whole text, why it stopped, token usage and timings."""

    text: str
    finish_reason: str = "stop"
    usage: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    marks: dict[str, float] = field(default_factory=dict)
    """When each step of the answer first happened (time.monotonic()): `request`, `heard`,
    `first_token`, `first_piece` (first speakable text), `talker_start`, `first_chunk` (its
    audio ready). A latency timeline; an engine that cannot see a step leaves it out."""


ChatDelta = TextDelta | AudioDelta | TranscriptDelta | ChatDone


@dataclass(frozen=True)
class Transcript:
    """What was heard in a clip: its text, language and length, and timestamps where given."""

    text: str
    language: str | None
    seconds: float
    segments: list[dict] = field(default_factory=list)
    """{start, end, text} per segment, where the recogniser gives them."""
    words: list[dict] = field(default_factory=list)
    """{start, end, word} per word, when asked for and given."""


class Engine(Protocol):
    """Engines subclass this explicitly, so the defaults below apply where they have no answer."""

    name: str = "engine"

    def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """Speak `req.text`: 24 kHz chunks as they are made."""
        ...

    def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        """Answer the conversation: text (and speech) deltas, then exactly one ChatDone."""
        ...

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """Hear float32 mono `samples`. `quick`: a conversation turn, where speed beats polish;
        `words`: word timestamps too."""
        raise UnsupportedError(f"the {self.name} engine cannot transcribe audio")

    async def prepare(self, req: ChatRequest, *, begin_answer: bool = False) -> None:
        """A request that will likely follow (a user's turn heard before it ended): start what makes
        its answer sooner, such as reading the prompt, and with `begin_answer` beginning the answer
        itself, for `chat` with the same request to go on from, where that delays no other
        answer's first words. Nothing is owed; the request may never come."""
        return None

    @property
    def reads_ahead(self) -> bool:
        """`prepare` reads a prompt into a cache that an answer reuses, so words heard while the
        user still speaks are worth offering to it (the embedded thinker's; none by default)."""
        return False

    async def voices(self) -> list[Voice]:
        """The voices the engine speaks, for clients to choose from (none listed by default)."""
        return []

    async def preload(self) -> None:
        """Load every model now (a server's start-up), so no request pays for loading."""
        return None

    async def check(self) -> None:
        """Fail fast, with one clear line, when the engine cannot work at all."""
        return None

    def loaded(self) -> dict[str, str]:
        """What each part loaded, and from where (for --verbose)."""
        return {}

    async def aclose(self) -> None:
        """Release connections and threads; the engine is not used afterwards."""
        return None
