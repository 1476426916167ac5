"""The HTTP error policy, at the one boundary where it is decided: every failure is OpenAI's
JSON shape, with the status its type earns, and the app answers the next request as before."""

import logging

import pytest

from omnicli.engine.base import Voice
from omnicli.errors import AudioDeviceError, OmniError, ServerError, ServerTimeout, UnsupportedError, UsageError
from omnicli.server.errors import INTERNAL
from tests.helpers.scripted import ScriptedEngine
from tests.helpers.server_harness import openai_error, run


class FailingVoices(ScriptedEngine):
    def __init__(self, failure: BaseException) -> None:
        super().__init__()
        self.failure = failure

    async def voices(self) -> list[Voice]:
        raise self.failure


@pytest.mark.parametrize(
    "failure, status, kind, message",
    [
        (UsageError("you asked for the impossible"), 400, "invalid_request_error", "you asked for the impossible"),
        (UnsupportedError("no such feature here"), 400, "invalid_request_error", "no such feature here"),
        (OmniError("the model would not load"), 500, "server_error", "the model would not load"),
        (ServerError("the upstream server is down"), 502, "server_error", "the upstream server is down"),
        (ServerTimeout("the upstream server did not answer in time"), 504, "server_error",
         "the upstream server did not answer in time"),
        (AudioDeviceError("no device"), 500, "server_error", "no device"),
        (ZeroDivisionError("division by zero"), 500, "server_error", INTERNAL),
    ],
)
def test_errors_are_mapped_by_type_and_the_next_request_still_works(failure, status, kind, message):
    async def test(client, app):
        failed = await client.get("/v1/audio/voices")
        assert openai_error(failed, status, kind) == message
        assert (await client.get("/v1/models")).status_code == 200

    run(test, FailingVoices(failure))


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server_log():
    """What the server logs, whatever the CLI's logging setup (it stops propagation at 'omni')."""
    logger, handler = logging.getLogger("omni.server"), Records()
    logger.addHandler(handler)
    yield handler.records
    logger.removeHandler(handler)


def test_an_unexpected_error_is_logged_with_its_traceback(server_log):
    run(lambda client, app: client.get("/v1/audio/voices"), FailingVoices(ZeroDivisionError("oops")))
    [record] = server_log
    assert record.levelno == logging.ERROR and record.exc_info[0] is ZeroDivisionError


def test_a_callers_mistake_is_not_logged_as_a_crash(server_log):
    run(lambda client, app: client.get("/v1/audio/voices"), FailingVoices(UsageError("nope")))
    assert server_log == []


def test_unknown_route_and_method_are_openai_errors():
    async def test(client, app):
        assert openai_error(await client.post("/v1/nothing"), 404) == "Invalid URL (POST /v1/nothing)"
        assert openai_error(await client.delete("/v1/models"), 405) == "method DELETE is not allowed on /v1/models"

    run(test)


def test_body_that_is_not_json_is_a_400():
    async def test(client, app):
        response = await client.post("/v1/audio/speech", content=b'{"input": ', headers={"content-type": "application/json"})
        assert openai_error(response, 400) == "the body is not valid JSON"

    run(test)


def test_a_validation_error_names_its_field():
    async def test(client, app):
        response = await client.post("/v1/audio/speech", json={"input": "hi", "speed": 10})
        assert openai_error(response, 400) == "speed: Input should be less than or equal to 4"
        assert response.json()["error"]["param"] == "speed"

    run(test)


LIMIT = 1000


UPLOAD_HEAD = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
CONTENT_TYPES = {"/v1/audio/transcriptions": "multipart/form-data; boundary=b"}


async def _chunks(total: int):
    """A body sent in pieces with no declared length (chunked transfer encoding)."""
    yield UPLOAD_HEAD
    for _ in range(total // 100):
        yield b"x" * 100


@pytest.mark.parametrize(
    "path, declared",
    [
        ("/v1/chat/completions", True),
        ("/v1/chat/completions", False),
        ("/v1/audio/transcriptions", True),
        ("/v1/audio/transcriptions", False),
        ("/v1/nothing", True),  # undeclared, an unknown route's body is never read: a 404
    ],
)
def test_an_oversized_body_is_a_413_in_openais_shape(path, declared):
    engine = ScriptedEngine()

    async def test(client, app):
        body = UPLOAD_HEAD + b"x" * LIMIT if declared else _chunks(LIMIT + 100)
        content_type = CONTENT_TYPES.get(path, "application/json")
        response = await client.post(path, content=body, headers={"content-type": content_type})
        assert openai_error(response, 413) == f"request body too large (the limit is {LIMIT} bytes)"
        assert (await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})).status_code == 200

    run(test, engine, max_body_bytes=LIMIT)
    assert len(engine.requests) == 1
