"""`ServerPool` over several in-memory servers: omni's real app over a scripted engine per host
(httpx's ASGITransport), a host that refuses connections, and hand-written answers where a
server must fail in a way the real app does not (5xx, a stream that breaks off). Exact: which
server each request went to, the warnings, the retries, the all-down error, the figures."""

import asyncio

import httpx
import numpy as np
import pytest

from omnicli.client.pool import ServerPool
from omnicli.client.remote import RemoteEngine
from omnicli.engine.base import ChatRequest, Message, SpeechRequest, TextDelta, TextPart
from omnicli.errors import ServerError
from omnicli.server.app import create_app
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import Hold, ScriptedEngine, answer, tone


class Hosts(httpx.AsyncBaseTransport):
    """Several servers behind one transport, chosen by the request's host: the real omni app
    over a scripted engine, or a handler (a function of the request, as httpx.MockTransport's).
    A host in `down` refuses every connection, as a dead process does."""

    def __init__(self, **servers) -> None:
        self.servers = {}
        for host, server in servers.items():
            if isinstance(server, ScriptedEngine):
                self.servers[host] = httpx.ASGITransport(app=create_app(server, preload=False, turn_models=TURN_MODELS))
            else:
                self.servers[host] = httpx.MockTransport(server)
        self.down: set[str] = set()
        self.log: list[tuple[str, str]] = []
        """(host, path) of every request that reached a server, in order."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host in self.down:
            raise httpx.ConnectError("All connection attempts failed", request=request)
        self.log.append((host, request.url.path))
        return await self.servers[host].handle_async_request(request)

    def served(self, path: str) -> list[str]:
        """The host of each request to `path`, in order."""
        return [host for host, seen in self.log if seen == path]


def url(host: str) -> str:
    return f"http://{host}"


def pool_of(hosts: Hosts, *names: str, warnings: list | None = None) -> ServerPool:
    say = warnings.append if warnings is not None else (lambda line: None)
    return ServerPool([RemoteEngine(url(name), transport=hosts, stream="audio") for name in names], say=say)


def speak(pool: ServerPool, *texts: str) -> list[int]:
    """Each text spoken in turn; the samples each answer had."""

    async def main():
        try:
            return [sum(len(c.samples) for c in [c async for c in pool.speech(SpeechRequest(text))]) for text in texts]
        finally:
            await pool.aclose()

    return asyncio.run(main())


def skipped(host: str, why: str) -> str:
    return f"omni: warning: skipping {url(host)} for the rest of this run: {why}"


REFUSED = "cannot reach the server at {}: All connection attempts failed"


def test_requests_take_turns_when_none_is_outstanding():
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine(), c=ScriptedEngine())
    speak(pool_of(hosts, "a", "b", "c"), *"one two three four five".split())
    assert hosts.served("/v1/audio/speech") == ["a", "b", "c", "a", "b"]
    assert hosts.served("/health") == ["a", "b", "c"]  # checked once, before the first request


def test_the_server_with_fewest_outstanding_requests_gets_the_next():
    holds = {text: Hold() for text in ("one", "two", "three")}
    script = lambda req: [holds[req.text], tone(0.1)] if req.text in holds else [tone(0.1)]  # noqa: E731
    hosts = Hosts(a=ScriptedEngine(speech=script), b=ScriptedEngine(speech=script), c=ScriptedEngine(speech=script))
    pool = pool_of(hosts, "a", "b", "c")

    async def main():
        async def say(text):
            return [c async for c in pool.speech(SpeechRequest(text))]

        one, two, three = (asyncio.create_task(say(t)) for t in ("one", "two", "three"))
        for hold in holds.values():
            await hold.reached.wait()  # a, b and c each hold one request
        holds["two"].open()
        await two  # b is free: the only server with none outstanding
        await say("four")
        holds["one"].open()
        holds["three"].open()
        await asyncio.gather(one, three)
        await pool.aclose()

    asyncio.run(main())
    assert hosts.served("/v1/audio/speech") == ["a", "b", "c", "b"]


def test_a_server_not_there_at_start_is_skipped_with_one_warning():
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine())
    hosts.down.add("a")
    warnings: list[str] = []
    assert speak(pool_of(hosts, "a", "b", warnings=warnings), "one", "two", "three") == [12000] * 3
    assert hosts.served("/v1/audio/speech") == ["b", "b", "b"]
    assert warnings == [skipped("a", REFUSED.format(url("a")))]


def test_a_server_that_dies_mid_run_is_skipped_and_the_request_goes_to_another():
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine())
    warnings: list[str] = []
    pool = pool_of(hosts, "a", "b", warnings=warnings)

    async def main():
        for text in ("one", "two"):
            [c async for c in pool.speech(SpeechRequest(text))]
        hosts.down.add("a")
        for text in ("three", "four"):
            assert sum(len(c.samples) for c in [c async for c in pool.speech(SpeechRequest(text))]) == 12000
        figures = pool.take_figures()
        await pool.aclose()
        return figures

    figures = asyncio.run(main())
    assert hosts.served("/v1/audio/speech") == ["a", "b", "b", "b"]  # "three" failed on a, went to b
    assert warnings == [skipped("a", REFUSED.format(url("a")))]
    assert {u: (f["requests"], f["failures"], f["skipped"]) for u, f in figures.items()} == {
        url("a"): (2, 1, True), url("b"): (3, 0, False)}
    assert all(f["ttfa_p50"] > 0 and f["rtf_mean"] > 0 for f in figures.values())


def wav_reply(request: httpx.Request) -> httpx.Response:
    samples = (0.2 * np.sin(np.arange(2400) / 10)).astype(np.float32)
    from omnicli.audio.formats import AudioFormat, encode

    return httpx.Response(200, content=encode(samples, 24000, AudioFormat.WAV), headers={"content-type": "audio/wav"})


def flaky(health: int):
    """A server whose speech route answers 500, and whose /health answers `health`."""
    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(health, json={"status": "ok" if health == 200 else "overloaded"})
        return httpx.Response(500, json={"error": {"message": "the talker crashed"}})
    return reply


def test_a_5xx_from_a_healthy_server_goes_elsewhere_and_the_server_stays_in():
    hosts = Hosts(a=flaky(200), b=wav_reply)
    warnings: list[str] = []
    assert speak(pool_of(hosts, "a", "b", warnings=warnings), "one", "two", "three") == [2400] * 3
    # one: a 500 -> a healthy -> b; two: b's turn; three: a again (500) -> b
    assert hosts.served("/v1/audio/speech") == ["a", "b", "b", "a", "b"]
    assert hosts.served("/health") == ["a", "b", "a", "a"]
    assert warnings == []


def test_a_5xx_from_a_server_whose_health_check_fails_too_skips_it():
    hosts = Hosts(a=flaky(200), b=wav_reply)
    warnings: list[str] = []
    pool = pool_of(hosts, "a", "b", warnings=warnings)

    async def main():
        [c async for c in pool.speech(SpeechRequest("one"))]  # a: 500, but healthy
        hosts.servers["a"] = httpx.MockTransport(flaky(503))
        [c async for c in pool.speech(SpeechRequest("two"))]  # b
        [c async for c in pool.speech(SpeechRequest("three"))]  # a: 500, unhealthy -> skipped -> b
        [c async for c in pool.speech(SpeechRequest("four"))]
        await pool.aclose()

    asyncio.run(main())
    assert hosts.served("/v1/audio/speech") == ["a", "b", "b", "a", "b", "b"]
    assert warnings == [skipped("a", 'server answered 503: {"status":"overloaded"}')]


def test_the_same_5xx_everywhere_is_the_requests_error_not_every_servers():
    hosts = Hosts(a=flaky(200), b=flaky(200))
    pool = pool_of(hosts, "a", "b")
    with pytest.raises(ServerError, match="^server answered 500: the talker crashed$"):
        speak(pool, "one")
    assert hosts.served("/v1/audio/speech") == ["a", "b"]  # each server tried once
    assert not any(member.down for member in pool.members)


class BreaksOff(httpx.AsyncByteStream):
    """The first piece of a streamed WAV, then the connection drops (the process was killed)."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self):
        yield self.first
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_a_stream_that_breaks_after_its_first_audio_is_not_sent_again():
    whole = wav_reply(httpx.Request("POST", "http://x")).content
    hosts = Hosts(
        a=lambda request: httpx.Response(200, stream=BreaksOff(whole[:2000]), headers={"content-type": "audio/wav"})
        if request.url.path == "/v1/audio/speech" else httpx.Response(200, json={}),
        b=wav_reply,
    )
    warnings: list[str] = []
    pool = pool_of(hosts, "a", "b", warnings=warnings)
    with pytest.raises(ServerError, match=r"^the connection to http://a broke off: peer closed connection"):
        speak(pool, "one")
    assert hosts.served("/v1/audio/speech") == ["a"]
    assert warnings == [skipped("a", f"the connection to {url('a')} broke off: peer closed connection without "
                                     "sending complete message body")]


def test_every_server_down_is_one_error():
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine())
    hosts.down |= {"a", "b"}
    warnings: list[str] = []
    with pytest.raises(ServerError) as exc:
        speak(pool_of(hosts, "a", "b", warnings=warnings), "one")
    assert str(exc.value) == (f"none of the 2 servers answers: {url('a')} ({REFUSED.format(url('a'))}); "
                              f"{url('b')} ({REFUSED.format(url('b'))})")
    assert warnings == []  # the error says it all, once


def test_a_pool_of_one_fails_as_its_server_does():
    hosts = Hosts(a=ScriptedEngine())
    hosts.down.add("a")
    warnings: list[str] = []
    with pytest.raises(ServerError, match=f"^{REFUSED.format(url('a'))}$"):
        speak(pool_of(hosts, "a", warnings=warnings), "one")
    assert warnings == []


def test_a_server_without_a_health_route_is_checked_by_its_model_list():
    def openai_like(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tts-1"}]})
        if request.url.path == "/v1/audio/speech":
            return wav_reply(request)
        return httpx.Response(404, json={"error": {"message": "no such route"}})

    hosts = Hosts(a=openai_like, b=ScriptedEngine())
    assert speak(pool_of(hosts, "a", "b"), "one") == [2400]
    assert [entry for entry in hosts.log if entry[0] == "a"] == [("a", "/health"), ("a", "/v1/models"),
                                                                 ("a", "/v1/audio/speech")]


def test_chat_and_transcription_spread_too():
    a = ScriptedEngine(chat=answer("From a."), transcripts=["heard by a"])
    b = ScriptedEngine(chat=answer("From b."), transcripts=["heard by b"])
    hosts = Hosts(a=a, b=b)
    pool = pool_of(hosts, "a", "b")
    question = ChatRequest([Message("user", [TextPart("Hi")])])

    async def main():
        texts = []
        for _ in range(2):
            texts.append("".join(d.text for d in [d async for d in pool.chat(question)] if isinstance(d, TextDelta)))
        heard = [(await pool.transcribe(tone(0.5).samples, 24000)).text for _ in range(2)]
        await pool.aclose()
        return texts, heard

    texts, heard = asyncio.run(main())
    assert texts == ["From a.", "From b."]
    assert heard == ["heard by a", "heard by b"]


def test_the_last_server_up_is_never_skipped_its_requests_fail_with_its_own_error():
    hosts = Hosts(a=ScriptedEngine(), b=ScriptedEngine())
    hosts.down.add("a")
    warnings: list[str] = []
    pool = pool_of(hosts, "a", "b", warnings=warnings)

    async def main():
        [c async for c in pool.speech(SpeechRequest("one"))]
        hosts.down.add("b")
        failures = []
        for text in ("two", "three"):
            try:
                [c async for c in pool.speech(SpeechRequest(text))]
            except ServerError as exc:
                failures.append(str(exc))
        hosts.down.discard("b")  # back: it was never skipped
        [c async for c in pool.speech(SpeechRequest("four"))]
        await pool.aclose()
        return failures

    assert asyncio.run(main()) == [REFUSED.format(url("b"))] * 2
    assert hosts.served("/v1/audio/speech") == ["b", "b"]
    assert warnings == [skipped("a", REFUSED.format(url("a")))]
