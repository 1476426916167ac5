"""OpenAI's voice names on every route that takes a voice: each is spoken with the closest voice
the engine has (its gender where the engine has one, else the first); the engine's own names keep
working; a name nobody has heard of stays a 400 / `error` event listing the voices."""

import asyncio
import json

import pytest

from omnicli.engine.base import ChatRequest, SpeechRequest, Voice
from omnicli.session.turn_based import RealtimeSession
from omnicli.turns.scheduler import AnswerScheduler
from tests.fast.test_duplex_lane import connect
from tests.fast.test_duplex_lane import run as run_lane
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.models import TURN_MODELS
from tests.helpers.realtime_harness import run as run_session
from tests.helpers.realtime_harness import user_text
from tests.helpers.scripted import ScriptedEngine
from tests.helpers.server_harness import openai_error, run

FEMALE = ["coral", "nova", "sage", "shimmer", "marin"]
MALE = ["ash", "ballad", "echo", "fable", "onyx", "verse", "cedar"]
"""OpenAI's documented voices (speech and realtime), as they are heard; alloy is neither."""
TWO_VOICES = [Voice("joe", "US English, male", gender="male"), Voice("amy", "US English, female", gender="female")]


def closest(name: str) -> str:
    return "amy" if name in (*FEMALE, "amy") else "joe"


@pytest.mark.parametrize("name", ["alloy", *FEMALE, *MALE, "joe", "amy"])
def test_speech_speaks_openai_names_with_the_closest_voice_and_own_names_as_they_are(name):
    engine = ScriptedEngine(voices=TWO_VOICES)
    response = run(lambda client, app: client.post("/v1/audio/speech", json={"input": "Hi.", "voice": name}), engine)
    assert response.status_code == 200, response.text
    assert engine.requests == [SpeechRequest(text="Hi.", voice=closest(name))]


def test_with_one_voice_every_openai_name_is_that_voice():
    for name in ["alloy", *FEMALE, *MALE]:
        engine = ScriptedEngine()  # joe alone, gender unknown
        response = run(lambda client, app: client.post("/v1/audio/speech", json={"input": "Hi.", "voice": name}), engine)  # noqa: B023
        assert response.status_code == 200, (name, response.text)
        assert engine.requests[0].voice == "joe"


def test_chat_audio_takes_an_openai_voice():
    engine = ScriptedEngine(voices=TWO_VOICES)
    body = {"messages": [{"role": "user", "content": "Hi"}], "modalities": ["text", "audio"],
            "audio": {"voice": "nova", "format": "wav"}}
    response = run(lambda client, app: client.post("/v1/chat/completions", json=body), engine)
    assert response.status_code == 200, response.text
    [request] = engine.requests
    assert isinstance(request, ChatRequest) and request.voice == "amy"


def test_an_unknown_name_is_still_a_400_that_lists_the_voices_and_openais():
    engine = ScriptedEngine(voices=TWO_VOICES)
    response = run(lambda client, app: client.post("/v1/audio/speech", json={"input": "Hi.", "voice": "nobody"}), engine)
    message = openai_error(response, 400)
    assert message.startswith("unknown voice 'nobody'; voices: joe, amy (or OpenAI's: alloy, ash, ")
    assert engine.requests == []


def test_the_voice_list_says_language_gender_quality_and_the_openai_names_each_voice_speaks():
    engine = ScriptedEngine(voices=[Voice("joe", "a voice", language="en-US", gender="male", quality="medium"),
                                    Voice("amy", "another", language="en-GB", gender="female", quality="high")])
    listed = run(lambda client, app: client.get("/v1/audio/voices"), engine).json()
    assert listed["voices"] == ["joe", "amy"]
    joe, amy = listed["data"]
    assert {k: joe[k] for k in ("name", "language", "gender", "quality")} == {
        "name": "joe", "language": "en-US", "gender": "male", "quality": "medium"}
    assert joe["openai_voices"] == ["alloy", "ash", "ballad", "echo", "fable", "onyx", "verse", "cedar"]
    assert sorted(amy["openai_voices"]) == sorted(FEMALE)


def test_speak_list_voices_shows_the_same_columns():
    engines = ScriptedEngines(ScriptedEngine(voices=[Voice("joe", "a voice", language="en-US", gender="male", quality="medium")]))
    result = omni("speak", "--list-voices", engines=engines)
    assert result.exit_code == 0, result.stderr
    fields = result.stdout.rstrip("\n").split("\t")
    assert fields[:5] == ["joe", "en-US", "male", "medium", "a voice"]
    assert fields[5] == "OpenAI: " + ", ".join(["alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx",
                                                "sage", "shimmer", "verse", "marin", "cedar"])


def test_a_realtime_session_update_with_an_openai_voice_is_taken_and_the_answer_spoken_with_it():
    engine = ScriptedEngine(voices=TWO_VOICES)
    sent: list[dict] = []

    async def send(event: dict) -> None:
        sent.append(event)

    async def talk() -> None:
        session = RealtimeSession(engine, send, scheduler=AnswerScheduler(), models=TURN_MODELS)
        await session.start()
        for voice in ("shimmer", "nobody"):
            await session.handle(json.dumps({"type": "session.update", "session": {
                "type": "realtime", "audio": {"output": {"voice": voice}}}}))
        await session.handle(json.dumps(user_text("Hi")))
        await session.handle(json.dumps({"type": "response.create"}))
        while not any(event["type"] == "response.done" for event in sent):
            await asyncio.sleep(0.01)
        await session.close()

    run_session(talk())
    updated = [e["session"]["audio"]["output"]["voice"] for e in sent if e["type"] == "session.updated"]
    assert updated == ["amy"]  # the session says which voice speaks
    [error] = [e["error"] for e in sent if e["type"] == "error"]
    assert (error["code"], error["param"]) == ("invalid_value", "session.audio.output.voice")
    assert "unknown voice 'nobody'; voices: joe, amy" in error["message"]
    assert [r.voice for r in engine.requests if isinstance(r, ChatRequest)] == ["amy"]


def test_a_duplex_session_opened_with_an_openai_voice_speaks_with_the_closest():
    async def test(app):
        socket, created = await connect(app, {"voice": "cedar"})
        assert created["type"] == "session.created", created
        await socket.send({"type": "session.update", "session": {"voice": "nobody"}})
        return created, await socket.until("error")

    created, error = run_lane(test, ScriptedEngine(voices=TWO_VOICES))
    assert created["session"]["audio"]["output"]["voice"] == "joe"
    assert "unknown voice 'nobody'" in error["error"]["message"]


def test_an_engine_voice_named_like_an_openai_voice_is_itself_and_not_listed_as_an_alias():
    engine = ScriptedEngine(voices=[Voice("joe", gender="male"), Voice("alloy", gender="female")])
    response = run(lambda client, app: client.post("/v1/audio/speech", json={"input": "Hi.", "voice": "alloy"}), engine)
    assert response.status_code == 200 and engine.requests[0].voice == "alloy"
    listed = run(lambda client, app: client.get("/v1/audio/voices"), engine).json()["data"]
    assert "alloy" not in listed[0]["openai_voices"] and "alloy" not in listed[1]["openai_voices"]
    assert "nova" in listed[1]["openai_voices"] and "onyx" in listed[0]["openai_voices"]


def test_both_session_kinds_greet_with_the_engines_own_default_voice():
    """The voice a session shows before the client names one is the first the engine lists (the
    one it speaks by default), whichever engine it is."""
    engine = ScriptedEngine(voices=list(reversed(TWO_VOICES)))
    sent: list[dict] = []

    async def send(event: dict) -> None:
        sent.append(event)

    async def greet() -> None:
        session = RealtimeSession(engine, send, scheduler=AnswerScheduler(), models=TURN_MODELS)
        await session.start()
        await session.close()

    run_session(greet())
    [created] = [e for e in sent if e["type"] == "session.created"]
    assert created["session"]["audio"]["output"]["voice"] == "amy"

    async def open_duplex(app):
        socket, created = await connect(app, {})
        return created

    duplex_created = run_lane(open_duplex, ScriptedEngine(voices=list(reversed(TWO_VOICES))))
    assert duplex_created["session"]["audio"]["output"]["voice"] == "amy"
