"""An engine made of three stages (ASR, thinker, talker), wherever each of them runs.

Speech goes straight to the talker, piece by piece; chat runs the cascade; transcription asks
the ASR stage. `embedded_stages` builds the all-CPU default from packages on the index.
"""

import asyncio
import logging
from collections.abc import AsyncIterator

import numpy as np

from omnicli.audio.chunk import AudioChunk
from omnicli.engine.base import ChatDelta, ChatRequest, Engine, SpeechRequest, Transcript, Voice
from omnicli.engine.cascade import run_cascade, text_messages
from omnicli.engine.sentences import first_piece, split_sentences
from omnicli.engine.stages import Stages
from omnicli.errors import UnsupportedError

log = logging.getLogger("omni")


class StagedEngine(Engine):
    """An `Engine` over three stages: speech to the talker, chat through the cascade, audio to ASR."""

    name = "embedded"

    def __init__(self, stages: Stages) -> None:
        self.stages = stages

    async def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """Speak `req.text` with the talker, sentence by sentence; a reference voice is refused."""
        if req.ref_audio:
            raise UnsupportedError(
                "the embedded voice cannot clone a reference voice; use --server with a model "
                "that can (vLLM-Omni Qwen3-TTS Base)"
            )
        if req.instructions:
            log.warning("the embedded voices take no instructions; ignoring them")
        self.stages.talker.check_voice(req.voice)
        for piece in split_sentences(req.text):
            yield await self.stages.talker.say(piece, voice=req.voice, speed=req.speed)

    def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        """Answer through the cascade: audio parts heard, then the thinker, then the talker."""
        return run_cascade(req, self.stages)

    async def prepare(self, req: ChatRequest, *, begin_answer: bool = False) -> None:
        """The thinker reads the prompt now, if it can and every part of the prompt is text already.
        With `begin_answer` it writes the answer's first words too, and the talker speaks their
        first piece: the answer, asked for with the same request, goes on from there."""
        prefill = getattr(self.stages.thinker, "prefill", None)
        prompt = text_messages(req)
        if prefill is None or prompt is None:
            return
        written = await prefill(prompt, temperature=req.temperature, max_tokens=req.max_tokens if begin_answer else None)
        say_ahead = getattr(self.stages.talker, "say_ahead", None)
        if written.pieces and req.wants_audio and say_ahead is not None:
            first = first_piece(written.pieces, whole=written.whole)
            if first is not None:
                await say_ahead(first, voice=req.voice, speed=req.speed)

    @property
    def reads_ahead(self) -> bool:
        """The embedded thinker keeps what it read (llama.cpp's longest cached prefix)."""
        return hasattr(self.stages.thinker, "prefill")

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """Hear `samples` with the ASR stage."""
        return await self.stages.asr.transcribe(samples, rate, language=language, quick=quick, words=words)

    async def preload(self) -> None:
        """Load the three stages' models now, side by side."""
        stages = self.stages
        await asyncio.gather(stages.talker.preload(), stages.asr.preload(), stages.thinker.preload())

    async def aclose(self) -> None:
        """Stages holding something outside this process let it go: a remote stage its
        connections, the vLLM thinker its engine-core process (which would outlive a server
        stopped by SIGTERM: uvicorn re-raises the signal, so no exit handler runs)."""
        stages = {id(stage): stage for stage in (self.stages.asr, self.stages.thinker, self.stages.talker)}
        for stage in stages.values():  # one server may stand for two stages: closed once
            if (close := getattr(stage, "aclose", None)) is not None:
                await close()

    async def voices(self) -> list[Voice]:
        """The talker's voices."""
        return await self.stages.talker.voices()

    def loaded(self) -> dict[str, str]:
        """Where each stage's model came from, for the stages that have loaded one."""
        found = {"voice": self.stages.talker.source(), "asr": self.stages.asr.source(),
                 "thinker": self.stages.thinker.source()}
        return {stage: source for stage, source in found.items() if source}


def embedded_stages(*, llm: str | None = None, asr_model: str | None = None, voice: str | None = None) -> Stages:
    """The CPU default: Whisper tiny.en hears, Qwen2.5 1.5B thinks, an embedded voice speaks (or the models named)."""
    from omnicli.engine.asr import LocalASR
    from omnicli.engine.talker import EmbeddedTalker
    from omnicli.engine.thinker import LlamaThinker

    return Stages(asr=LocalASR(asr_model), thinker=LlamaThinker(llm), talker=EmbeddedTalker(voice))


def embedded_engine(*, llm: str | None = None, asr_model: str | None = None, voice: str | None = None) -> StagedEngine:
    """The all-CPU staged engine (`embedded_stages`), with the models named where given."""
    return StagedEngine(embedded_stages(llm=llm, asr_model=asr_model, voice=voice))
