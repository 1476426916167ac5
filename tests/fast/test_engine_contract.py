"""The Engine contract: what every engine offers, with defaults where an engine has no answer."""

import asyncio

import numpy as np
import pytest

from omnicli.engine.base import Engine, SpeechRequest
from omnicli.errors import UnsupportedError
from tests.helpers.scripted import ScriptedEngine


class SpeechOnly(Engine):
    name = "speech-only"

    async def speech(self, req):
        yield None

    async def chat(self, req):
        yield None


def test_defaults_apply_where_an_engine_has_no_answer():
    engine = SpeechOnly()

    async def run():
        assert await engine.voices() == []
        assert await engine.preload() is None
        assert await engine.check() is None
        assert engine.loaded() == {}
        assert await engine.aclose() is None
        with pytest.raises(UnsupportedError, match="the speech-only engine cannot transcribe audio"):
            await engine.transcribe(np.zeros(160, np.float32), 16000)

    asyncio.run(run())


def test_scripted_engine_records_every_request_in_order():
    engine = ScriptedEngine(transcripts=["one", "two"])

    async def run():
        chunks = [c async for c in engine.speech(SpeechRequest("Hi."))]
        heard = [(await engine.transcribe(np.zeros(24000, np.float32), 24000, quick=True)).text for _ in range(3)]
        return chunks, heard

    chunks, heard = asyncio.run(run())
    assert [c.text for c in chunks] == ["Hello."]
    assert heard == ["one", "two", "two"]
    assert engine.requests[0] == SpeechRequest("Hi.")
    assert engine.requests[1:] == [("transcribe", 1.0, 24000, None, True)] * 3
