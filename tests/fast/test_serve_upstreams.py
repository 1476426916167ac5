"""`omni serve` with stages on other servers (--asr/--llm/--tts-server): a stage server that takes
the request and never answers is a 504 once the server's timeout passes, one that refuses or
breaks off is a 502; either message names the stage and its server."""

import socket

import httpx
import pytest

from omnicli.audio.formats import AudioFormat, encode
from omnicli.cli.engines import EngineChoice, Engines, stage_servers
from omnicli.config import Connection
from omnicli.engine.stages import Stages
from tests.helpers.server_harness import openai_error, run
from tests.helpers.stage_fakes import HeardASR, PiecesThinker, ToneTalker, clip


class StagesHere(Engines):
    """The real factory; the stages left in process are scripted."""

    def local_stages(self, choice) -> Stages:
        return Stages(asr=HeardASR(), thinker=PiecesThinker(), talker=ToneTalker())


@pytest.fixture
def refusing_server():
    """A bound port nobody listens on: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def ask(stage: str, client: httpx.AsyncClient):
    """The request that needs `stage`'s server."""
    if stage == "asr":
        wav = encode(clip(0.5), 24000, AudioFormat.WAV)
        return client.post("/v1/audio/transcriptions", files={"file": ("a.wav", wav)}, data={"model": "whisper-1"})
    if stage == "llm":
        return client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}]})
    return client.post("/v1/audio/speech", json={"input": "Hello."})


def served(stage: str, url: str, timeout: float = 0.3) -> httpx.Response:
    engine = StagesHere().engine(EngineChoice(Connection(None, None, timeout=timeout), stages=stage_servers(**{stage: url})))

    async def test(client, app):
        return await ask(stage, client)

    return run(test, engine)


@pytest.mark.parametrize("stage", ["asr", "llm", "tts"])
def test_a_stage_server_that_never_answers_is_a_504_naming_it(stage, silent_server):
    response = served(stage, silent_server)
    message = openai_error(response, 504, "server_error")
    assert message == f"--{stage}-server: the server at {silent_server} did not answer in time"
    assert response.json()["error"]["code"] == "upstream_timeout"


@pytest.mark.parametrize("stage", ["asr", "llm", "tts"])
def test_a_stage_server_that_refuses_is_a_502_naming_it(stage, refusing_server):
    response = served(stage, refusing_server)
    message = openai_error(response, 502, "server_error")
    assert message.startswith(f"--{stage}-server: cannot reach the server at {refusing_server}: ")
    assert response.json()["error"]["code"] == "upstream_error"
