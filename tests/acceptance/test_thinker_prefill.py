"""Reading a turn ahead on the real SmolLM2 (llama.cpp): after `prefill`, an answer to the same
messages reads at most one token instead of the new turn, and says exactly what it says without it.
With the answer's `max_tokens`, `prefill` also writes its first words: the answer takes them over
(computing none of them again) and still says exactly the same; other work on the model sets them
aside for their answer to take up later."""

import asyncio

from omnicli.engine.thinker import LlamaThinker
from tests.helpers.thinker_reads import counted_reads, streamed

BEFORE = [{"role": "system", "content": "Answer in one short sentence."},
          {"role": "user", "content": "What do cats like to eat?"}]


LIMIT = 24


def _answer(thinker: LlamaThinker, messages: list[dict]) -> str:
    async def go():
        return "".join([piece async for piece in thinker.stream(messages, max_tokens=LIMIT, temperature=0.0)])

    return asyncio.run(go())


def test_a_prefilled_turn_is_answered_without_reading_it_again_and_says_the_same():
    first = _answer(LlamaThinker("smollm2"), BEFORE)
    after = [*BEFORE, {"role": "assistant", "content": first}, {"role": "user", "content": "And what do dogs like to eat?"}]
    plain = LlamaThinker("smollm2")
    _answer(plain, BEFORE)
    plain_reads = counted_reads(plain)
    expected = _answer(plain, after)

    ahead = LlamaThinker("smollm2")
    _answer(ahead, BEFORE)
    asyncio.run(ahead.prefill(after, temperature=0.0))
    reads = counted_reads(ahead)
    assert _answer(ahead, after) == expected and expected.strip()
    assert plain_reads[0] > 10  # the new turn and the assistant's header
    assert reads[0] <= 1  # nothing new to read (the cached prompt's logits are still there), or its last token


def test_prefill_is_skipped_while_the_model_answers_something_else():
    thinker = LlamaThinker("smollm2")
    _answer(thinker, BEFORE)
    cached = thinker.load().n_tokens

    async def go():
        async with thinker._queue.turn():  # noqa: SLF001 - an answer holding the model
            await asyncio.wait_for(thinker.prefill([*BEFORE, {"role": "user", "content": "Hi."}], temperature=0.0), 5)

    asyncio.run(go())
    assert thinker.load().n_tokens == cached


def _after(thinker: LlamaThinker, question: str) -> list[dict]:
    return [*BEFORE, {"role": "assistant", "content": _answer(thinker, BEFORE)}, {"role": "user", "content": question}]


def test_an_answer_written_ahead_is_taken_over_and_says_the_same():
    plain = LlamaThinker("smollm2")
    after = _after(plain, "And what do dogs like to eat?")
    plain_reads = counted_reads(plain)
    expected = _answer(plain, after)

    ahead = LlamaThinker("smollm2")
    _answer(ahead, BEFORE)
    asyncio.run(ahead.prefill(after, temperature=0.0, max_tokens=LIMIT))
    written = "".join(ahead._ahead.pieces)  # noqa: SLF001 - what was written ahead
    reads = counted_reads(ahead)
    assert _answer(ahead, after) == expected and expected.strip()
    assert len(written.split()) >= 3 and expected.startswith(written)  # up to its first speakable piece
    assert max(reads) == 1 and len(reads) <= len(plain_reads) - len(written.split())  # none written again


def test_an_answer_written_ahead_waits_aside_while_another_turn_is_answered():
    """Another turn asked (another session's, or the user went on): the answer to it is the one a
    fresh model gives; the one written ahead waits aside, and if it is asked for after all says
    what it says alone. The next turn read ahead ends it."""
    plain = LlamaThinker("smollm2")
    asked = _after(plain, "And what do birds like to eat?")
    expected = _answer(plain, asked)
    alone = LlamaThinker("smollm2")
    guessed = _after(alone, "And what do dogs")
    expected_guess = _answer(alone, guessed)  # read from the same cached prefix as when written ahead

    ahead = LlamaThinker("smollm2")
    _after(ahead, "And what do dogs")
    asyncio.run(ahead.prefill(guessed, temperature=0.0, max_tokens=LIMIT))
    written = "".join(ahead._ahead.pieces)  # noqa: SLF001 - what was written ahead
    assert _answer(ahead, asked) == expected
    assert ahead._ahead is not None and ahead._ahead.aside is not None  # noqa: SLF001 - set aside, not ended
    reads = counted_reads(ahead)
    assert _answer(ahead, guessed) == expected_guess and expected_guess.startswith(written)
    assert max(reads) == 1  # taken up where it stood: nothing read again, its first words not written again

    asyncio.run(ahead.prefill(guessed, temperature=0.0, max_tokens=LIMIT))
    asyncio.run(ahead.prefill(asked, temperature=0.0))  # a plain read of another turn ends it
    assert ahead._ahead is None and _answer(ahead, asked) == expected  # noqa: SLF001


def test_writing_ahead_gives_way_to_an_answer_asked_for_meanwhile_and_is_taken_up_after():
    """Another session's answer asked for while a guess is written: the guess stops at its next
    token (before its first piece), the answer goes first and says what it says alone, and the
    guess's own answer then takes up what was written and says what it says alone too."""
    alone = LlamaThinker("smollm2")
    guessed = _after(alone, "And what do dogs")
    whole_piece = asyncio.run(alone.prefill(guessed, temperature=0.0, max_tokens=LIMIT)).pieces  # undisturbed
    expected_guess = _answer(alone, guessed)
    other = [{"role": "system", "content": "Answer in one short sentence."}, {"role": "user", "content": "What is rain?"}]
    expected_other = _answer(alone, other)  # read with the guessed turn's cache in the context, as below

    thinker = LlamaThinker("smollm2")
    _after(thinker, "And what do dogs")
    order: list[str] = []

    async def go():
        writing = asyncio.create_task(thinker.prefill(guessed, temperature=0.0, max_tokens=LIMIT))
        while not thinker._queue.busy:  # noqa: SLF001 - the guess holds the model
            await asyncio.sleep(0.001)
        answer = asyncio.create_task(streamed(thinker, other, order, "other", LIMIT))
        written = await writing
        order.append("guess returned")
        return written, await answer

    written, said_other = asyncio.run(go())
    assert said_other == expected_other
    assert order[0] == "guess returned" and not written.whole
    assert len(written.pieces) < len(whole_piece) and expected_guess.startswith("".join(written.pieces))  # stopped short
    assert thinker._ahead is not None  # noqa: SLF001 - waiting aside for its own answer
    assert _answer(thinker, guessed) == expected_guess


def test_a_guess_set_aside_then_replaced_by_another_leaves_its_reading_to_its_conversation():
    """A guess set aside (another session's answer came first) and ended by a third session's
    guess: the copy it held is kept as its conversation's, so its turn, asked for after all, reads
    nothing again and says what it says alone."""
    alone = LlamaThinker("smollm2")
    guessed = _after(alone, "And what do dogs")
    expected_guess = _answer(alone, guessed)
    other = [{"role": "system", "content": "Answer in one short sentence."}, {"role": "user", "content": "What is rain?"}]
    third = [{"role": "system", "content": "Answer in one short sentence."}, {"role": "user", "content": "What is snow?"}]

    thinker = LlamaThinker("smollm2")
    _after(thinker, "And what do dogs")
    asyncio.run(thinker.prefill(guessed, temperature=0.0, max_tokens=LIMIT))
    _answer(thinker, other)  # sets the guess aside
    asyncio.run(thinker.prefill(third, temperature=0.0, max_tokens=LIMIT))  # ends it
    assert thinker._ahead is not None and thinker._ahead.messages == third  # noqa: SLF001
    reads = counted_reads(thinker)
    assert _answer(thinker, guessed) == expected_guess
    assert max(reads) == 1  # its reading came back: the last token read again, then one at a time


def test_writing_ahead_stops_when_cancelled_and_keeps_nothing():
    """The user went on speaking: the guess stops at its next token, and the model is free."""
    thinker = LlamaThinker("smollm2")
    guessed = _after(thinker, "And what do dogs")

    async def go():
        writing = asyncio.create_task(thinker.prefill(guessed, temperature=0.0, max_tokens=LIMIT))
        await asyncio.sleep(0)  # it holds the model and its job has begun
        writing.cancel()
        await asyncio.gather(writing, return_exceptions=True)
        return writing.cancelled(), thinker._queue.busy  # noqa: SLF001

    assert asyncio.run(go()) == (True, False)
    assert thinker._ahead is None  # noqa: SLF001
    written = LlamaThinker("smollm2")
    _after(written, "And what do dogs")
    asyncio.run(written.prefill(guessed, temperature=0.0, max_tokens=LIMIT))
    assert thinker.load().n_tokens < written.load().n_tokens - 2  # it stopped before the words were written
    assert _answer(thinker, guessed).strip()  # and the model answers
