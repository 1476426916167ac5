"""Chat completion answers in the shapes real servers send (OpenAI; vLLM-Omni), built around one
real clip, and a real HTTP server on 127.0.0.1 that plays them back and records what it was sent."""

import base64
import http.server
import io
import json
import threading

import numpy as np
import soundfile as sf

TEXT = "Paris is the capital of France. It is a lovely city."
USAGE = {"prompt_tokens": 12, "completion_tokens": 14, "total_tokens": 26}


def wav_b64(samples: np.ndarray, rate: int = 24000) -> str:
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
    return base64.b64encode(buffer.getvalue()).decode()


def pcm_b64(samples: np.ndarray) -> str:
    return base64.b64encode((np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes()).decode()


def words(text: str) -> list[str]:
    pieces = text.split(" ")
    return [pieces[0]] + [" " + p for p in pieces[1:]]


def pieces_of(samples: np.ndarray, count: int) -> list[np.ndarray]:
    return np.array_split(samples, count)


def openai_whole(samples):
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-audio-preview",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": None,
            "audio": {"id": "audio_1", "data": wav_b64(samples), "transcript": TEXT, "expires_at": 0}}}],
        "usage": USAGE,
    }


def vllm_whole(samples):
    return {
        "id": "chatcmpl-2", "object": "chat.completion", "model": "Qwen/Qwen3-Omni",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": TEXT}},
            {"index": 1, "finish_reason": "stop", "message": {
                "role": "assistant", "content": None, "audio": {"id": "a", "data": wav_b64(samples), "expires_at": 0}}},
        ],
        "usage": USAGE,
    }


def openai_stream(samples):
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]}]
    for word in words(TEXT):
        chunks.append({"choices": [{"index": 0, "delta": {"audio": {"transcript": word}}}]})
    for piece in pieces_of(samples, 7):
        chunks.append({"choices": [{"index": 0, "delta": {"audio": {"id": "audio_1", "data": pcm_b64(piece)}}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({"choices": [], "usage": USAGE})
    return chunks


def vllm_stream(samples):
    chunks = []
    for word in words(TEXT):
        chunks.append({"modality": "text", "choices": [{"index": 0, "delta": {"content": word}}]})
    for piece in pieces_of(samples, 5):
        chunks.append({"modality": "audio", "choices": [{"index": 1, "delta": {"content": wav_b64(piece)}}]})
    chunks.append({"modality": "text", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": USAGE})
    return chunks


def sse(chunks, *, done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/v1/models":
            self._send(200, "application/json", json.dumps({"data": [{"id": "recorded-model"}]}).encode())
        else:
            self._send(404, "application/json", b'{"error": {"message": "no such route"}}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.requests.append(body)
        status, content_type, payload, cut = self.server.answer(body)
        if cut:  # send part of the body, then hang up
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(payload) * 2))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(status, content_type, payload)

    def _send(self, status, content_type, payload):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


class RecordedServer:
    """`answer(body) -> (status, content type, bytes, cut)` decides each reply."""

    def __init__(self) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.requests = []
        self.httpd.answer = None
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def requests(self) -> list[dict]:
        return self.httpd.requests

    def reply(self, status: int, content_type: str, payload: bytes, cut: bool = False) -> None:
        self.httpd.answer = lambda body: (status, content_type, payload, cut)

    def close(self) -> None:
        self.httpd.shutdown()
