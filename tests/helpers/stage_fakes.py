"""Stand-ins for the far side of a staged engine: scripted in-process stages (ears, thinker,
voice) and an OpenAI-compatible server in memory (`httpx.MockTransport`) shaped like the real
third-party ones (llama-cpp-python's chat, faster-whisper-server's transcriptions).

`StageEngines` is the real factory with these in place of the local models and the network."""

import json

import httpx
import numpy as np

from omnicli.cli.engines import Engines
from omnicli.engine.base import Transcript, Voice
from omnicli.engine.stages import Stages
from tests.helpers.scripted import tone

LLAMA_OPENAPI = {"paths": {p: {} for p in ("/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/embeddings")}}
OMNI_OPENAPI = {"paths": {p: {} for p in ("/v1/models", "/v1/chat/completions", "/v1/audio/speech", "/v1/audio/transcriptions")}}


class HeardASR:
    """Hears every clip as `text`."""

    def __init__(self, text: str = "what time is it") -> None:
        self.text = text
        self.heard: list[tuple[float, int, bool]] = []
        self.preloaded = 0

    async def transcribe(self, samples, rate, *, language=None, quick=False, words=False) -> Transcript:
        self.heard.append((len(samples) / rate, rate, quick))
        seconds = len(samples) / rate
        return Transcript(self.text, language or "en", seconds, [{"start": 0.0, "end": seconds, "text": self.text}])

    async def preload(self) -> None:
        self.preloaded += 1

    def source(self) -> str | None:
        return "fake-asr"


class PiecesThinker:
    """Writes `pieces`, whatever it is asked."""

    context = 4096

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces or ("Local", " answer.")
        self.asked: list[list[dict]] = []
        self.preloaded = 0

    async def stream(self, messages, *, max_tokens, temperature):
        self.asked.append(messages)
        for piece in self.pieces:
            yield piece

    async def count_tokens(self, messages) -> int:
        return 3

    async def preload(self) -> None:
        self.preloaded += 1

    def source(self) -> str | None:
        return "fake-thinker"


class ToneTalker:
    """Says every piece as 0.25 s of tone."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str | None]] = []
        self.preloaded = 0

    def check_voice(self, voice) -> None:
        return None

    async def say(self, text, *, voice, speed):
        self.said.append((text, voice))
        return tone(0.25, text)

    async def voices(self) -> list[Voice]:
        return [Voice("local")]

    async def preload(self) -> None:
        self.preloaded += 1

    def source(self) -> str | None:
        return "fake-talker"


def sse(*pieces: str, model: str = "/models/smollm2.gguf") -> bytes:
    """A streamed chat answer as llama-cpp-python writes it (role first, then content, then stop)."""
    def chunk(delta: dict, reason=None) -> str:
        body = {"id": "chatcmpl-1", "model": model, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}
        return f"data: {json.dumps(body)}\n\n"

    events = [chunk({"role": "assistant"})] + [chunk({"content": p}) for p in pieces] + [chunk({}, "stop")]
    return ("".join(events) + "data: [DONE]\n\n").encode()


class FakeServer:
    """An OpenAI-compatible server in memory: `(method, path)` -> a response or a function of the
    request; anything else is a 404 as FastAPI writes it. Every request is recorded."""

    def __init__(self, routes: dict | None = None) -> None:
        self.routes = routes or {}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.routes.get((request.method, request.url.path))
        if reply is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        return reply(request) if callable(reply) else reply

    def sent(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if (r.method, r.url.path) == (method, path)]

    def bodies(self, path: str) -> list[dict]:
        return [json.loads(r.content) for r in self.sent("POST", path)]


def llama_server(*pieces: str) -> FakeServer:
    """llama-cpp-python's server: chat (streamed) and models, no audio route."""
    return FakeServer({
        ("GET", "/v1/models"): httpx.Response(200, json={"object": "list", "data": [{"id": "/models/smollm2.gguf"}]}),
        ("GET", "/openapi.json"): httpx.Response(200, json=LLAMA_OPENAPI),
        ("POST", "/v1/chat/completions"): lambda request: httpx.Response(
            200, content=sse(*(pieces or ("Server", " answer."))), headers={"content-type": "text/event-stream"}),
    })


def whisper_server(*texts: str) -> FakeServer:
    """faster-whisper-server 0.0.3: /health and transcriptions (json and verbose_json only, no
    words, `model` ignored), no /v1/models."""
    heard = list(texts or ("what time is it",))

    def transcribe(request: httpx.Request) -> httpx.Response:
        form = request.content.decode("latin-1")
        text = " " + (heard.pop(0) if len(heard) > 1 else heard[0])
        if 'name="response_format"\r\n\r\nverbose_json' in form:
            return httpx.Response(200, json={
                "task": "transcribe", "language": "en", "duration": 2.0, "text": text,
                "segments": [{"id": 0, "start": 0.0, "end": 1.0, "text": text, "tokens": [1]},
                             {"id": 1, "start": 1.2, "end": 2.0, "text": " again", "tokens": [2]}]})
        if 'name="response_format"\r\n\r\njson' in form:
            return httpx.Response(200, json={"text": text})
        return httpx.Response(400, json={"detail": {"error": {"message": "Unsupported response_format", "type": "invalid_request_error"}}})

    return FakeServer({
        ("GET", "/health"): httpx.Response(200, json={"status": "ok"}),
        ("POST", "/v1/audio/transcriptions"): transcribe,
    })


class StageEngines(Engines):
    """The real factory, with scripted local stages and every server in memory."""

    def __init__(self, server: FakeServer, stages: Stages | None = None) -> None:
        self.server = server
        self.http = httpx.MockTransport(server)
        self.stages = stages or Stages(asr=HeardASR(), thinker=PiecesThinker(), talker=ToneTalker())

    def local_stages(self, choice) -> Stages:
        return self.stages


def clip(seconds: float = 0.5) -> np.ndarray:
    return tone(seconds).samples
