"""The in-process CPU engine: Piper speaks, Whisper listens, a small GGUF model thinks.

Every model loads lazily, once per process; `loaded()` says what came from where.
"""

import asyncio
import functools
import logging
from collections.abc import AsyncIterator

from omnicli.audio.pcm import resample
from omnicli.engine import piper_voice
from omnicli.engine.asr import ASR_RATE, Transcript, WhisperASR
from omnicli.engine.base import SPEECH_RATE, AudioChunk, ChatDelta, ChatRequest, SpeechRequest, Voice
from omnicli.engine.cascade import run_cascade
from omnicli.engine.sentences import split_sentences
from omnicli.engine.thinker import LlamaThinker
from omnicli.engine.workers import ModelQueue
from omnicli.errors import UsageError

log = logging.getLogger("omni")


class EmbeddedEngine:
    name = "embedded"

    def __init__(
        self,
        *,
        default_voice: str | None = None,
        llm: str | None = None,
        asr_model: str | None = None,
    ) -> None:
        self.default_voice = default_voice
        self.asr = WhisperASR(asr_model)
        self.thinker = LlamaThinker(llm)
        self.voice_queue = ModelQueue("voice")
        self.asr_queue = ModelQueue("asr")
        self.thinker_queue = ModelQueue("thinker")

    async def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]:
        if req.ref_audio:
            raise UsageError(
                "the embedded voice cannot clone a reference voice; use --server with a model "
                "that can (vLLM-Omni Qwen3-TTS Base)"
            )
        if req.instructions:
            log.warning("the embedded Piper voice has no instructions; ignoring them")
        model = piper_voice.resolve_voice(req.voice or self.default_voice)
        voice = await asyncio.to_thread(piper_voice.load, model)
        for sentence in split_sentences(req.text):
            yield await self.say(voice, sentence, req.speed)

    async def say(self, voice, sentence: str, speed: float) -> AudioChunk:
        """One sentence in `voice` at the common 24 kHz: where all embedded speech is made."""
        samples, rate = await self.voice_queue.run(piper_voice.synthesize, voice, sentence, speed)
        return AudioChunk(resample(samples, rate, SPEECH_RATE), SPEECH_RATE, text=sentence)

    def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        return run_cascade(req, self)

    async def transcribe(self, samples, rate: int, *, language: str | None = None, quick: bool = False) -> Transcript:
        """`quick`: a conversation turn, read in a short window (see WhisperASR.transcribe)."""
        audio = resample(samples, rate, ASR_RATE)
        return await self.asr_queue.run(functools.partial(self.asr.transcribe, audio, language, quick=quick))

    async def preload(self) -> None:
        """Load every model now (a server's start-up), so no request pays for loading."""
        voice = piper_voice.resolve_voice(self.default_voice)
        await asyncio.gather(
            asyncio.to_thread(piper_voice.load, voice),
            asyncio.to_thread(self.asr.load),
            asyncio.to_thread(self.thinker.load),
        )

    async def voices(self) -> list[Voice]:
        return piper_voice.embedded_voices()

    def loaded(self) -> dict[str, str]:
        """What each stage loaded, and from where (only stages used so far)."""
        found = {"voice": ", ".join(str(path) for path in piper_voice.loaded_paths())}
        if self.asr.source:
            found["asr"] = self.asr.source
        if self.thinker.source:
            found["thinker"] = str(self.thinker.source)
        return {k: v for k, v in found.items() if v}

    async def aclose(self) -> None:
        return None
