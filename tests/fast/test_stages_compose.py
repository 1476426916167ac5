"""The factory composes a staged engine whose stages live anywhere: each flag swaps one local
stage for a client of that server, asked for the model named; the rest stay in process. A
server that is not there fails first, in one line naming its stage; each is checked once."""

import asyncio
import io
import json

import httpx
import pytest
import soundfile as sf

from omnicli.audio.formats import AudioFormat, encode
from omnicli.client.stages import HybridEngine, RemoteASR, RemoteTalker, RemoteThinker
from omnicli.config import Connection
from omnicli.engine.base import AudioDelta, AudioPart, ChatDone, ChatRequest, Message, TextDelta, TextPart, TranscriptDelta
from omnicli.engine.staged import StagedEngine
from omnicli.errors import ContextWindowError, ServerError, UsageError
from tests.helpers.realtime_harness import Session, pcm_b64
from tests.helpers.realtime_harness import run as run_within_limit
from tests.helpers.scripted import tone
from tests.helpers.stage_fakes import (
    FakeServer,
    HeardASR,
    PiecesThinker,
    StageEngines,
    ToneTalker,
    clip,
    llama_server,
    whisper_server,
)

URL = "http://stage.test"
HERE = Connection(None, None)


def choice(**servers):
    from omnicli.cli.engines import EngineChoice, stage_servers

    models = {k: servers.pop(k) for k in ("llm_model", "tts_model") if k in servers}
    asr_model = servers.pop("asr_model", None)
    return EngineChoice(HERE, asr_model=asr_model, voice=servers.pop("voice", None),
                        stages=stage_servers(**servers, **models))


def run(coro):
    return asyncio.run(coro)


async def collect(engine, req):
    try:
        return [d async for d in engine.chat(req)]
    finally:
        await engine.aclose()


def spoken_question() -> ChatRequest:
    wav = encode(clip(0.5), 24000, AudioFormat.WAV)
    return ChatRequest([Message("user", [AudioPart(wav, "wav")])], modalities=("text", "audio"), max_tokens=50)


def test_no_stage_server_is_the_local_staged_engine():
    factory = StageEngines(FakeServer())
    engine = factory.engine(choice())
    assert type(engine) is StagedEngine and engine.stages is factory.stages


def test_llm_server_thinks_between_local_ears_and_voice():
    server = llama_server("It is", " noon.")
    factory = StageEngines(server)
    engine = factory.engine(choice(llm=URL + "/v1", llm_model="smollm2"))
    assert isinstance(engine, HybridEngine)
    assert (engine.stages.asr, engine.stages.talker) == (factory.stages.asr, factory.stages.talker)
    assert isinstance(engine.stages.thinker, RemoteThinker)

    deltas = run(collect(engine, spoken_question()))
    assert [d.text for d in deltas if isinstance(d, TranscriptDelta)] == ["what time is it"]
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "It is noon."
    assert [d.chunk.text for d in deltas if isinstance(d, AudioDelta)] == ["It is noon."]
    assert factory.stages.talker.said == [("It is noon.", None)]
    (body,) = server.bodies("/v1/chat/completions")
    assert body["model"] == "smollm2" and body["stream"] is True and body["max_tokens"] == 50
    assert "what time is it" in json.dumps(body["messages"])
    assert isinstance(deltas[-1], ChatDone) and deltas[-1].text == "It is noon."
    assert server.sent("GET", "/v1/models") == [server.requests[0]]  # checked, once; the model was named


def test_server_is_checked_once_for_every_turn():
    server = llama_server()
    engine = StageEngines(server).engine(choice(llm=URL))
    req = ChatRequest([Message("user", [TextPart("Hi")])])

    async def two_turns():
        try:
            await engine.preload()
            for _ in range(2):
                [d async for d in engine.chat(req)]
        finally:
            await engine.aclose()

    run(two_turns())
    # one look serves the check and the default model (the server's first), kept for the run
    assert len(server.sent("GET", "/v1/models")) == 1
    assert [b["model"] for b in server.bodies("/v1/chat/completions")] == ["/models/smollm2.gguf"] * 2


def test_asr_server_hears_and_is_asked_for_the_model_named():
    server = whisper_server("hello there")
    engine = StageEngines(server).engine(choice(asr=URL, asr_model="whisper-1"))
    assert isinstance(engine.stages.asr, RemoteASR)

    async def hear():
        try:
            return await engine.transcribe(clip(1.0), 24000, language="en")
        finally:
            await engine.aclose()

    transcript = run(hear())
    assert transcript.text == "hello there" and transcript.language == "en"
    assert [s["text"] for s in transcript.segments] == ["hello there", "again"]
    (request,) = server.sent("POST", "/v1/audio/transcriptions")
    form = request.content.decode("latin-1")
    assert 'name="model"\r\n\r\nwhisper-1' in form and 'name="language"\r\n\r\nen' in form
    assert not server.sent("GET", "/v1/models")  # the model was named: nothing to look up


def test_tts_server_speaks_each_sentence_with_the_model_and_voice_named():
    def speech(request):
        buffer = io.BytesIO()
        sf.write(buffer, tone(0.3).samples, 24000, format="WAV", subtype="PCM_16")
        return httpx.Response(200, content=buffer.getvalue(), headers={"content-type": "audio/wav"})

    server = FakeServer({("POST", "/v1/audio/speech"): speech})
    factory = StageEngines(server)
    engine = factory.engine(choice(tts=URL, tts_model="kokoro", voice="af_sky"))
    assert isinstance(engine.stages.talker, RemoteTalker)
    req = ChatRequest([Message("user", [TextPart("Hi")])], modalities=("text", "audio"))
    deltas = run(collect(engine, req))
    assert [d.chunk.text for d in deltas if isinstance(d, AudioDelta)] == ["Local answer."]
    (body,) = server.bodies("/v1/audio/speech")
    assert (body["input"], body["model"], body["voice"]) == ("Local answer.", "kokoro", "af_sky")


def test_unreachable_stage_fails_first_in_one_line_naming_it():
    def refuse(request):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    factory = StageEngines(FakeServer())
    factory.http = httpx.MockTransport(refuse)
    engine = factory.engine(choice(llm="http://127.0.0.1:9"))
    with pytest.raises(ServerError) as failed:
        run(engine.preload())
    assert str(failed.value) == "--llm-server: cannot reach the server at http://127.0.0.1:9: [Errno 111] Connection refused"
    assert factory.stages.asr.preloaded == factory.stages.talker.preloaded == 0  # before any local model loads

    with pytest.raises(ServerError, match="^--llm-server: cannot reach"):
        run(collect(factory.engine(choice(llm="http://127.0.0.1:9")), spoken_question()))
    assert factory.stages.asr.heard == []  # nothing heard for a thinker that is not there


def test_a_server_error_mid_answer_names_the_stage_and_a_context_refusal_is_one():
    overflow = httpx.Response(400, json={"error": {"message": "This model's maximum context length is 2048 tokens.",
                                                   "code": "context_length_exceeded"}})
    server = llama_server()
    server.routes[("POST", "/v1/chat/completions")] = overflow
    engine = StageEngines(server).engine(choice(llm=URL))
    with pytest.raises(ContextWindowError, match="maximum context length is 2048"):
        run(collect(engine, ChatRequest([Message("user", [TextPart("Hi")])])))
    server.routes[("POST", "/v1/chat/completions")] = httpx.Response(500, json={"error": {"message": "boom"}})
    with pytest.raises(ServerError, match="^--llm-server: server answered 500: boom$"):
        run(collect(StageEngines(server).engine(choice(llm=URL)), ChatRequest([Message("user", [TextPart("Hi")])])))


def test_bad_stage_url_and_a_whole_server_with_stages_are_usage_errors():
    from omnicli.cli.engines import EngineChoice, stage_servers

    with pytest.raises(UsageError, match="^--tts-server: server URL must start with http"):
        stage_servers(tts="localhost:8000")
    both = EngineChoice(Connection("http://whole.test", None), stages=stage_servers(llm=URL))
    with pytest.raises(UsageError, match="use one or the other"):
        StageEngines(FakeServer()).engine(both)
    with pytest.raises(UsageError, match="use one or the other"):
        StageEngines(FakeServer()).transport(both, None)


def test_closing_the_engine_closes_every_stage_server():
    engine = StageEngines(llama_server()).engine(choice(llm=URL, asr=URL, tts=URL))
    run(engine.aclose())
    assert all(stage.engine._client.is_closed for stage in engine.remote)


def test_talk_in_process_with_a_remote_thinker_answers_a_spoken_turn():
    """`omni talk --llm-server`: the session in memory, on the hybrid engine."""
    server = llama_server("Noon.")
    factory = StageEngines(server, stages=None)
    transport = factory.transport(choice(llm=URL), None)
    engine = transport.session.engine
    assert isinstance(engine, HybridEngine) and isinstance(engine.stages.thinker, RemoteThinker)

    async def turn():
        async with Session(engine) as session:
            await session.send({"type": "input_audio_buffer.append", "audio": pcm_b64(clip(0.5))})
            await session.send({"type": "input_audio_buffer.commit"})
            await session.send({"type": "response.create"})
            done = await session.until("response.done")
        return session.seen, done

    seen, done = run_within_limit(turn())
    assert done["response"]["status"] == "completed"
    kinds = [e["type"] for e in seen]
    assert "response.output_audio.delta" in kinds
    transcript = [e for e in seen if e["type"] == "response.output_audio_transcript.done"]
    assert transcript[0]["transcript"] == "Noon."
    heard = [e for e in seen if e["type"] == "conversation.item.input_audio_transcription.completed"]
    assert heard[0]["transcript"] == "what time is it"
    assert isinstance(factory.stages.asr, HeardASR) and isinstance(factory.stages.talker, ToneTalker)
    assert len(server.sent("POST", "/v1/chat/completions")) == 1
    assert isinstance(factory.stages.thinker, PiecesThinker) and factory.stages.thinker.asked == []
