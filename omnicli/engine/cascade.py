"""The staged chat pipeline: ASR -> thinker -> talker, streaming into each other.

    [audio parts] -> ASR -> [prompt] -> thinker (tokens) -> talker (speakable pieces) -> 24 kHz

The thinker and the talker are tasks handing over through bounded asyncio queues, so the talker
speaks the first clause while the thinker writes the next. Leaving the consumer loop (done,
error, cancel) stops every stage, the LLM's thread included.
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from omnicli.audio.formats import decode
from omnicli.engine.base import (
    AudioDelta,
    AudioPart,
    ChatDelta,
    ChatDone,
    ChatRequest,
    ImagePart,
    TextDelta,
    TextPart,
    TranscriptDelta,
)
from omnicli.engine.cores import PRIORITY
from omnicli.engine.metrics import StageMetrics, Timer
from omnicli.engine.sentences import SentenceChunker
from omnicli.engine.stages import ASRStage, Stages, TalkerStage, ThinkerStage
from omnicli.errors import UsageError

_PIECE_QUEUE = 8
_OUTPUT_QUEUE = 32


@dataclass(frozen=True)
class _StageEnded:
    stage: str


@dataclass(frozen=True)
class _StageFailed:
    error: BaseException


def refuse_images(req: ChatRequest) -> None:
    """Refuse a request with images, which the text-only embedded thinker cannot see."""
    if any(isinstance(p, ImagePart) for m in req.messages for p in m.parts):
        raise UsageError(
            "the embedded thinker reads text only, so it cannot see images; "
            "send image attachments to a server with --server"
        )


def text_messages(req: ChatRequest) -> list[dict] | None:
    """The thinker's messages for `req` when every part is text already (None when some audio is
    still to be heard): what run_cascade hands the thinker, so a prompt read early matches it."""
    prompt = []
    for message in req.messages:
        texts = [part.text for part in message.parts if isinstance(part, TextPart)]
        if len(texts) < len(message.parts):
            return None
        prompt.append(_thinker_message(message.role, texts))
    return prompt


def _thinker_message(role: str, texts: list[str]) -> dict:
    return {"role": role, "content": "\n".join(t for t in texts if t)}


async def run_cascade(req: ChatRequest, stages: Stages) -> AsyncIterator[ChatDelta]:
    """Answer `req` through the stages (hear, think, speak): deltas as they come, then one ChatDone."""
    refuse_images(req)
    if req.wants_audio:
        stages.talker.check_voice(req.voice)
    metrics = {"asr": StageMetrics("asr")}
    marks = {"request": time.monotonic()}
    messages = []
    for message in req.messages:
        texts = []
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, AudioPart):
                heard = await _hear(stages.asr, part, metrics["asr"])
                yield TranscriptDelta(heard)
                texts.append(heard)
        messages.append(_thinker_message(message.role, texts))
    metrics["asr"].finish()
    marks["heard"] = time.monotonic()
    if not metrics["asr"].audio_seconds:
        del metrics["asr"]

    out: asyncio.Queue = asyncio.Queue(_OUTPUT_QUEUE)
    pieces: asyncio.Queue | None = asyncio.Queue(_PIECE_QUEUE) if req.wants_audio else None
    metrics["thinker"] = StageMetrics("thinker")
    tasks = [asyncio.create_task(_guard(out, "thinker", _think(req, messages, stages.thinker, out, pieces, metrics["thinker"], marks)))]
    if pieces is not None:
        metrics["talker"] = StageMetrics("talker")
        tasks.append(asyncio.create_task(_guard(out, "talker", _talk(req, stages.talker, pieces, out, metrics["talker"], marks))))

    text, running = [], len(tasks)
    try:
        while running:
            item = await out.get()
            match item:
                case _StageEnded():
                    running -= 1
                case _StageFailed(error=error):
                    raise error
                case TextDelta(text=piece):
                    text.append(piece)
                    yield item
                case _:
                    yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    prompt_tokens = await stages.thinker.count_tokens(messages)
    completion_tokens = metrics["thinker"].tokens
    yield ChatDone(
        text="".join(text),
        finish_reason="length" if completion_tokens >= req.max_tokens else "stop",
        usage={
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        metrics={name: stage.as_dict() for name, stage in metrics.items()},
        marks=marks,
    )


async def _hear(asr: ASRStage, part: AudioPart, stage: StageMetrics) -> str:
    try:
        samples, rate = await asyncio.to_thread(decode, part.data)  # an mp3 takes a while: off the loop
    except ValueError as exc:
        raise UsageError(f"the attached {part.format} audio cannot be decoded: {exc}") from exc
    with Timer(stage):
        transcript = await asr.transcribe(samples, rate, quick=True)
    stage.audio_seconds += transcript.seconds
    stage.output()
    return transcript.text


async def _guard(out: asyncio.Queue, stage: str, work) -> None:
    """Run a stage; report its end or its failure to the consumer."""
    try:
        await work
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
        await out.put(_StageFailed(exc))
        return
    await out.put(_StageEnded(stage))


async def _think(req: ChatRequest, messages: list[dict], thinker: ThinkerStage, out: asyncio.Queue,
                 pieces: asyncio.Queue | None, stage: StageMetrics, marks: dict[str, float]) -> None:
    with Timer(stage):
        tokens = thinker.stream(messages, max_tokens=req.max_tokens, temperature=req.temperature)
        try:
            async for piece in tokens:
                marks.setdefault("first_token", time.monotonic())
                stage.output()
                stage.tokens += 1
                await out.put(TextDelta(piece))
                if pieces is not None:
                    await pieces.put(piece)
        finally:
            await tokens.aclose()
    stage.finish()
    if pieces is not None:
        await pieces.put(None)


async def _talk(req: ChatRequest, talker: TalkerStage, pieces: asyncio.Queue, out: asyncio.Queue,
                stage: StageMetrics, marks: dict[str, float]) -> None:
    chunker = SentenceChunker()
    spoken = 0.0  # seconds of audio handed out: the listener's speaker plays them from the first chunk on
    while True:
        piece = await pieces.get()
        runway = None if "first_chunk" not in marks else marks["first_chunk"] + spoken - time.monotonic()
        ready = chunker.flush() if piece is None else chunker.feed(piece, runway)
        if ready:
            marks.setdefault("first_piece", time.monotonic())
        for sentence in ready:
            first = "talker_start" not in marks
            marks.setdefault("talker_start", time.monotonic())
            with Timer(stage), PRIORITY.urgent_speech() if first else contextlib.nullcontext():
                chunk = await talker.say(sentence, voice=req.voice, speed=req.speed)
            marks.setdefault("first_chunk", time.monotonic())
            stage.audio_seconds += chunk.seconds
            spoken += chunk.seconds
            stage.output()
            await out.put(AudioDelta(chunk))
        if piece is None:
            break
    stage.finish()
