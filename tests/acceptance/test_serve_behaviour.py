"""`omni serve` as an operator meets it: auth, limits, concurrency, cancellation, metrics,
and the omni CLI pointed at it."""

import concurrent.futures
import io
import json
import re
import time

import httpx
import pytest
import soundfile as sf

from tests.helpers.omni_processes import start_server


@pytest.fixture(scope="module")
def guarded_server():
    proc, url = start_server("--api-key", "s3cret", "--max-body-mb", "1")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_key_is_required_except_for_health(guarded_server):
    assert httpx.get(f"{guarded_server}/health").status_code == 200
    assert httpx.get(f"{guarded_server}/v1/models").status_code == 401
    wrong = httpx.get(f"{guarded_server}/v1/models", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "API key" in wrong.json()["error"]["message"]
    right = httpx.get(f"{guarded_server}/v1/models", headers={"Authorization": "Bearer s3cret"})
    assert right.status_code == 200


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/docs", None),
        ("GET", "/redoc", None),
        ("GET", "/openapi.json", None),
        ("GET", "/metrics", None),
        ("GET", "/v1/nothing", None),
        ("DELETE", "/v1/models", None),
        ("POST", "/v1/audio/speech", b'{"input": '),
        ("POST", "/v1/chat/completions", b"x" * (2 * 1024 * 1024)),
    ],
)
def test_nothing_but_health_answers_without_the_key(guarded_server, method, path, body):
    response = httpx.request(method, f"{guarded_server}{path}", content=body, timeout=30,
                             headers={"content-type": "application/json"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_cli_passes_the_key(omni, guarded_server, tmp_path):
    path = tmp_path / "hi.wav"
    refused = omni("speak", "Hello.", "--server", guarded_server, "-o", str(path))
    assert refused.returncode == 1 and "401" in refused.stderr.decode()
    accepted = omni("speak", "Hello.", "--server", guarded_server, "-o", str(path), env={"OMNI_API_KEY": "s3cret"})
    assert accepted.returncode == 0, accepted.stderr
    assert sf.info(str(path)).duration > 0.3


def test_oversized_body_is_413_and_the_server_lives_on(guarded_server):
    headers = {"Authorization": "Bearer s3cret"}
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * (2 * 1024 * 1024)}]}
    response = httpx.post(f"{guarded_server}/v1/chat/completions", json=big, headers=headers, timeout=30)
    assert response.status_code == 413
    assert response.json()["error"]["message"] == "request body too large (the limit is 1048576 bytes)"
    upload = httpx.post(f"{guarded_server}/v1/audio/transcriptions", headers=headers, timeout=30,
                        files={"file": ("big.wav", b"\0" * (2 * 1024 * 1024))}, data={"model": "m"})
    assert upload.status_code == 413
    assert httpx.get(f"{guarded_server}/v1/models", headers=headers).status_code == 200


def test_eight_simultaneous_speech_requests(omni_server, judge):
    sentences = [f"Request number {n} is being spoken now." for n in range(1, 9)]

    def ask(text):
        return httpx.post(f"{omni_server}/v1/audio/speech", json={"input": text}, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(ask, sentences))
    assert [r.status_code for r in responses] == [200] * 8
    for text, response in zip(sentences, responses, strict=True):
        samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
        assert judge.wer_of(text, samples, rate) < 0.3


def active_generations(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    return sum(float(v) for v in re.findall(r"^omni_active_generations\{[^}]*\} (\S+)$", text, re.M))


def test_a_client_that_hangs_up_frees_the_engine(omni_server):
    body = {"model": "m", "stream": True, "max_tokens": 4000, "temperature": 1.0,
            "messages": [{"role": "user", "content": "Write a very long story about a dragon."}]}
    with httpx.stream("POST", f"{omni_server}/v1/chat/completions", json=body, timeout=60) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
        assert active_generations(omni_server) == 1
    # 4000 tokens take minutes at ~40 tokens/s; a cancelled one is gone within seconds.
    deadline = time.monotonic() + 20
    while active_generations(omni_server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert active_generations(omni_server) == 0
    quick = httpx.post(f"{omni_server}/v1/chat/completions", timeout=60,
                       json={"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]})
    assert quick.status_code == 200


def test_metrics_report_requests_and_stages(omni_server):
    httpx.post(f"{omni_server}/v1/audio/speech", json={"input": "Metrics please."}, timeout=60)
    text = httpx.get(f"{omni_server}/metrics").text
    assert re.search(r'omni_requests_total\{method="POST",route="/v1/audio/speech",status="200"\} [1-9]', text)
    assert 'omni_stage_time_to_first_output_seconds_count{stage="speech"}' in text
    assert 'omni_stage_real_time_factor_count{stage="speech"}' in text
    wakes = re.search(r'^omni_event_loop_lag_seconds_count (\S+)$', text, re.M)
    assert wakes and float(wakes.group(1)) > 0  # the loop-lag timer runs from startup


def test_omni_chat_against_omni_serve(omni, omni_server, tmp_path, judge):
    path = tmp_path / "answer.flac"
    result = omni("chat", "Say something nice.", "--server", omni_server, "-o", str(path), "--max-tokens", "40",
                  "--temperature", "0", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    samples, rate = sf.read(str(path), dtype="float32")
    assert judge.cer_of(report["text"], samples, rate) < 0.2


def test_one_log_line_per_request(tmp_path):
    log = open(tmp_path / "serve.log", "w+b")
    proc, url = start_server(log=log)
    try:
        httpx.get(f"{url}/v1/models")
        httpx.post(f"{url}/v1/audio/speech", json={"input": "hi", "response_format": "aac"})
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    lines = (tmp_path / "serve.log").read_text().splitlines()
    assert any('"GET /v1/models" 200' in line for line in lines)
    assert any('"POST /v1/audio/speech" 400' in line for line in lines)


def test_vllm_omni_engine_says_how_to_install(omni):
    result = omni("serve", "--engine", "vllm-omni", "--model", "Qwen/Qwen3-Omni-30B-A3B-Instruct")
    assert result.returncode == 2
    assert "pip install vllm-omni" in result.stderr.decode()
