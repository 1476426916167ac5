"""Two conversations on one embedded thinker: a long answer is being written when another
conversation's turn comes. How long does the second wait for its first speakable piece, and how
much later does the long one end? With answers taking turns (the default: the long answer steps
aside between two tokens, its cache copied out and back) against one answer at a time (the long
answer never steps aside), alternated, the same questions and greedy decoding.

    python benchmarks/thinker_turns.py                     # the default thinker, 5 rounds
    python benchmarks/thinker_turns.py --llm smollm2 --rounds 3
"""

import argparse
import asyncio
import statistics
import time

from omnicli.engine.sentences import SentenceChunker
from omnicli.engine.thinker import LlamaThinker
from omnicli.engine.workers import ModelQueue

SYSTEM = {"role": "system", "content": "You are a friendly voice assistant."}
LONG = [SYSTEM, {"role": "user", "content": "Tell me the story of the first moon landing, in detail."}]
SHORT = [SYSTEM, {"role": "user", "content": "What is the capital of France?"}]
LONG_TOKENS, SHORT_TOKENS = 160, 48
ASKED_AFTER_S = 1.5
"""The second turn comes this long after the long answer was asked for."""


class OneAtATime(ModelQueue):
    """The thinker's queue as it was: the answer holding the model never hears that others wait."""

    newcomers = waiting = property(lambda self: 0)


async def _first_piece_and_end(thinker: LlamaThinker, messages: list[dict], max_tokens: int) -> tuple[float, float]:
    """Seconds to the answer's first speakable piece and to its end."""
    start, chunker, first = time.perf_counter(), SentenceChunker(clock=lambda: 0.0), None
    async for piece in thinker.stream(messages, max_tokens=max_tokens, temperature=0.0):
        if first is None and chunker.feed(piece):
            first = time.perf_counter() - start
    end = time.perf_counter() - start
    return (first if first is not None else end), end


async def one_round(thinker: LlamaThinker) -> tuple[float, float]:
    """(the second turn's first piece, the long answer's end), seconds from when each was asked."""
    long_answer = asyncio.create_task(_first_piece_and_end(thinker, LONG, LONG_TOKENS))
    await asyncio.sleep(ASKED_AFTER_S)
    (first, _), (_, long_end) = await asyncio.gather(_first_piece_and_end(thinker, SHORT, SHORT_TOKENS), long_answer)
    return first, long_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default=None, help="a catalogue thinker (default: the default thinker)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    thinker = LlamaThinker(args.llm)
    thinker.load()
    asyncio.run(_first_piece_and_end(thinker, SHORT, 8))  # warm-up
    taking_turns: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    queues = {True: ModelQueue("thinker"), False: OneAtATime("thinker")}
    for _ in range(args.rounds):
        for turns in (True, False):
            thinker._queue = queues[turns]  # noqa: SLF001 - the one switch between the two
            taking_turns[turns].append(asyncio.run(one_round(thinker)))
    print(f"{thinker.source()}: a second turn asked {ASKED_AFTER_S} s into a long answer ({LONG_TOKENS} tokens max),"
          f" {args.rounds} rounds, median")
    print(f"{'':<28}{'second: first piece':>22}{'long answer: end':>20}")
    for turns, name in ((True, "answers taking turns"), (False, "one answer at a time")):
        firsts, ends = zip(*taking_turns[turns], strict=True)
        print(f"{name:<28}{statistics.median(firsts) * 1000:>19.0f} ms{statistics.median(ends) * 1000:>17.0f} ms")


if __name__ == "__main__":
    main()
