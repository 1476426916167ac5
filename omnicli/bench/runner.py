"""The benchmark pipeline: synthesis requests (closed loop: N in flight; or open loop: Poisson
arrivals at R a second, at most N in flight) feeding ASR and scoring.

Synthesis of the next utterances overlaps transcription of the finished ones, so a run takes
about as long as its slower half. Every utterance ends as exactly one record, scored or failed.
Clips wait for the judge in memory, at most BACKLOG of them: past that, new requests wait.
"""

import asyncio
import base64
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from omnicli.audio.atomic import atomic_write
from omnicli.audio.formats import AudioFormat, decode, encode
from omnicli.bench.dataset import Item
from omnicli.bench.playback import underruns
from omnicli.bench.scoring import language_of, score
from omnicli.engine.base import SPEECH_RATE, SpeechRequest, Transcript
from omnicli.errors import OmniError

if TYPE_CHECKING:
    from omnicli.bench.naturalness import NaturalnessJudge
    from omnicli.bench.similarity import SimilarityJudge

log = logging.getLogger("omni")

BACKLOG = 256
"""Clips synthesized and not yet judged, at most (a 5 s clip is ~0.5 MB)."""


class Judge(Protocol):
    """What hears the audio: Whisper in process by default, or a server's (an ASR stage)."""

    async def transcribe(self, samples: np.ndarray, rate: int, *, language: str | None = None) -> Transcript:
        """The words heard in one synthesized clip."""
        ...

    async def preload(self) -> None:
        """Load the model, or reach the server, before the first utterance is made."""
        ...


@dataclass(frozen=True)
class BenchOptions:
    """How a benchmark run sends its requests and how it scores the answers."""

    concurrency: int | None = 1
    """Requests in flight at most; None: no limit (with `rate`)."""
    rate: float | None = None
    """Open loop: requests start at Poisson arrivals, this many a second on average."""
    seed: int = 0
    """Seeds the arrival times, so a run can be repeated."""
    clone: bool = False
    voice: str | None = None
    model: str | None = None
    language: str | None = None
    normalizer: str = "seed-tts"
    audio_dir: Path | None = None
    keep_audio_dir: Path | None = None


@dataclass(frozen=True)
class ExtraJudges:
    """The figures beyond WER a run was asked for: naturalness (--mos), speaker similarity (--sim)."""

    naturalness: "NaturalnessJudge | None" = None
    similarity: "SimilarityJudge | None" = None

    async def preload(self) -> None:
        """Load each model asked for."""
        for judge in (self.naturalness, self.similarity):
            if judge is not None:
                await judge.preload()

    async def rate(self, job: "Synthesized", samples: np.ndarray) -> dict:
        """The clip's MOS figures and its similarity to its prompt, where asked for."""
        figures: dict = {}
        if self.naturalness is not None:
            figures |= await self.naturalness.rate(samples, job.rate)
        if self.similarity is not None and job.item.prompt_wav is not None:
            figures["sim"] = await self.similarity.similarity(job.item.prompt_wav, samples, job.rate)
        return figures


@dataclass
class Synthesized:
    """One utterance's audio (None when synthesis failed) and its record so far, awaiting the judge."""

    item: Item
    samples: np.ndarray | None
    rate: int
    record: dict


def arrival_times(count: int, rate: float | None, seed: int) -> list[float]:
    """When each request starts, in seconds from the first: all at once without a rate (the
    concurrency limit paces them), else a Poisson process (exponential gaps, mean 1/rate)."""
    if rate is None:
        return [0.0] * count
    draw = random.Random(seed)
    times, now = [], 0.0
    for _ in range(count):
        times.append(now)
        now += draw.expovariate(rate)
    return times


async def run_bench(items: list[Item], engine, judge: Judge, options: BenchOptions,
                    on_record: Callable[[dict], None], extra: ExtraJudges | None = None) -> float:
    """Synthesize (or load) and score every item (and the `extra` figures asked for);
    `on_record` gets each record as it is made. The seconds from the first request to the last
    answer (the benchmark's duration)."""
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(options.concurrency) if options.concurrency else None
    backlog = asyncio.Semaphore(BACKLOG)
    ready: asyncio.Queue = asyncio.Queue()
    started = loop.time()
    finished = started

    async def produce(item: Item) -> None:
        """Synthesize (or load) one item, then queue it for the judge."""
        nonlocal finished
        try:
            job = await _produce(item, engine, options)
        finally:
            if slots is not None:
                slots.release()
        finished = max(finished, loop.time())
        ready.put_nowait(job)

    async def dispatch() -> None:
        """Start each item at its arrival time, within the concurrency and backlog limits."""
        tasks = []
        try:
            for item, at in zip(items, arrival_times(len(items), options.rate, options.seed), strict=True):
                await asyncio.sleep(max(0.0, started + at - loop.time()))
                await backlog.acquire()
                if slots is not None:
                    await slots.acquire()
                tasks.append(asyncio.create_task(produce(item)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        ready.put_nowait(None)

    async def scorer() -> None:
        """Judge the queued items one at a time, as they are ready."""
        while (job := await ready.get()) is not None:
            on_record(await _score(job, judge, options, extra))
            backlog.release()

    dispatcher = asyncio.create_task(dispatch())
    consumer = asyncio.create_task(scorer())
    try:
        await asyncio.gather(dispatcher, consumer)
    finally:
        for task in (dispatcher, consumer):
            task.cancel()
        await asyncio.gather(dispatcher, consumer, return_exceptions=True)
    return finished - started


async def warm_up(item: Item, engine, options: BenchOptions, *, requests: int = 1) -> None:
    """`requests` untimed requests like `item`'s at once (its text, voice, model and prompt; one per
    server of a pool), their audio thrown away, so that first audio is measured warm: without it the
    first utterance's figure is the voice loading (~0.9 s on the embedded engine against ~0.05 s warm)."""
    quiet = replace(options, keep_audio_dir=None)
    await asyncio.gather(*(_produce(item, engine, quiet) for _ in range(requests)))


def _base_record(item: Item) -> dict:
    return {"utt": item.utt, "line": item.line, "reference": item.text}


async def _produce(item: Item, engine, options: BenchOptions) -> Synthesized:
    record = _base_record(item)
    if options.audio_dir is not None:
        path = options.audio_dir / f"{item.utt}.wav"
        try:
            samples, rate = decode(path.read_bytes())
        except (OSError, ValueError) as exc:
            record.update(status="no_audio", error=f"{path}: {getattr(exc, 'strerror', None) or exc}")
            return Synthesized(item, None, 0, record)
        return Synthesized(item, samples, rate, record)

    request = SpeechRequest(text=item.text, voice=options.voice, model=options.model)
    if options.clone and item.prompt_wav is not None:
        try:
            data = item.prompt_wav.read_bytes()
        except OSError as exc:
            record.update(status="request_failed", error=f"prompt wav {item.prompt_wav}: {exc.strerror or exc}")
            return Synthesized(item, None, 0, record)
        request = SpeechRequest(
            text=item.text, voice=options.voice, model=options.model,
            ref_audio="data:audio/wav;base64," + base64.b64encode(data).decode(), ref_text=item.prompt_text,
        )
    start = time.perf_counter()
    packets: list[tuple[float, float]] = []
    parts = []
    try:
        async for chunk in engine.speech(request):
            if len(chunk.samples):
                packets.append((time.perf_counter() - start, len(chunk.samples) / chunk.rate))
                parts.append(chunk.samples)
    except OmniError as exc:
        record.update(status="request_failed", error=str(exc))
        return Synthesized(item, None, 0, record)
    generation = time.perf_counter() - start
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    seconds = len(samples) / SPEECH_RATE
    gaps = underruns(packets)
    record.update(ttfa=packets[0][0] if packets else None, generation_seconds=generation, audio_seconds=seconds,
                  rtf=generation / seconds if seconds else None, packets=len(packets),
                  underruns=gaps.count, underrun_seconds=gaps.seconds, long_gaps=gaps.long, longest_gap_seconds=gaps.longest)
    if options.keep_audio_dir is not None and len(samples):
        atomic_write(options.keep_audio_dir / f"{item.utt}.wav", encode(samples, SPEECH_RATE, AudioFormat.WAV))
    return Synthesized(item, samples, SPEECH_RATE, record)


async def _score(job: Synthesized, judge: Judge, options: BenchOptions, extra: ExtraJudges | None) -> dict:
    record = job.record
    if "status" in record:
        return record
    if job.samples is None or len(job.samples) == 0 or not np.any(np.abs(job.samples) > 1e-4):
        record.update(status="no_audio", error="the audio is empty or silent")
        return record
    record.setdefault("audio_seconds", len(job.samples) / job.rate)
    language = options.language or language_of(job.item.text)
    try:
        transcript = await judge.transcribe(job.samples, job.rate, language=language)
    except (OmniError, RuntimeError, ValueError) as exc:
        record.update(status="asr_failed", error=str(exc))
        return record
    result = score(job.item.text, transcript.text, language=language, normalizer=options.normalizer)
    record.update(
        status="ok", language=language, hypothesis=transcript.text, wer=result.wer,
        substitutions=result.substitutions, deletions=result.deletions, insertions=result.insertions,
        hits=result.hits, reference_normalized=result.reference, hypothesis_normalized=result.hypothesis,
    )
    if extra is not None:
        try:
            record.update(await extra.rate(job, job.samples))
        except (OmniError, OSError, RuntimeError, ValueError) as exc:
            log.warning("omni: %s: no MOS or SIM: %s", job.item.utt, exc)
    return record
