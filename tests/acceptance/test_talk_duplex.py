"""`omni talk --duplex`: headless against a real `omni serve` process's duplex lane (real models),
and on real (PulseAudio) devices against the MiniCPM-o flavour of vLLM-Omni's lane (minicpmo_shape),
where a barge-in's acknowledged `played_ms` is checked against what the sink received."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.minicpmo_shape import MiniCPMoShape
from tests.helpers.pulse import RATE as PULSE_RATE
from tests.helpers.speech_check import wer
from tests.helpers.vllm_realtime_shape import served

QUESTION = "How many days are there in a week?"


def events_of(path, containing: str = "") -> list[dict]:
    """The --transcript's events (only lines that mention `containing`: the log holds every append)."""
    return [json.loads(line) for line in open(path) if containing in line] if path.exists() else []


@pytest.fixture(scope="module")
def question(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("duplex") / "question.wav"
    sf.write(str(path), np.concatenate([np.zeros(12000, np.float32), synthesize(QUESTION)]), 24000)
    return str(path)


def test_headless_against_omni_serves_duplex_lane(omni, omni_server, question, tmp_path, judge):
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--duplex", "--server", omni_server, "--input-file", question, "--output-file", str(said),
                  "--transcript", str(log))
    events = check_headless_duplex(result, log, said, judge)
    assert events[1]["event"]["session"]["capabilities"]["supports_session_resume"] is True


def test_headless_duplex_in_process(omni, question, tmp_path, judge):
    """No --server: the duplex lane runs in the talk's own process on the embedded engine."""
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--duplex", "--input-file", question, "--output-file", str(said), "--transcript", str(log))
    events = check_headless_duplex(result, log, said, judge)
    assert events[1]["event"]["session"]["capabilities"]["supports_session_resume"] is False  # no socket to lose


def check_headless_duplex(result, log, said, judge) -> list[dict]:
    """The question heard (Whisper on the server's side), an answer spoken that the judge hears as
    its transcript, every answer acknowledged as played in full, and the session closed; the events."""
    assert result.returncode == 0, result.stderr
    events = events_of(log)
    assert events[1]["event"]["type"] == "session.created"
    kinds = [(e["dir"], e["event"]["type"]) for e in events]
    assert ("in", "response.speak") in kinds
    heard = [e["event"]["transcript"] for e in events
             if e["event"]["type"] == "conversation.item.input_audio_transcription.completed"]
    assert heard and wer(QUESTION, heard[0]) < 0.35, heard
    answer = " ".join(e["event"]["transcript"] for e in events if e["event"]["type"] == "response.output_audio_transcript.done")
    samples, rate = sf.read(str(said), dtype="float32")
    assert answer and judge.cer_of(answer, samples, rate) < 0.2
    # Headless, everything received counts as played: the last ack of each answer is its whole length.
    last: dict[str, int] = {}
    for e in events:
        if e["event"]["type"] == "playback.ack":
            last[e["event"]["response_id"]] = e["event"]["played_ms"]
    assert abs(sum(last.values()) - len(samples) * 1000 / rate) <= len(last)
    assert [k for d, k in kinds if d == "out" and k != "session.event_ack"][-1] == "session.close"
    assert kinds[-1] == ("in", "session.closed")
    return events


def start_talk(pulse, url: str, log_path, ref_audio: str):
    return subprocess.Popen(
        [sys.executable, "-m", "omnicli", "talk", "--duplex", "--preset", "minicpmo", "--ref-audio", ref_audio,
         "--server", url, "--no-echo-gate", "--transcript", str(log_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**__import__("os").environ, **pulse.env},
    )


def wait_for(log_path, direction: str, kind: str, timeout: float = 60, where=lambda event: True,
             count: int = 1) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e["event"] for e in events_of(log_path, f'"{kind}"')
                 if e["dir"] == direction and e["event"]["type"] == kind and where(e["event"])]
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {direction} {kind} in {timeout} s")


def at_48k(samples: np.ndarray) -> np.ndarray:
    import soxr

    return soxr.resample(samples, 24000, PULSE_RATE).astype(np.float32)


def heard_ms(sink: np.ndarray) -> float:
    """How much of the first answer (a continuous tone) the sink received: its samples up to where
    it fell silent for good, without the silence a late device callback left inside it."""
    sound = np.flatnonzero(np.abs(sink) > 1e-4)
    gaps = np.flatnonzero(np.diff(sound) > 0.8 * PULSE_RATE)
    end = gaps[0] + 1 if len(gaps) else len(sound)
    return end * 1000 / PULSE_RATE


@pytest.mark.parametrize("server_barge_in", [False, True], ids=["client-forced", "server"])
def test_barge_in_on_real_devices_acknowledges_what_the_sink_played(pulse, question, tmp_path, server_barge_in):
    """Speech over the answer on real devices: where the server has no barge-in the client forces
    it (cancel + clear), where it has, the server cancels; either way the `played_ms` the client
    acknowledges at the cut is what the speaker really played."""
    shape = MiniCPMoShape(supports_barge_in=server_barge_in, audible=True, deltas=40, pace_s=0.1)
    log = tmp_path / "events.jsonl"
    with served(shape.handler) as url:
        proc = start_talk(pulse, url, log, question)
        try:
            wait_for(log, "in", "session.created")
            time.sleep(1.0)  # the microphone stream is running
            pulse.take_speaker()
            pulse.speak_into_microphone(at_48k(synthesize(QUESTION)))
            wait_for(log, "in", "response.audio.delta")
            time.sleep(2.5)  # let the answer play for a while
            pulse.speak_into_microphone(at_48k(synthesize("Stop, please stop.")))
            wait_for(log, "out", "input_audio_buffer.commit", where=lambda e: True, count=2)
            sink = pulse.take_speaker()  # the answer cut; not the answer to "Stop", which may follow at once
            time.sleep(1.0)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=20)
    assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
    sent = [e["event"] for e in events_of(log) if e["dir"] == "out"
            and e["event"]["type"] not in ("input_audio_buffer.append", "session.event_ack")]
    kinds = [e["type"] for e in sent]
    if server_barge_in:
        assert "response.cancel" not in kinds  # the server's call
        ack = next(e for e in sent if e["type"] == "playback.ack" and e.get("truncate"))
    else:
        cut = kinds.index("response.cancel")
        ack = sent[cut - 1]
        assert ack["type"] == "playback.ack" and kinds[cut + 1] == "input_audio_buffer.clear"
    sink_ms = heard_ms(sink)
    print(f"barge-in ({'server' if server_barge_in else 'client-forced'}): acknowledged played_ms "
          f"{ack['played_ms']}, the sink received {sink_ms:.0f} ms")
    assert abs(ack["played_ms"] - sink_ms) < 400, (ack["played_ms"], sink_ms)
    assert kinds[-1] == "session.close"


def telling_a_story(pulse, url: str, log_path):
    """`omni talk --duplex` against `url` on the PulseAudio devices, asked aloud for a long story;
    returned once the story's audio has begun (the caller interrupts the process when done)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "omnicli", "talk", "--duplex", "--server", url, "--no-echo-gate",
         "--instructions", "Tell a long, detailed story of at least ten sentences.", "--transcript", str(log_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**__import__("os").environ, **pulse.env},
    )
    try:
        wait_for(log_path, "in", "session.created")
        time.sleep(1.0)  # the microphone stream is running
        pulse.speak_into_microphone(at_48k(synthesize("Tell me a long story about a brave knight.")))
        wait_for(log_path, "in", "response.output_audio.delta", timeout=90)
    except BaseException:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        raise
    return proc


def test_a_backchannel_on_real_devices_does_not_interrupt_omni_serves_answer(pulse, omni_server, tmp_path):
    """"Uh-huh." said into the microphone while the answer plays: the lane drops it (the client's
    own commit at its pause included), nothing is cancelled or truncated, and it is no turn."""
    log = tmp_path / "events.jsonl"
    proc = telling_a_story(pulse, omni_server, log)
    try:
        time.sleep(2.0)  # the answer is playing
        pulse.speak_into_microphone(at_48k(synthesize("Uh-huh.")))
        decision = wait_for(log, "in", "overlap.decision")[0]
        time.sleep(1.5)  # the answer goes on
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
    assert (decision["action"], decision["reason"]) == ("drop", "backchannel")
    logged = events_of(log)
    leaving = next(i for i, e in enumerate(logged) if e["dir"] == "out" and e["event"]["type"] == "session.close")
    events = [e["event"] for e in logged[:leaving]]  # (Ctrl-C then cuts the answer, as it should)
    kinds = [e["type"] for e in events]
    assert "response.cancel" not in kinds and "output_audio_buffer.cleared" not in kinds
    assert not [e for e in events if e["type"] == "playback.ack" and e.get("truncate")]
    assert kinds.count("input_audio_buffer.committed") == 1 and kinds.count("response.created") == 1
    assert all(e["response"]["status"] == "completed" for e in events if e["type"] == "response.done")


def test_server_barge_in_on_real_devices_against_omni_serve(pulse, omni_server, tmp_path):
    """omni serve has barge-in: sustained speech over the answer is the server's to cancel; the
    client stops playing and acknowledges, truncating, what it played, and the server's ledger
    takes that figure."""
    log = tmp_path / "events.jsonl"
    proc = telling_a_story(pulse, omni_server, log)
    try:
        time.sleep(3.0)  # let the answer play for a while
        # Longer than the lane's barge-in threshold (1.2 s of speech over the answer).
        pulse.speak_into_microphone(at_48k(synthesize("Stop, please stop the story now, I would like to ask you something else.")))
        wait_for(log, "out", "playback.ack", where=lambda e: e.get("truncate"))
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
    events = [e["event"] for e in events_of(log)]
    assert not [e for e in events if e["type"] == "response.cancel"]  # the server's call, not ours
    barge_in = next(i for i, e in enumerate(events) if e["type"] == "overlap.decision" and e["action"] == "barge_in")
    at, ack = next((i, e) for i, e in enumerate(events) if e["type"] == "playback.ack" and e.get("truncate"))
    assert barge_in < at  # cut on the server's word (the answer may have been made in full already, still playing)
    answered_ms = sum(e["delta"]["bytes"] // 2 for e in events  # the transcript keeps audio's size
                      if e["type"] == "response.output_audio.delta" and e["response_id"] == ack["response_id"]) * 1000 // 24000
    assert 0 < ack["played_ms"] < answered_ms  # cut part-way: heard some, not all
    confirmed = [e["event"] for e in events if e["type"] == "playback.acknowledged" and e["event"].get("truncate")]
    assert confirmed and confirmed[-1]["played_ms"] == ack["played_ms"]
