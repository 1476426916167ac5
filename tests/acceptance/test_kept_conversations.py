"""Several conversations on one real SmolLM2 (llama.cpp): turns of two conversations taken in turn
each read only their new words (each conversation's cache is kept while the other is read), and
say exactly what the same conversation says on a model of its own."""

import asyncio

from omnicli.engine.thinker import LlamaThinker
from tests.helpers.thinker_reads import counted_reads

SYSTEM = {"role": "system", "content": "You are a friendly voice assistant. Answer in one or two short sentences."}
FIRST = ["What is the capital of France?", "Why is the sky blue?", "What do bees make?", "How many legs does a spider have?"]
SECOND = ["What is two plus two?", "What colour is grass?", "What animal barks?", "Which planet is red?"]
LIMIT = 32


async def _turn(thinker: LlamaThinker, conversation: list[dict], question: str) -> str:
    conversation.append({"role": "user", "content": question})
    answer = "".join([piece async for piece in thinker.stream(conversation, max_tokens=LIMIT, temperature=0.0)])
    conversation.append({"role": "assistant", "content": answer})
    return answer


def _alone(questions: list[str]) -> list[str]:
    async def go():
        thinker, conversation = LlamaThinker("smollm2"), [SYSTEM]
        return [await _turn(thinker, conversation, question) for question in questions]

    return asyncio.run(go())


def test_two_conversations_taken_in_turn_read_only_their_new_words_and_say_what_they_say_alone():
    expected_first, expected_second = _alone(FIRST), _alone(SECOND)
    thinker = LlamaThinker("smollm2")
    reads = counted_reads(thinker, prompts_only=True)

    async def interleaved():
        first, second, said = [SYSTEM], [SYSTEM], ([], [])
        for one, other in zip(FIRST, SECOND, strict=True):
            said[0].append(await _turn(thinker, first, one))
            said[1].append(await _turn(thinker, second, other))
        return said

    said_first, said_second = asyncio.run(interleaved())
    assert said_first == expected_first and said_second == expected_second
    assert all(answer.strip() for answer in said_first + said_second)
    history = len(thinker.load().tokenize(str(said_first).encode()))  # the words a turn would read again
    assert len(reads) == 2 * len(FIRST)
    assert max(reads[2:]) < 40 < history, reads  # each later turn: its question, the answer's header, one token
    assert thinker.conversations.swaps == 2 * len(FIRST) - 2


def test_kept_conversations_are_forgotten_past_their_memory_budget():
    thinker = LlamaThinker("smollm2")
    thinker.conversations.keep_bytes = 1  # no copy fits: each conversation's history is read again
    reads = counted_reads(thinker, prompts_only=True)

    async def interleaved():
        first, second = [SYSTEM], [SYSTEM]
        for one, other in zip(FIRST[:3], SECOND[:3], strict=True):
            await _turn(thinker, first, one)
            await _turn(thinker, second, other)

    asyncio.run(interleaved())
    assert thinker.conversations.swaps == 0 and thinker.conversations.kept_bytes == 0
    assert reads[-1] > reads[1] + 20  # the second conversation's last turn read its history again
