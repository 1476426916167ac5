"""The in-process CPU engine: Piper speaks, sentence by sentence, at the common 24 kHz.

Inference runs in worker threads so the event loop stays free for playback and Ctrl-C.
"""

import asyncio
import logging
from collections.abc import AsyncIterator

from omnicli.audio.pcm import resample
from omnicli.engine import piper_voice
from omnicli.engine.base import SPEECH_RATE, AudioChunk, SpeechRequest, Voice
from omnicli.engine.sentences import split_sentences
from omnicli.errors import UsageError

log = logging.getLogger("omni")


class EmbeddedEngine:
    name = "embedded"

    def __init__(self, default_voice: str | None = None) -> None:
        self.default_voice = default_voice

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
            samples, rate = await asyncio.to_thread(
                piper_voice.synthesize, voice, sentence, req.speed
            )
            yield AudioChunk(resample(samples, rate, SPEECH_RATE), SPEECH_RATE, text=sentence)

    async def voices(self) -> list[Voice]:
        return piper_voice.embedded_voices()

    async def aclose(self) -> None:
        return None
