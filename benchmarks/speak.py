"""Measure `omni speak`'s embedded engine against Piper called directly, and `omni --help`'s
start-up against a bare Python, side by side in one run.

Goals: first audio <= 1.2x Piper's, RTF <= 1.1x Piper's, `omni --help` under 0.25 s.
Usage: python benchmarks/speak.py [--runs N]
"""

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

TEXT = (
    "The quick brown fox jumps over the lazy dog near the river bank. "
    "Please call Stella and ask her to bring these things with her from the store. "
    "She sells sea shells by the sea shore every summer morning. "
    "The meeting has been moved to Thursday at three in the afternoon."
)


def piper_direct(voice) -> tuple[float, float]:
    """(seconds to first chunk, RTF) for Piper's own sentence-by-sentence synthesis."""
    start = time.perf_counter()
    first, samples = None, 0
    for chunk in voice.synthesize(TEXT):
        first = first or time.perf_counter() - start
        samples += len(chunk.audio_float_array)
    assert first is not None, "Piper made no audio"
    return first, (time.perf_counter() - start) / (samples / voice.config.sample_rate)


def omni_engine(engine) -> tuple[float, float]:
    from omnicli.engine.base import SpeechRequest

    async def run():
        start = time.perf_counter()
        first, seconds = None, 0.0
        async for chunk in engine.speech(SpeechRequest(text=TEXT)):
            first = first or time.perf_counter() - start
            seconds += chunk.seconds
        return first, (time.perf_counter() - start) / seconds

    return asyncio.run(run())


def wall(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs

    from omnicli.engine import piper_voice
    from omnicli.engine.staged import embedded_engine

    voice = piper_voice.load_piper(piper_voice.joe_path())
    engine = embedded_engine()
    piper_direct(voice), omni_engine(engine)  # warm both paths up
    piper_runs, omni_runs = [], []
    for _ in range(runs):  # interleaved, so machine noise hits both alike
        piper_runs.append(piper_direct(voice))
        omni_runs.append(omni_engine(engine))
    p_first = statistics.median(r[0] for r in piper_runs)
    o_first = statistics.median(r[0] for r in omni_runs)
    p_rtf = statistics.median(r[1] for r in piper_runs)
    o_rtf = statistics.median(r[1] for r in omni_runs)

    help_time = wall([sys.executable, "-m", "omnicli", "--help"], runs)
    bare_time = wall([sys.executable, "-c", "pass"], runs)

    print(f"{'measure':<28}{'omni':>10}{'reference':>12}{'ratio':>8}  goal")
    print(f"{'first audio, s (vs Piper)':<28}{o_first:>10.3f}{p_first:>12.3f}{o_first / p_first:>8.2f}  <= 1.2x")
    print(f"{'RTF (vs Piper)':<28}{o_rtf:>10.3f}{p_rtf:>12.3f}{o_rtf / p_rtf:>8.2f}  <= 1.1x")
    print(f"{'omni --help, s (vs python)':<28}{help_time:>10.3f}{bare_time:>12.3f}{help_time / bare_time:>8.2f}  < 0.25 s")
    print(f"median of {runs} interleaved runs, {len(TEXT)} characters, models warm")


if __name__ == "__main__":
    main()
