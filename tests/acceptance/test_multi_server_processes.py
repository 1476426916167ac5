"""Several real `omni serve` processes on 127.0.0.1: speak, transcribe and bench-wer spread
over them, a server that is not there is one warning, one killed mid-run is skipped while the
run goes on, and bench-wer reports each server's figures, under a sweep and open-loop load."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.omni_processes import DATA, free_port, start_server

META = DATA / "meta_dev.lst"


@pytest.fixture(scope="module")
def pair():
    """Two live servers (embedded engine, no key); their URLs."""
    started = [start_server(), start_server()]
    yield [url for _, url in started]
    for proc, _ in started:
        proc.terminate()
        proc.wait(timeout=10)


def warnings_in(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if line.startswith("omni: warning:")]


def test_speak_and_transcribe_spread_and_skip_a_server_that_is_not_there(omni, pair, tmp_path):
    texts = ["The children built a small castle.", "Remember to save your work."]
    clips = [tmp_path / "one.wav", tmp_path / "two.wav"]
    for text, clip in zip(texts, clips, strict=True):
        spoken = omni("speak", text, "-o", str(clip), "--server", ",".join(pair))
        assert spoken.returncode == 0, spoken.stderr
    dead = f"http://127.0.0.1:{free_port()}"
    heard = omni("transcribe", *map(str, clips), "--server", dead, "--server", pair[0], "--server", pair[1])
    assert heard.returncode == 0, heard.stderr
    assert warnings_in(heard.stderr) == [f"omni: warning: skipping {dead} for the rest of this run: "
                                         f"cannot reach the server at {dead}: All connection attempts failed"]
    lines = heard.stdout.decode().splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == list(map(str, clips))
    assert "castle" in lines[0].lower() and "save your work" in lines[1].lower()


def test_every_server_down_is_one_error(omni):
    dead = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    result = omni("bench-wer", "-d", str(META), "--server", ",".join(dead))
    assert result.returncode == 1
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith("omni: error: none of the 2 servers answers: ") and all(url in line for url in dead)


def test_a_server_killed_mid_run_is_skipped_and_the_run_goes_on(pair, tmp_path):
    log = tmp_path / "doomed.log"
    with log.open("w") as handle:
        doomed, doomed_url = start_server(log=handle)
    command = [sys.executable, "-m", "omnicli", "bench-wer", "-d", str(META), "--limit", "10", "-c", "2",
               "--server", pair[0], "--server", doomed_url, "--json"]
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120  # killed once it has answered the warm-up and a request: mid-run
        while time.monotonic() < deadline and log.read_text().count('"POST /v1/audio/speech" 200') < 2:
            time.sleep(0.02)
        doomed.send_signal(signal.SIGKILL)
        stdout, stderr = bench.communicate(timeout=300)
    finally:
        doomed.kill()
        bench.kill()
    assert bench.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["scored"] + summary["failures"]["request_failed"] == 10
    assert summary["failures"]["request_failed"] <= 1  # at most one whose audio had begun there
    (warning,) = warnings_in(stderr)
    assert warning.startswith(f"omni: warning: skipping {doomed_url} for the rest of this run: ")
    live, killed = summary["servers"][pair[0]], summary["servers"][doomed_url]
    assert (live["skipped"], killed["skipped"]) == (False, True)
    assert killed["requests"] >= 2 and killed["failures"] == 1 and live["failures"] == 0
    assert live["requests"] + killed["requests"] == 10 + 1 - summary["failures"]["request_failed"]  # one went again


def test_a_concurrency_sweep_over_two_servers(omni, pair, tmp_path):
    out = tmp_path / "sweep"
    result = omni("bench-wer", "-d", str(META), "--limit", "3", "-c", "1,2", "--server", ",".join(pair),
                  "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [(run["max_concurrency"], run["scored"], run["completed"]) for run in runs] == [(1, 3, 3), (2, 3, 3)]
    for run in runs:
        # Three sentences: one of Piper's sampled readings can score 0.46 alone (test_embedded_voice).
        assert run["wer_mean"] < 0.35 and run["median_audio_ttfp_ms"] > 0 and run["audio_continuity_ok_rate"] is not None
        assert sum(f["requests"] for f in run["servers"].values()) == 3
        assert all(f["requests"] >= 1 and f["failures"] == 0 for f in run["servers"].values())
    assert sorted(p.name for p in out.iterdir()) == ["c1", "c2", "summary.json"]


def test_open_loop_arrivals(omni, pair):
    result = omni("bench-wer", "-d", str(META), "--limit", "3", "--rate", "2", "--seed", "1",
                  "--server", ",".join(pair), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["request_rate"], summary["max_concurrency"], summary["completed"]) == (2.0, None, 3)
    assert summary["request_throughput"] > 0 and summary["p99_audio_rtf"] > 0


def test_talk_stays_on_the_first_server_that_answers(omni, pair, tmp_path):
    question = tmp_path / "question.wav"
    quiet = np.zeros(24000, np.float32)
    sf.write(str(question), np.concatenate([quiet, synthesize("What do cats like to eat?"), quiet, quiet]), 24000)
    dead = f"http://127.0.0.1:{free_port()}"
    said = tmp_path / "said.wav"
    result = omni("talk", "--server", f"{dead},{pair[1]},{pair[0]}", "--input-file", str(question),
                  "--output-file", str(said))
    assert result.returncode == 0, result.stderr
    stderr = result.stderr.decode().splitlines()
    assert warnings_in(result.stderr) == [f"omni: warning: skipping {dead}: cannot reach the server at {dead}: "
                                          "All connection attempts failed"]
    assert stderr.count(f"omni: talk uses {pair[1]}, the first of 3 servers that answers "
                        "(a realtime session stays on the server it starts on)") == 1
    samples, _ = sf.read(str(said), dtype="float32")
    assert np.abs(samples).max() > 0.05  # the answer was spoken
