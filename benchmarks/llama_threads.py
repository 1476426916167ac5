"""Why every llama.cpp computation runs on one thread (omnicli/engine/llama_thread.py).

llama.cpp's CPU backend computes a token on an OpenMP team per calling thread; once two calling
threads keep a team alive, libgomp stops spinning at the token's barriers and each token costs
several times as long. Printed side by side, ms per token (p50 of the gaps between tokens) of the
same greedy answer, SmolLM2-135M:
- llama.cpp called from one thread only;
- llama.cpp called from whichever of two worker threads is free (how the thinker ran before);
- omni's thinker (`LlamaThinker.generate`) asked from two threads in turn: its tokens run on the
  llama thread.
Usage: python benchmarks/llama_threads.py [--llm NAME]
"""

import argparse
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

from omnicli.bench.scoring import percentile

MESSAGES = [{"role": "system", "content": "Answer in one short sentence."},
            {"role": "user", "content": "What do bees make?"}]
ROUNDS = 6


def gaps_ms(pieces) -> list[float]:
    times = [time.perf_counter() for _ in pieces]
    return [(b - a) * 1000 for a, b in pairwise(times[1:])]  # from the first token on


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--llm", default="smollm2")
    args = parser.parse_args()
    from omnicli.engine.cores import THREADS
    from omnicli.engine.llama_load import load_llama
    from omnicli.engine.thinker import LlamaThinker, resolve_llm

    cores = THREADS.thinker_prompt
    llm = load_llama(resolve_llm(args.llm), n_ctx=2048, n_threads=cores, n_threads_batch=cores, verbose=False)

    def direct() -> list[float]:
        return gaps_ms(llm.create_chat_completion(messages=MESSAGES, stream=True, max_tokens=32, temperature=0.0))

    rows = {}
    one = ThreadPoolExecutor(1)
    rows["llama.cpp from one thread"] = [g for _ in range(ROUNDS) for g in one.submit(direct).result()]
    one.shutdown()  # its thread, and its OpenMP team, end here
    two, turns = ThreadPoolExecutor(2), []
    for index in range(ROUNDS):
        busy = two.submit(time.sleep, 0.05) if index % 2 else None  # the other worker answers next
        turns += two.submit(direct).result()
        if busy:
            busy.result()
    rows["llama.cpp from two worker threads"] = turns
    two.shutdown()

    thinker = LlamaThinker(args.llm)
    measured: list[float] = []

    def ask() -> None:
        measured.extend(gaps_ms(thinker.generate(MESSAGES, max_tokens=32, temperature=0.0, stop=threading.Event())))

    for _ in range(ROUNDS):
        asker = threading.Thread(target=ask)
        asker.start()
        asker.join()
    rows["omni's thinker, asked from two threads"] = measured

    print(f"{args.llm}, {cores} threads, ms per token over {ROUNDS} answers")
    print(f"{'called':<44}{'p50':>8}{'p90':>8}")
    for name, values in rows.items():
        print(f"{name:<44}{percentile(values, .5):>8.1f}{percentile(values, .9):>8.1f}")


if __name__ == "__main__":
    main()
