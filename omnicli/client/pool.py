"""Several servers behind one engine: replicas of one deployment (`--server A --server B`).

Each request goes to the server with the fewest requests outstanding (ties in turn), so a slow
replica gets less work. Every server is health-checked before the first request; one that is
not there, or that later fails a request with a connection error (or a 5xx, and then its
health check), is skipped for the rest of the run with one warning line, and the request goes
to another server it has not tried, unless its answer had already begun streaming: what was
said cannot be taken back. A 5xx from a server that stays healthy was the request's trouble:
it goes to the others, and the server stays in. All down at the start is one error; the last
server up is never skipped, so its requests fail with its own error, as with one server.
"""

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from omnicli.client.http import ServerDown
from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import (
    AudioChunk,
    AudioDelta,
    ChatDelta,
    ChatRequest,
    Engine,
    SpeechRequest,
    Transcript,
    Voice,
)
from omnicli.errors import OmniError, ServerError, capped


@dataclass
class Member:
    """One server of the pool, with what it has done this run."""

    engine: RemoteEngine
    outstanding: int = 0
    down: str | None = None
    """Why it is skipped (None while it is in)."""
    requests: int = 0
    failures: int = 0
    first_audio: list[float] = field(default_factory=list)
    rtf: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The server's base URL, which names it in warnings and figures."""
        return self.engine.base_url

    def figures(self) -> dict:
        """What this server did this run, as `take_figures` reports it."""
        return {
            "requests": self.requests,
            "failures": self.failures,
            "ttfa_p50": statistics.median(self.first_audio) if self.first_audio else None,
            "rtf_mean": statistics.fmean(self.rtf) if self.rtf else None,
            "skipped": self.down is not None,
        }


class _Timing:
    """When one request's audio came, to know its time to first audio and real-time factor."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first: float | None = None
        self.seconds = 0.0

    def saw(self, chunk: AudioChunk | None) -> None:
        """A chunk of the answer's audio arrived now."""
        if chunk is None or not len(chunk.samples):
            return
        if self.first is None:
            self.first = time.perf_counter() - self.start
        self.seconds += len(chunk.samples) / chunk.rate

    def record(self, member: Member) -> None:
        """Add this request's time to first audio and real-time factor to `member`'s figures."""
        if self.first is not None:
            member.first_audio.append(self.first)
        if self.seconds:
            member.rtf.append((time.perf_counter() - self.start) / self.seconds)


class ServerPool(Engine):
    """One engine over several replicas: each request to the least busy server that is up."""

    name = "remote"

    def __init__(self, engines: list[RemoteEngine], *, say: Callable[[str], None]) -> None:
        """`engines`: one per server, in the order given; `say` prints a warning line."""
        if not engines:
            raise ValueError("a server pool needs at least one server")
        self.members = [Member(engine) for engine in engines]
        self._say = say
        self._cursor = 0
        self._checked = False
        self._checking = asyncio.Lock()

    @property
    def base_url(self) -> str:
        """The first server up (before the health check, or with none up: the first given),
        the one asked what the replicas offer and named in messages about "the server"."""
        return next((m.url for m in self.members if m.down is None), self.members[0].url)

    @property
    def urls(self) -> list[str]:
        """Every server's base URL, in the order given, skipped ones included."""
        return [member.url for member in self.members]

    @property
    def servers_up(self) -> int:
        """How many servers are in (not skipped)."""
        return sum(member.down is None for member in self.members)

    # ---- the Engine contract -----------------------------------------------------------

    async def speech(self, req: SpeechRequest) -> AsyncIterator[AudioChunk]:
        """Speech from the least busy server; another takes the request if one is down before it streams."""
        async for chunk in self._streamed(lambda engine: engine.speech(req), lambda chunk: chunk):
            yield chunk

    async def chat(self, req: ChatRequest) -> AsyncIterator[ChatDelta]:
        """An answer from the least busy server; another takes the request if one is down before it streams."""
        audio = lambda delta: delta.chunk if isinstance(delta, AudioDelta) else None  # noqa: E731
        async for delta in self._streamed(lambda engine: engine.chat(req), audio):
            yield delta

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """A transcript from the least busy server; another takes the request if one is down."""
        result: list[Transcript] = []

        async def heard(engine: RemoteEngine) -> AsyncGenerator[None, None]:
            result.append(await engine.transcribe(samples, rate, language=language, quick=quick, words=words))
            yield None

        async for _ in self._streamed(heard, lambda _: None):
            pass
        return result[-1]

    async def voices(self) -> list[Voice]:
        """The voices of the first server up (the replicas share them)."""
        await self.check()
        return await self._first_up().engine.voices()

    async def check(self) -> None:
        """Health-check every server (once, together): warn about each that is down, or fail
        in one line when all are."""
        async with self._checking:
            if self._checked:
                return
            results = await asyncio.gather(*(m.engine.health() for m in self.members), return_exceptions=True)
            self._checked = True
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, ServerDown):
                    raise result
            down = [(m, r) for m, r in zip(self.members, results, strict=True) if isinstance(r, ServerDown)]
            if len(down) == len(self.members):
                for member, result in down:
                    member.down = capped(str(result))
                raise self._all_down()
            for member, result in down:
                self._skip(member, result)

    def loaded(self) -> dict[str, str]:
        """Every server's URL, for --verbose."""
        return {"servers": ", ".join(self.urls)}

    async def aclose(self) -> None:
        """Close every server's connections."""
        await asyncio.gather(*(m.engine.aclose() for m in self.members))

    # ---- figures -------------------------------------------------------------------------

    def take_figures(self) -> dict[str, dict]:
        """Per server: requests sent, failures, time to first audio p50 (s), mean real-time
        factor, and whether it is skipped; counted since the last call."""
        figures = {member.url: member.figures() for member in self.members}
        for member in self.members:
            member.requests = member.failures = 0
            member.first_audio, member.rtf = [], []
        return figures

    # ---- where requests go ---------------------------------------------------------------

    async def _streamed(self, open_stream: Callable[[RemoteEngine], AsyncIterator], audio_of: Callable) -> AsyncIterator:
        """Run a request on one server after another until one answers: least outstanding
        first, each at most once, never again once its answer has begun."""
        await self.check()
        tried: list[Member] = []
        failure: OmniError | None = None
        while (member := self._pick(tried)) is not None:
            tried.append(member)
            member.outstanding += 1
            member.requests += 1
            timing = _Timing()
            started = False
            try:
                # Engines' answers are async generators: closed here, so a request given up is ended now.
                async with contextlib.aclosing(cast(AsyncGenerator, open_stream(member.engine))) as stream:
                    async for item in stream:
                        started = True
                        timing.saw(audio_of(item))
                        yield item
            except ServerDown as exc:
                member.failures += 1
                await self._check_after(member, exc)
                if started:
                    raise
                failure = exc
            except OmniError:
                member.failures += 1
                raise
            else:
                timing.record(member)
                return
            finally:
                member.outstanding -= 1
        if failure is None:  # every server was down at the start
            raise self._all_down()
        raise failure  # every server up was tried, and each failed

    def _pick(self, tried: list[Member]) -> Member | None:
        """The server up, not yet tried, with the fewest outstanding requests; ties in turn
        (a request's first try takes the turn, a retry does not)."""
        count = len(self.members)
        ready = [(i, m) for i, m in enumerate(self.members) if m.down is None and m not in tried]
        if not ready:
            return None
        fewest = min(m.outstanding for _, m in ready)
        index, member = min(((i, m) for i, m in ready if m.outstanding == fewest),
                            key=lambda pair: (pair[0] - self._cursor) % count)
        if not tried:
            self._cursor = (index + 1) % count
        return member

    async def _check_after(self, member: Member, failure: ServerDown) -> None:
        """After a failed request: a server that cannot be reached is down; one that answered
        5xx is down only if its health check fails too."""
        if member.down is not None:
            return
        if failure.status is None:
            self._skip(member, failure)
            return
        try:
            await member.engine.health()
        except ServerError as exc:
            self._skip(member, exc)

    def _skip(self, member: Member, why: OmniError) -> None:
        """Skip `member` from now on, with a warning, while another server is up. The last one
        up is never skipped: its requests fail with its own error, as with one server."""
        if member.down is None and any(m.down is None for m in self.members if m is not member):
            member.down = capped(str(why))
            self._say(f"omni: warning: skipping {member.url} for the rest of this run: {member.down}")

    def _first_up(self) -> Member:
        for member in self.members:
            if member.down is None:
                return member
        raise self._all_down()

    def _all_down(self) -> ServerError:
        if len(self.members) == 1:
            return ServerError(self.members[0].down or f"the server at {self.base_url} is down")
        reasons = "; ".join(f"{m.url} ({m.down})" for m in self.members)
        return ServerError(capped(f"none of the {len(self.members)} servers answers: {reasons}"))
