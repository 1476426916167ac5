"""`omni speak --server` against a live `omni serve`, and against servers that misbehave."""

import http.server
import io
import json
import threading

import httpx
import pytest
import soundfile as sf

from tests.acceptance.test_speak_cli import TEXT, decode, one_error_line


@pytest.mark.parametrize("fmt", ["wav", "mp3", "flac", "opus", "pcm"])
def test_server_speaks_every_format(omni_server, judge, fmt):
    response = httpx.post(
        f"{omni_server}/v1/audio/speech", json={"input": TEXT, "response_format": fmt}, timeout=60
    )
    assert response.status_code == 200, response.text
    expected = {"wav": "audio/wav", "mp3": "audio/mpeg", "flac": "audio/flac", "opus": "audio/ogg", "pcm": "audio/pcm"}
    assert response.headers["content-type"] == expected[fmt]
    samples, rate = decode(response.content, fmt)
    assert rate == 24000
    assert judge.wer_of(TEXT, samples, rate) < 0.2


@pytest.mark.parametrize("stream", [[], ["--stream"], ["--stream", "--stream-format", "audio"]])
@pytest.mark.parametrize("fmt", ["mp3", "wav"])
def test_speak_through_the_server(omni, omni_server, tmp_path, judge, stream, fmt):
    path = tmp_path / f"out.{fmt}"
    result = omni("speak", TEXT, "--server", omni_server, "-o", str(path), *stream)
    assert result.returncode == 0, result.stderr
    samples, rate = sf.read(str(path), dtype="float32")
    assert rate == 24000
    assert judge.wer_of(TEXT, samples, rate) < 0.2


def test_server_from_environment_and_v1_suffix(omni, omni_server):
    result = omni("speak", "Hello there.", "-o", "-", env={"OPENAI_BASE_URL": f"{omni_server}/v1"})
    assert result.returncode == 0, result.stderr
    assert sf.info(io.BytesIO(result.stdout)).samplerate == 24000


def test_server_voice_list(omni, omni_server):
    result = omni("speak", "--list-voices", "--server", omni_server)
    assert result.returncode == 0, result.stderr
    assert [line.split("\t")[0] for line in result.stdout.decode().splitlines()] == ["heart", "joe"]
    local = omni("speak", "--list-voices")
    assert local.returncode == 0 and local.stdout == result.stdout  # the same voices, local or remote
    assert "\ten-US\tmale\tmedium\t" in result.stdout.decode() and "OpenAI: alloy, coral," in result.stdout.decode()


def test_sse_events_from_the_server(omni_server):
    body = {"input": "Hello there. How are you?", "stream": True, "response_format": "pcm"}
    with httpx.stream("POST", f"{omni_server}/v1/audio/speech", json=body, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    assert len(events) >= 3  # one delta per sentence


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"input": "hi", "response_format": "aac"}, "response_format"),
        ({"input": "hi", "speed": 9}, "speed"),
        ({"input": "   "}, "empty"),
        ({"input": "hi", "voice": "nobody"}, "nobody"),
        ({"input": "hi", "stream": True, "response_format": "mp3"}, "streaming"),
        ({"response_format": "wav"}, "input"),
    ],
)
def test_server_refuses_bad_requests(omni_server, body, needle):
    response = httpx.post(f"{omni_server}/v1/audio/speech", json=body, timeout=30)
    assert response.status_code == 400
    assert needle in response.json()["error"]["message"]
    assert httpx.get(f"{omni_server}/health").status_code == 200


def test_server_refusal_is_one_line(omni, omni_server, tmp_path):
    path = tmp_path / "out.wav"
    result = omni("speak", "Hi.", "--server", omni_server, "--voice", "nobody", "-o", str(path))
    one_error_line(result, 1, "server answered 400", "nobody")
    assert not path.exists()


def test_unreachable_server(omni, tmp_path):
    from tests.helpers.omni_processes import free_port

    path = tmp_path / "out.wav"
    result = omni("speak", "Hi.", "--server", f"http://127.0.0.1:{free_port()}", "-o", str(path))
    one_error_line(result, 1, "cannot reach the server")
    assert list(tmp_path.iterdir()) == []


class _BadServer(http.server.BaseHTTPRequestHandler):
    """A real HTTP server that answers the speech route in the ways servers go wrong."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        mode = self.server.mode
        if mode == "500":
            self._answer(500, "application/json", b'{"error": {"message": "model crashed"}}')
        elif mode == "html":
            self._answer(200, "text/html", b"<html>login page</html>")
        elif mode == "garbage":
            self._answer(200, "audio/wav", b"this is not a wav file at all")
        elif mode == "drop":
            header = b"RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\xc0]\x00\x00\x80\xbb\x00\x00\x02\x00\x10\x00data\xff\xff\xff\xff"
            self.send_response(200)
            self.send_header("content-type", "audio/wav")
            self.send_header("content-length", "100000")
            self.end_headers()
            self.wfile.write(header + bytes(2000))
            self.wfile.flush()
            self.connection.close()

    def _answer(self, status, content_type, body):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def bad_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BadServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.mark.parametrize(
    "mode, stream, needle",
    [
        ("500", [], "server answered 500: model crashed"),
        ("html", [], "text/html, not audio"),
        ("garbage", [], "not audio"),
        ("drop", [], "broke off"),
        ("drop", ["--stream", "--stream-format", "audio"], "broke off"),
    ],
)
def test_misbehaving_server(omni, bad_server, tmp_path, mode, stream, needle):
    bad_server.mode = mode
    path = tmp_path / "out.mp3"
    url = f"http://127.0.0.1:{bad_server.server_address[1]}"
    result = omni("speak", "Hi.", "--server", url, "-o", str(path), *stream)
    one_error_line(result, 1, needle)
    assert list(tmp_path.iterdir()) == []
