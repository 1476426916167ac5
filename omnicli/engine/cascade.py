"""The staged chat pipeline: ASR -> thinker -> talker, streaming into each other.

    [audio parts] -> ASR -> [prompt] -> thinker (tokens) -> talker (sentence chunker + Piper) -> 24 kHz

Each stage is a task; blocking inference runs in worker threads. Stages hand over through bounded
asyncio queues, so the talker speaks the first sentence while the thinker writes the second.
Leaving the consumer loop (done, error, cancel) stops every stage, the LLM thread included.
"""

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

from omnicli.audio.formats import decode
from omnicli.engine import piper_voice
from omnicli.engine.asr import Transcript
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
from omnicli.engine.metrics import StageMetrics, Timer
from omnicli.engine.sentences import SentenceChunker
from omnicli.errors import UsageError

_SENTENCE_QUEUE = 8
_OUTPUT_QUEUE = 32


@dataclass(frozen=True)
class _StageEnded:
    stage: str


@dataclass(frozen=True)
class _StageFailed:
    error: BaseException


def refuse_images(req: ChatRequest) -> None:
    if any(isinstance(p, ImagePart) for m in req.messages for p in m.parts):
        raise UsageError(
            "the embedded thinker reads text only, so it cannot see images; "
            "send image attachments to a server with --server"
        )


async def transcribe(engine, part: AudioPart, stage: StageMetrics) -> Transcript:
    try:
        samples, rate = decode(part.data)
    except ValueError as exc:
        raise UsageError(f"the attached {part.format} audio cannot be decoded: {exc}") from exc
    with Timer(stage):
        transcript = await engine.transcribe(samples, rate, quick=True)
    stage.audio_seconds += transcript.seconds
    stage.output()
    return transcript


async def run_cascade(req: ChatRequest, engine) -> AsyncIterator[ChatDelta]:
    """`engine`: the EmbeddedEngine whose models and queues the stages use."""
    refuse_images(req)
    voice_model = piper_voice.resolve_voice(req.voice or engine.default_voice) if req.wants_audio else None
    stages = {"asr": StageMetrics("asr")}

    messages = []
    for message in req.messages:
        texts = []
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, AudioPart):
                heard = await transcribe(engine, part, stages["asr"])
                yield TranscriptDelta(heard.text)
                texts.append(heard.text)
        messages.append({"role": message.role, "content": "\n".join(t for t in texts if t)})
    stages["asr"].finish()
    if not stages["asr"].audio_seconds:
        del stages["asr"]

    stop = threading.Event()
    out: asyncio.Queue = asyncio.Queue(_OUTPUT_QUEUE)
    sentences: asyncio.Queue | None = asyncio.Queue(_SENTENCE_QUEUE) if voice_model else None
    stages["thinker"] = StageMetrics("thinker")
    tasks = [asyncio.create_task(_guard(out, "thinker", _think(req, messages, engine, stop, out, sentences, stages["thinker"])))]
    if voice_model is not None:
        stages["talker"] = StageMetrics("talker")
        tasks.append(asyncio.create_task(_guard(out, "talker", _talk(req, engine, voice_model, sentences, out, stages["talker"]))))

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
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    completion = "".join(text)
    prompt_tokens = await asyncio.to_thread(engine.thinker.count_tokens, messages)
    yield ChatDone(
        text=completion,
        finish_reason="length" if stages["thinker"].tokens >= req.max_tokens else "stop",
        usage={
            "prompt_tokens": prompt_tokens,
            "completion_tokens": stages["thinker"].tokens,
            "total_tokens": prompt_tokens + stages["thinker"].tokens,
        },
        metrics={name: stage.as_dict() for name, stage in stages.items()},
    )


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


async def _think(req, messages, engine, stop, out, sentences, stage: StageMetrics) -> None:
    async with engine.thinker_queue.turn():
        await _generate(req, messages, engine.thinker, stop, out, sentences, stage)
    if sentences is not None:
        await sentences.put(None)


async def _generate(req, messages, thinker, stop, out, sentences, stage: StageMetrics) -> None:
    loop = asyncio.get_running_loop()
    tokens: asyncio.Queue = asyncio.Queue()  # thread -> loop hand-off; the LLM never waits on it

    def generate() -> None:
        try:
            for piece in thinker.stream(messages, max_tokens=req.max_tokens, temperature=req.temperature, stop=stop):
                loop.call_soon_threadsafe(tokens.put_nowait, piece)
        finally:
            if not loop.is_closed():
                loop.call_soon_threadsafe(tokens.put_nowait, None)

    with Timer(stage):
        producer = loop.run_in_executor(None, generate)
        try:
            while (piece := await tokens.get()) is not None:
                stage.output()
                stage.tokens += 1
                await out.put(TextDelta(piece))
                if sentences is not None:
                    await sentences.put(piece)
        finally:
            stop.set()
        await producer
    stage.finish()


async def _talk(req, engine, voice_model, sentences: asyncio.Queue, out: asyncio.Queue, stage: StageMetrics) -> None:
    voice = await asyncio.to_thread(piper_voice.load, voice_model)
    chunker = SentenceChunker()
    while True:
        piece = await sentences.get()
        ready = chunker.flush() if piece is None else chunker.feed(piece)
        for sentence in ready:
            with Timer(stage):
                chunk = await engine.say(voice, sentence, req.speed)
            stage.audio_seconds += chunk.seconds
            stage.output()
            await out.put(AudioDelta(chunk))
        if piece is None:
            break
    stage.finish()
