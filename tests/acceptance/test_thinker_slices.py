"""Two answers at once on one real SmolLM2 (llama.cpp): an answer past its first speakable piece
steps aside for one just asked for, which then need not wait for the whole first answer, and the
two take turns; each says exactly what it says with the model to itself. One closed while it
stood aside ends there, and leaves the model to the other."""

import asyncio

from omnicli.engine.thinker import LlamaThinker
from tests.helpers.thinker_reads import counted_reads, streamed

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer in detail."}
FIRST = [SYSTEM, {"role": "user", "content": "Describe how bread is made, step by step."}]
SECOND = [SYSTEM, {"role": "user", "content": "Explain why the sea is salty."}]
LIMIT = 64


async def _answer(thinker: LlamaThinker, messages: list[dict], log: list[str], name: str) -> str:
    return await streamed(thinker, messages, log, name, LIMIT)


async def _second_asked_past_the_first_piece(thinker: LlamaThinker, log: list[str]) -> tuple[asyncio.Task, asyncio.Task]:
    """The first answer, and the second asked for once the first is past its first speakable piece."""
    first = asyncio.create_task(_answer(thinker, FIRST, log, "first"))
    while log.count("first") < 12:
        await asyncio.sleep(0.005)
    return first, asyncio.create_task(_answer(thinker, SECOND, log, "second"))


def _alone(*conversations: list[dict]) -> str:
    """What the last conversation says on a model of its own that answered the others before it
    (so it reads its prompt from the same cached prefix as beside them)."""
    async def go():
        thinker = LlamaThinker("smollm2")
        said = ""
        for messages in conversations:
            said = await _answer(thinker, messages, [], "alone")
        return said

    return asyncio.run(go())


def test_an_answer_asked_for_meanwhile_goes_first_then_both_take_turns_and_say_what_they_say_alone():
    expected_first, expected_second = _alone(FIRST), _alone(FIRST, SECOND)
    thinker = LlamaThinker("smollm2")
    order: list[str] = []

    async def both_at_once():
        first, second = await _second_asked_past_the_first_piece(thinker, order)
        return await first, await second

    said_first, said_second = asyncio.run(both_at_once())
    assert said_first == expected_first and said_second == expected_second
    second_from, second_to = order.index("second"), len(order) - 1 - order[::-1].index("second")
    first_last = len(order) - 1 - order[::-1].index("first")
    assert second_from < first_last  # the second answer began before the first was written whole
    assert "first" in order[second_from:second_to]  # ...and once past its own first piece, gave turns back


def test_an_answer_closed_while_it_stood_aside_ends_there_and_the_other_goes_on():
    expected_second = _alone(FIRST, SECOND)
    thinker = LlamaThinker("smollm2")
    order: list[str] = []

    async def go():
        first, second = await _second_asked_past_the_first_piece(thinker, order)
        while "second" not in order:
            await asyncio.sleep(0.005)
        first.cancel()  # it stands aside now: the second has the model
        await asyncio.gather(first, return_exceptions=True)
        return await asyncio.wait_for(second, 60)

    assert asyncio.run(go()) == expected_second


def test_a_turn_heard_while_an_answer_is_spoken_is_written_ahead_and_both_say_what_they_say_alone():
    """Another session's pause while an answer is past its first piece: the answer steps aside for
    its turn to be written ahead (not skipped as while a first piece is written), goes on, and the
    turn's answer takes up what was written."""
    expected_first, expected_second = _alone(FIRST), _alone(FIRST, SECOND)
    thinker = LlamaThinker("smollm2")
    order: list[str] = []

    async def go():
        first = asyncio.create_task(_answer(thinker, FIRST, order, "first"))
        while order.count("first") < 12:
            await asyncio.sleep(0.005)
        written = await thinker.prefill(SECOND, temperature=0.0, max_tokens=LIMIT)
        first_so_far = order.count("first")
        second = await _answer(thinker, SECOND, order, "second")
        return await first, second, written, first_so_far

    said_first, said_second, written, first_so_far = asyncio.run(go())
    assert said_first == expected_first and said_second == expected_second
    assert written.pieces and expected_second.startswith("".join(written.pieces))
    assert first_so_far < order.count("first")  # written ahead while the first answer was not yet whole


def test_a_conversation_answered_while_another_stood_aside_is_kept_for_its_next_turn():
    """The answer that stood aside comes back: what the context held (the other conversation) is
    kept first, so that conversation's next turn reads only its new words."""
    thinker = LlamaThinker("smollm2")
    order: list[str] = []

    async def go():
        first, second = await _second_asked_past_the_first_piece(thinker, order)
        answered = [*SECOND, {"role": "assistant", "content": await second}]
        await first
        reads = counted_reads(thinker, prompts_only=True)
        return await _answer(thinker, [*answered, {"role": "user", "content": "Is it safe to drink?"}], order, "next"), reads

    said, reads = asyncio.run(go())
    assert said.strip()
    assert reads and max(reads) < 30, reads  # the new question and the answer's header, not the whole history
