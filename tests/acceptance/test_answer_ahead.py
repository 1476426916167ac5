"""An answer begun before it is asked for, on the embedded cascade (SmolLM2, Piper): after
`Engine.prepare(req, begin_answer=True)` (a turn heard in the pause before its commit), the answer
to the same request says the same words, its first speakable piece is not synthesized a second
time, and a request that differs from the guess is answered as if nothing had been guessed."""

import asyncio

import numpy as np

from omnicli.engine import talker as talker_module
from omnicli.engine.base import AudioDelta, ChatRequest, Message, TextDelta, TextPart
from omnicli.engine.staged import embedded_engine


def _request(question: str) -> ChatRequest:
    return ChatRequest([Message("system", [TextPart("Answer in one short sentence.")]), Message("user", [TextPart(question)])],
                       modalities=("text", "audio"), max_tokens=40, temperature=0.0)


async def _answer(engine, req: ChatRequest) -> tuple[str, list]:
    text, chunks = [], []
    async for delta in engine.chat(req):
        if isinstance(delta, TextDelta):
            text.append(delta.text)
        elif isinstance(delta, AudioDelta):
            chunks.append(delta.chunk)
    return "".join(text), chunks


async def _expected_and_warm(req: ChatRequest):
    """What a fresh engine answers to `req`, and another engine with its models loaded."""
    expected, _ = await _answer(embedded_engine(llm="smollm2"), req)
    engine = embedded_engine(llm="smollm2")
    await _answer(engine, _request("Hello."))
    return expected, engine


def _count_syntheses(monkeypatch) -> list[str]:
    said: list[str] = []
    synthesize = talker_module._synthesize

    def counted(model, loaded, text, speed):
        said.append(text)
        return synthesize(model, loaded, text, speed)

    monkeypatch.setattr(talker_module, "_synthesize", counted)
    return said


def test_an_answer_begun_ahead_is_taken_over(monkeypatch):
    req = _request("What do cats like to eat?")

    async def go():
        expected, engine = await _expected_and_warm(req)
        said = _count_syntheses(monkeypatch)
        await engine.prepare(req, begin_answer=True)
        ahead = list(said)
        text, chunks = await _answer(engine, req)
        return expected, ahead, said, text, chunks

    expected, ahead, said, text, chunks = asyncio.run(go())
    assert text == expected and expected.strip()
    assert len(ahead) == 1 and expected.startswith(ahead[0].split()[0])  # its first piece, spoken in the pause
    assert said.count(ahead[0]) == 1 and chunks[0].text == ahead[0]  # the answer took it, not synthesized again
    assert [c.text for c in chunks] == said and all(np.abs(c.samples).max() > 0.05 for c in chunks)


def test_an_answer_begun_for_another_turn_is_dropped(monkeypatch):
    asked = _request("What do birds like to eat?")

    async def go():
        expected, engine = await _expected_and_warm(asked)
        await engine.prepare(_request("What do dogs"), begin_answer=True)  # the user went on after "dogs"
        said = _count_syntheses(monkeypatch)
        text, chunks = await _answer(engine, asked)
        return expected, said, text, chunks

    expected, said, text, chunks = asyncio.run(go())
    assert text == expected
    assert [c.text for c in chunks] == said  # every piece of this answer spoken for it


def test_without_begin_answer_the_prompt_is_only_read(monkeypatch):
    req = _request("What do cats like to eat?")

    async def go():
        engine = embedded_engine(llm="smollm2")
        await _answer(engine, _request("Hello."))
        said = _count_syntheses(monkeypatch)
        await engine.prepare(req)
        return list(said), engine.stages.thinker._ahead  # noqa: SLF001

    said, ahead = asyncio.run(go())
    assert said == [] and ahead is None
