"""How well `omni bench-wer` overlaps synthesis with scoring.

Utterances per minute of the whole pipeline (embedded voice, tiny.en judge) at concurrency 1, 2
and 4, beside synthesis alone and ASR alone on the same clips. Goal: >= 0.8x the slower of the
two, i.e. the pipeline costs little more than its slower half.
Usage: python benchmarks/bench_wer.py [--limit N]
"""

import argparse
import asyncio
import time
from pathlib import Path

DATASET = Path(__file__).resolve().parents[1] / "tests" / "data" / "meta_dev.lst"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--dataset", default=str(DATASET))
    args = parser.parse_args()

    from omnicli.audio.pcm import resample
    from omnicli.bench.dataset import load_dataset
    from omnicli.bench.runner import BenchOptions, run_bench
    from omnicli.engine.asr import LocalASR
    from omnicli.engine.base import SpeechRequest
    from omnicli.engine.staged import embedded_engine

    items = load_dataset(args.dataset, limit=args.limit).items
    judge = LocalASR()
    engine, asr = embedded_engine(), judge.whisper

    async def synthesize_all():
        clips = []
        for item in items:
            parts = [c.samples async for c in engine.speech(SpeechRequest(text=item.text))]
            clips.append(__import__("numpy").concatenate(parts))
        return clips

    asyncio.run(synthesize_all())  # load the voice
    asr.load()
    start = time.perf_counter()
    clips = asyncio.run(synthesize_all())
    synthesis = len(items) / (time.perf_counter() - start) * 60
    start = time.perf_counter()
    for clip in clips:
        asr.transcribe(resample(clip, 24000, 16000), "en")
    recognition = len(items) / (time.perf_counter() - start) * 60
    slower = min(synthesis, recognition)

    print(f"{'run':<26}{'utt/min':>9}{'vs slower half':>16}")
    print(f"{'synthesis alone':<26}{synthesis:>9.1f}")
    print(f"{'ASR alone':<26}{recognition:>9.1f}")
    for concurrency in (1, 2, 4):
        records: list[dict] = []
        start = time.perf_counter()
        asyncio.run(run_bench(items, engine, judge, BenchOptions(concurrency=concurrency), records.append))
        rate = len(records) / (time.perf_counter() - start) * 60
        print(f"{f'pipeline, concurrency {concurrency}':<26}{rate:>9.1f}{rate / slower:>15.2f}x")
    print(f"{len(items)} utterances of {Path(args.dataset).name}; goal: pipeline >= 0.8x the slower half")


if __name__ == "__main__":
    main()
