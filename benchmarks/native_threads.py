"""Why llama.cpp and CTranslate2 each compute on one thread (omnicli/engine/native_threads.py).

Both compute on an OpenMP team per calling thread; once two calling threads keep a team alive,
libgomp stops spinning at the team's barriers and every step costs several times as long. Printed
side by side, on the same work:
- SmolLM2-135M, ms per token (p50 of the gaps between tokens) of one greedy answer, six times;
- Whisper tiny.en, ms per quick transcript of three spoken sentences (p50 of six rounds);
each called from one thread only; from whichever of two worker threads is free (how omni called
them before); and through omni's stage (`LlamaThinker.generate`, `WhisperASR.transcribe`) asked
from two threads in turn.
Usage: python benchmarks/native_threads.py [--llm NAME]
"""

import argparse
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

from omnicli.bench.scoring import percentile

MESSAGES = [{"role": "system", "content": "Answer in one short sentence."},
            {"role": "user", "content": "What do bees make?"}]
SENTENCES = ["How many legs does a spider have?", "What is the capital of France?",
             "Please call Stella and ask her to bring these things with her from the store."]
ROUNDS = 6


def gaps_ms(pieces) -> list[float]:
    times = [time.perf_counter() for _ in pieces]
    return [(b - a) * 1000 for a, b in pairwise(times[1:])]  # from the first token on


def before(direct: Callable[[], list[float]]) -> dict[str, list[float]]:
    """`direct` from one thread, then from two worker threads in turn (how omni called them)."""
    rows = {}
    one = ThreadPoolExecutor(1)
    one.submit(direct).result()  # loaded and warm
    rows["called from one thread"] = [x for _ in range(ROUNDS) for x in one.submit(direct).result()]
    one.shutdown()  # its thread, and its OpenMP team, end here
    two, measured = ThreadPoolExecutor(2), []
    for index in range(ROUNDS):
        busy = two.submit(time.sleep, 0.05) if index % 2 else None  # the other worker takes the next
        measured += two.submit(direct).result()
        if busy:
            busy.result()
    two.shutdown()
    rows["called from two worker threads"] = measured
    return rows


def now(staged: Callable[[], list[float]]) -> list[float]:
    """omni's stage asked from two threads in turn (after the rows above: its thread, once
    started, lives on)."""
    measured: list[float] = []
    for index in range(ROUNDS + 1):
        asker = threading.Thread(target=lambda: measured.extend(staged()))
        asker.start()
        asker.join()
        if index == 0:
            measured.clear()  # loaded and warm
    return measured


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--llm", default="smollm2")
    args = parser.parse_args()
    from faster_whisper import WhisperModel
    from turns import voice  # benchmarks/turns.py: the embedded voice without sampling noise

    from omnicli.audio.pcm import resample
    from omnicli.engine.asr import WhisperASR, resolve_asr_model
    from omnicli.engine.cores import THREADS
    from omnicli.engine.llama_load import load_llama
    from omnicli.engine.thinker import LlamaThinker, resolve_llm

    cores = THREADS.thinker_prompt
    llm = load_llama(resolve_llm(args.llm), n_ctx=2048, n_threads=cores, n_threads_batch=cores, verbose=False)
    tokens = before(
        lambda: gaps_ms(llm.create_chat_completion(messages=MESSAGES, stream=True, max_tokens=32, temperature=0.0)))

    say = voice()
    clips = [resample(say(text), 24000, 16000) for text in SENTENCES]
    plain = WhisperASR()
    loaded: list[WhisperModel] = []

    def model():  # loaded by the first thread to use it, as before
        if not loaded:
            loaded.append(WhisperModel(resolve_asr_model(None), compute_type="int8", cpu_threads=cores))
        return loaded[0]

    def timed(transcribe) -> list[float]:
        began = time.perf_counter()
        for clip in clips:
            transcribe(clip)
        return [(time.perf_counter() - began) * 1000]
    transcripts = before(lambda: timed(lambda clip: plain._transcribe(model(), clip, "en", True, False)))  # noqa: SLF001

    thinker, staged = LlamaThinker(args.llm), WhisperASR()
    stage = "omni's stage, asked from two threads"
    tokens[stage] = now(lambda: gaps_ms(thinker.generate(MESSAGES, max_tokens=32, temperature=0.0, stop=threading.Event())))
    transcripts[stage] = now(lambda: timed(lambda clip: staged.transcribe(clip, "en", quick=True)))

    print(f"{cores} threads each; p50 / p90")
    print(f"{'':<40}{args.llm + ', ms a token':>22}{'Whisper, ms for three':>26}")
    for name in tokens:
        print(f"{name:<40}{percentile(tokens[name], .5):>13.1f} / {percentile(tokens[name], .9):<6.1f}"
              f"{percentile(transcripts[name], .5):>17.0f} / {percentile(transcripts[name], .9):<6.0f}")


if __name__ == "__main__":
    main()
