"""Concurrent spoken chats on one engine: llama.cpp's thinker against vLLM's, side by side.

llama.cpp answers one chat at a time (the others queue); vLLM batches every chat in flight into
each step. For 1, 4 and 8 chats started together on one embedded engine (the same model, SmolLM2
by default, the same Piper talker), it measures the thinker's tokens a second over all chats and
the first audio of each chat (median and worst), with the time to load each thinker apart.
Goal: at 8 chats, vLLM's aggregate tokens/s at least 2x llama.cpp's (the point of batching).
Needs the extra: pip install ".[vllm]".
Usage: python benchmarks/thinker_batching.py [--llm smollm2] [--levels 1,4,8] [--max-tokens 64]
"""

import argparse
import asyncio
import statistics
import time

QUESTIONS = [
    "What is the capital of France?", "Name three colours of the rainbow.", "Why is the sky blue?",
    "What do bees make?", "How many legs does a spider have?", "What is the largest ocean?",
    "Who wrote Romeo and Juliet?", "What is water made of?",
]
SYSTEM = "You are a helpful assistant. Answer briefly and clearly."


async def one_chat(engine, question: str, max_tokens: int) -> dict:
    from omnicli.engine.base import AudioDelta, ChatDone, ChatRequest, Message, TextPart

    request = ChatRequest([Message("system", [TextPart(SYSTEM)]), Message("user", [TextPart(question)])],
                          modalities=("text", "audio"), temperature=0.0, max_tokens=max_tokens)
    start = time.perf_counter()
    first = done = None
    async for delta in engine.chat(request):
        if isinstance(delta, AudioDelta) and first is None:
            first = time.perf_counter() - start
        elif isinstance(delta, ChatDone):
            done = delta
    assert done is not None
    thinker = done.metrics["thinker"]
    return {"first_audio": first, "tokens": done.usage["completion_tokens"],
            "thinking": (thinker["started"], thinker["finished"])}


async def level(engine, chats: int, max_tokens: int) -> dict:
    results = await asyncio.gather(*(one_chat(engine, QUESTIONS[i % len(QUESTIONS)], max_tokens) for i in range(chats)))
    # The thinker's throughput: every chat's tokens over the span from the first start to the last token.
    span = max(r["thinking"][1] for r in results) - min(r["thinking"][0] for r in results)
    firsts = [r["first_audio"] for r in results if r["first_audio"] is not None]
    return {"chats": chats, "tokens_per_second": sum(r["tokens"] for r in results) / span,
            "first_audio_median": statistics.median(firsts) if firsts else None,
            "first_audio_worst": max(firsts) if firsts else None}


async def measure(thinker: str, llm: str, levels: list[int], max_tokens: int) -> tuple[float, list[dict]]:
    from dataclasses import replace

    from omnicli.engine.staged import StagedEngine, embedded_stages

    stages = embedded_stages(llm=llm)
    if thinker == "vllm":
        from omnicli.engine.vllm_thinker import VllmThinker

        stages = replace(stages, thinker=VllmThinker(llm))
    engine = StagedEngine(stages)
    start = time.perf_counter()
    await asyncio.gather(stages.thinker.preload(), stages.talker.preload())
    load = time.perf_counter() - start
    await one_chat(engine, "Hello.", 8)  # warm-up: first-request costs are not the steady state
    rows = [await level(engine, chats, max_tokens) for chats in levels]
    close = getattr(stages.thinker, "close", None)
    if close is not None:
        close()
    return load, rows


def seconds(value) -> str:
    return "-" if value is None else f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="smollm2")
    parser.add_argument("--levels", default="1,4,8")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]

    results = {}
    for thinker in ("llama", "vllm"):
        results[thinker] = asyncio.run(measure(thinker, args.llm, levels, args.max_tokens))
        print(f"{thinker}: loaded in {results[thinker][0]:.1f} s", flush=True)

    print(f"\n{args.llm}, {args.max_tokens} tokens a chat, chats started together, answers spoken by Piper")
    print(f"{'chats':>5} | {'llama.cpp tok/s':>15} {'first audio p50/worst':>22} | {'vLLM tok/s':>10} {'first audio p50/worst':>22} | vLLM/llama")
    for llama, vllm in zip(results["llama"][1], results["vllm"][1], strict=True):
        ratio = vllm["tokens_per_second"] / llama["tokens_per_second"] if llama["tokens_per_second"] else float("nan")
        print(f"{llama['chats']:>5} | {llama['tokens_per_second']:>15.1f} "
              f"{seconds(llama['first_audio_median']) + ' / ' + seconds(llama['first_audio_worst']):>22} | "
              f"{vllm['tokens_per_second']:>10.1f} "
              f"{seconds(vllm['first_audio_median']) + ' / ' + seconds(vllm['first_audio_worst']):>22} | {ratio:.2f}x")
    top_llama, top_vllm = results["llama"][1][-1], results["vllm"][1][-1]
    goal = top_vllm["tokens_per_second"] >= 2 * top_llama["tokens_per_second"]
    print(f"\ngoal: at {top_vllm['chats']} chats vLLM >= 2x llama.cpp tokens/s: {'met' if goal else 'NOT met'}")


if __name__ == "__main__":
    main()
