"""Stages that live on a server: any OpenAI-compatible endpoint hears, thinks or speaks for the
staged engine, so `omni talk --llm-server URL` is local ears and voice around anybody's LLM.

Each stage is a thin adapter over a `RemoteEngine` pointed at that server, so requests, error
translation and every answer shape the remote engine reads apply here too; what fails says
which stage (its flag) it was. `ServerAsThinker` puts local ears and voice around a whole
`--server` that has neither (a text-only LLM server), after asking it once what it has.
"""

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

import httpx
import numpy as np

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.client.http import translated_errors
from omnicli.client.pool import ServerPool
from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import (
    AudioPart,
    ChatDelta,
    ChatDone,
    ChatRequest,
    Engine,
    Message,
    SpeechRequest,
    TextDelta,
    TextPart,
    Transcript,
    Voice,
)
from omnicli.engine.staged import StagedEngine
from omnicli.engine.stages import Stages
from omnicli.errors import ContextWindowError, OmniError, UnsupportedError

Server = RemoteEngine | ServerPool
"""One server, or replicas that share its requests."""

REMOTE_CONTEXT = 32768
"""A server's context window is not advertised by the OpenAI API; its own refusal is the limit."""


class RemoteStage:
    """What every stage on a server shares: a check before use, errors that name the stage."""

    def __init__(self, engine: Server, flag: str) -> None:
        self.engine = engine
        self.flag = flag

    @contextlib.asynccontextmanager
    async def named(self) -> AsyncIterator[None]:
        """Any failure inside says which stage's server it came from."""
        try:
            yield
        except OmniError as exc:
            if str(exc).startswith(self.flag):
                raise
            raise type(exc)(f"{self.flag}: {exc}", hint=exc.hint) from exc

    async def check(self) -> None:
        """Reach the server (once per run: the remote engine keeps what it learnt); a wrong
        key or a dead server fails here, fast."""
        async with self.named():
            await self.engine.check()

    async def preload(self) -> None:
        """Reach the server before the first turn: there is no model to load here."""
        await self.check()

    def source(self) -> str | None:
        """The server's URL, reported where a local stage names its model."""
        return self.engine.base_url

    async def aclose(self) -> None:
        """Close the connections to the stage's server."""
        await self.engine.aclose()


class RemoteASR(RemoteStage):
    """`/v1/audio/transcriptions` (faster-whisper-server, vLLM, OpenAI, omni serve)."""

    def __init__(self, engine: RemoteEngine, flag: str = "--asr-server") -> None:
        super().__init__(engine, flag)

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """The server's transcript of the clip; failures name the stage's flag."""
        async with self.named():
            return await self.engine.transcribe(samples, rate, language=language, quick=quick, words=words)


class RemoteThinker(RemoteStage):
    """`/v1/chat/completions`, text only: streamed tokens feed the local talker as llama.cpp's do."""

    context = REMOTE_CONTEXT

    def __init__(self, engine: Server, flag: str = "--llm-server", model: str | None = None) -> None:
        super().__init__(engine, flag)
        self.model = model
        self._prompt_tokens: dict[int, int] = {}

    async def stream(self, messages: list[dict], *, max_tokens: int, temperature: float) -> AsyncGenerator[str, None]:
        """The server's answer as text pieces; its usage report is kept for `count_tokens`."""
        request = ChatRequest(
            [Message(m["role"], [TextPart(m["content"])]) for m in messages],
            modalities=("text",), model=self.model, max_tokens=max_tokens, temperature=temperature,
        )
        async with self.named():
            try:
                async for delta in self.engine.chat(request):
                    match delta:
                        case TextDelta(text=piece):
                            yield piece
                        case ChatDone(usage=usage) if usage.get("prompt_tokens") is not None:
                            self._prompt_tokens[_key(messages)] = int(usage["prompt_tokens"])
            except OmniError as exc:
                if "context length" in str(exc) or "context_length" in str(exc):
                    raise ContextWindowError(f"the thinker refused the prompt: {exc}") from exc
                raise

    async def count_tokens(self, messages: list[dict]) -> int:
        """The server's own count from its usage report; where it sent none, about four
        characters a token."""
        counted = self._prompt_tokens.pop(_key(messages), None)
        if counted is not None:
            return counted
        return sum(len(str(m.get("content", ""))) for m in messages) // 4


class RemoteTalker(RemoteStage):
    """`/v1/audio/speech`, one piece at a time (a sentence or a clause)."""

    def __init__(self, engine: RemoteEngine, flag: str = "--tts-server", *, model: str | None = None,
                 default_voice: str | None = None) -> None:
        super().__init__(engine, flag)
        self.model = model
        self.default_voice = default_voice

    def check_voice(self, voice: str | None) -> None:
        """The server knows its voices; it refuses an unknown one itself."""

    async def say(self, text: str, *, voice: str | None, speed: float) -> AudioChunk:
        """One piece spoken by the server, gathered whole at 24 kHz."""
        request = SpeechRequest(text=text, voice=voice or self.default_voice, speed=speed, model=self.model)
        async with self.named():
            parts = [chunk.samples async for chunk in self.engine.speech(request)]
        samples = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        return AudioChunk(samples, SPEECH_RATE, text=text)

    async def voices(self) -> list[Voice]:
        """The voices the server offers."""
        async with self.named():
            return await self.engine.voices()


class HybridEngine(StagedEngine):
    """A staged engine with some stages on servers: each server is checked before the first
    answer (once), and closed with the engine."""

    name = "staged"

    def __init__(self, stages: Stages, remote: list[RemoteStage]) -> None:
        super().__init__(stages)
        self.remote = remote

    async def check(self) -> None:
        """Reach every stage's server; the first that fails stops the engine."""
        for stage in self.remote:
            await stage.check()

    async def preload(self) -> None:
        """Check the servers, then load the local models."""
        await self.check()  # a missing server fails before the local models load, not after
        await super().preload()

    async def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        """The staged answer, once the stages' servers are known to be there."""
        await self.check()  # before the local ASR hears anything for a thinker that is not there
        async for delta in super().chat(req):
            yield delta



class ServerAsThinker(Engine):
    """A whole `--server`, with ears and voice in this process where it has neither.

    Chat that needs audio (an attached clip, a spoken answer) asks the server once what routes
    it has; a server with no audio route (llama.cpp's, a plain LLM server) then only thinks,
    while the local ASR hears the clip and the local talker speaks the answer."""

    def __init__(self, server: Server, local: Callable[[], Stages], *, probe: Callable[[], Awaitable[bool | None]],
                 allowed: bool, say: Callable[[str], None]) -> None:
        self.server = server
        self.name = server.name
        self._local = local
        self._probe = probe
        self._allowed = allowed
        self._say = say
        self._audio: bool | None = None
        self._probed = False
        self._stages: Stages | None = None

    def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """Speech from the server itself."""
        return self.server.speech(req)

    async def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        """The server's answer, or, where audio is needed and it has none, local ears and voice around it."""
        heard = any(isinstance(p, AudioPart) for m in req.messages for p in m.parts)
        if (req.wants_audio or heard) and not await self._has_audio():
            answer = StagedEngine(self._around(req.model)).chat(req)
        else:
            answer = self.server.chat(req)
        async for delta in answer:
            yield delta

    async def _has_audio(self) -> bool:
        """Asked once per run; a server that does not say (OpenAI) is taken at its word."""
        if not self._probed:
            self._audio = await self._probe()
            self._probed = True
        return self._audio is not False

    def _around(self, model: str | None) -> Stages:
        url = self.server.base_url
        if not self._allowed:
            raise UnsupportedError(f"the server at {url} has no audio routes, so it can neither hear nor speak",
                                   hint="without --no-local-stages omni hears and speaks here around it")
        if self._stages is None:
            self._stages = self._local()
            self._say(f"omni: the server at {url} neither hears nor speaks; hearing and speaking here, with it as the thinker")
        return dataclasses.replace(self._stages, thinker=RemoteThinker(self.server, "--server", model))

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """The server's own transcript."""
        return await self.server.transcribe(samples, rate, language=language, quick=quick, words=words)

    async def voices(self) -> list[Voice]:
        """The server's own voices."""
        return await self.server.voices()

    async def check(self) -> None:
        """Reach the server, failing fast with one line."""
        await self.server.check()

    def loaded(self) -> dict[str, str]:
        """The server's URL, for --verbose."""
        return {"server": self.server.base_url}

    async def aclose(self) -> None:
        """Close the server's connections."""
        await self.server.aclose()


async def has_audio_routes(url: str, api_key: str | None, *, timeout: float,
                           transport: httpx.AsyncBaseTransport | None = None) -> bool | None:
    """Whether the server at `url` has any audio route (`/v1/audio/...`, `/v1/realtime`), read
    from the OpenAPI description FastAPI servers publish; None when it publishes none."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout, transport=transport) as client:
        async with translated_errors(url):
            response = await client.get("/openapi.json")
    try:
        paths = response.json()["paths"] if response.status_code == 200 else None
    except (ValueError, KeyError, TypeError):
        paths = None
    if not isinstance(paths, dict):
        return None
    return any(path.startswith(("/v1/audio/", "/v1/realtime")) for path in paths)


def _key(messages: list[dict]) -> int:
    return hash(tuple((m.get("role"), str(m.get("content"))) for m in messages))
