"""`omni talk`: headless in process and over the socket, and with real (PulseAudio) devices."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

from tests.acceptance.test_embedded_voice import synthesize
from tests.helpers.pulse import RATE as PULSE_RATE
from tests.helpers.speech_check import trim_silence, wer
from tests.helpers.vllm_realtime_shape import VllmTurnBasedShape, served

QUESTIONS = ["How many days are there in a week?", "What do cats like to eat?"]


@pytest.fixture(scope="module")
def dialog(tmp_path_factory) -> str:
    """Two spoken questions with a pause between: two turns for VAD to find."""
    path = tmp_path_factory.mktemp("dialog") / "dialog.wav"
    gap = np.zeros(24000 * 4, dtype=np.float32)
    audio = np.concatenate([np.zeros(12000, np.float32), synthesize(QUESTIONS[0]), gap, synthesize(QUESTIONS[1])])
    sf.write(str(path), audio, 24000)
    return str(path)


def events_of(path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


def answers(log: list[dict]) -> list[str]:
    return [e["event"]["transcript"] for e in log if e["event"]["type"] == "response.output_audio_transcript.done"]


def check_headless_run(result, log_path, said_path, judge):
    assert result.returncode == 0, result.stderr
    log = events_of(log_path)
    heard = [e["event"]["transcript"] for e in log if e["event"]["type"] == "conversation.item.input_audio_transcription.completed"]
    assert len(heard) == 2 and all(wer(q, h) < 0.35 for q, h in zip(QUESTIONS, heard, strict=True)), heard
    said = answers(log)
    assert len(said) == 2 and all(said)
    samples, rate = sf.read(str(said_path), dtype="float32")
    assert judge.cer_of(" ".join(said), samples, rate) < 0.2
    assert "2 turns" in result.stderr.decode()
    outgoing = [e["event"]["type"] for e in log if e["dir"] == "out"]
    assert outgoing.count("input_audio_buffer.commit") == 2 and outgoing.count("response.create") == 2


def test_headless_in_process(omni, dialog, tmp_path, judge):
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--input-file", dialog, "--output-file", str(said), "--transcript", str(log))
    check_headless_run(result, log, said, judge)


def test_headless_over_the_socket(omni, omni_server, dialog, tmp_path, judge):
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--server", omni_server, "--input-file", dialog, "--output-file", str(said),
                  "--transcript", str(log))
    check_headless_run(result, log, said, judge)


@pytest.mark.parametrize("vad, detection", [("server", "server_vad"), ("semantic", "semantic_vad")])
def test_headless_with_the_servers_turns(omni, omni_server, dialog, tmp_path, judge, vad, detection):
    said, log = tmp_path / "said.wav", tmp_path / "events.jsonl"
    result = omni("talk", "--server", omni_server, "--vad", vad, "--input-file", dialog,
                  "--output-file", str(said), "--transcript", str(log))
    assert result.returncode == 0, result.stderr
    assert "using client VAD" not in result.stderr.decode()
    updated = next(e["event"] for e in events_of(log) if e["dir"] == "in" and e["event"]["type"] == "session.updated")
    assert updated["session"]["audio"]["input"]["turn_detection"]["type"] == detection
    kinds = [e["event"]["type"] for e in events_of(log) if e["dir"] == "in"]
    assert kinds.count("input_audio_buffer.speech_started") == 2
    assert kinds.count("response.done") == 2
    assert len(answers(events_of(log))) == 2


def test_unreachable_server_and_bad_file(omni, tmp_path):
    from tests.helpers.omni_processes import free_port

    result = omni("talk", "--server", f"http://127.0.0.1:{free_port()}", "--input-file", str(tmp_path / "x.wav"))
    assert result.returncode == 2 and "cannot read --input-file" in result.stderr.decode()
    clip = tmp_path / "q.wav"
    sf.write(str(clip), synthesize("Hello."), 24000)
    result = omni("talk", "--server", f"http://127.0.0.1:{free_port()}", "--input-file", str(clip), "--output-file", str(tmp_path / "o.wav"))
    assert result.returncode == 1
    assert result.stderr.decode().strip().splitlines()[-1].startswith("omni: error: cannot reach the realtime endpoint")
    assert not (tmp_path / "o.wav").exists()


def start_talk(pulse, log_path, *extra):
    env = {**pulse.env}
    return subprocess.Popen(
        [sys.executable, "-m", "omnicli", "talk", "--vad", "client", "--transcript", str(log_path), *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**__import__("os").environ, **env},
    )


def wait_for(log_path, kind: str, count: int = 1, timeout: float = 90) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log_path.exists():
            found = [e for e in events_of(log_path) if e["event"]["type"] == kind]
            if len(found) >= count:
                return found
        time.sleep(0.05)
    raise AssertionError(f"no {kind} in {timeout} s")


def at_48k(samples: np.ndarray) -> np.ndarray:
    import soxr

    return soxr.resample(samples, 24000, PULSE_RATE).astype(np.float32)


def stop(proc) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def ask_aloud(pulse, log_path, question: str) -> None:
    """Once the session is ready and the microphone stream runs, `question` into the microphone
    (the speaker's recording emptied first)."""
    wait_for(log_path, "session.updated")
    time.sleep(1.0)  # the microphone stream is running
    pulse.take_speaker()
    pulse.speak_into_microphone(at_48k(synthesize(question)))


def test_microphone_to_speaker(pulse, tmp_path, judge):
    log = tmp_path / "events.jsonl"
    proc = start_talk(pulse, log)
    try:
        ask_aloud(pulse, log, QUESTIONS[0])
        wait_for(log, "response.done")
        pulse.wait_until_quiet()  # the answer, made faster than real time, plays out
    finally:
        stop(proc)
    assert proc.returncode == 130
    answer = answers(events_of(log))[0]
    heard = trim_silence(pulse.take_speaker())
    assert judge.cer_of(answer, heard, PULSE_RATE) < 0.2


def test_barge_in_truncates_at_what_the_speaker_played(pulse, tmp_path):
    log = tmp_path / "events.jsonl"
    proc = start_talk(pulse, log, "--no-echo-gate", "--instructions", "Tell a long, detailed story of at least ten sentences.")
    try:
        ask_aloud(pulse, log, "Tell me a long story about a brave knight.")
        wait_for(log, "response.output_audio.delta")
        time.sleep(1.5)  # let the answer play for a while
        pulse.speak_into_microphone(at_48k(synthesize("Stop, please stop.")))
        truncate = wait_for(log, "conversation.item.truncate")[0]
        time.sleep(1.0)
    finally:
        stop(proc)
    log_events = events_of(log)
    outgoing = [e["event"]["type"] for e in log_events if e["dir"] == "out"]
    barged_in = next(i for i, e in enumerate(log_events)
                     if e["dir"] == "out" and e["event"]["type"] in ("response.cancel", "conversation.item.truncate"))
    first_done = next(i for i, e in enumerate(log_events) if e["event"]["type"] == "response.done")
    if first_done < barged_in:
        # The answer was all made (the voice is ~6x faster than real time) and only playing: nothing
        # to cancel on the server, the rest is dropped from the speaker and the item truncated.
        assert log_events[first_done]["event"]["response"]["status"] == "completed"
        assert "response.cancel" not in outgoing
    else:
        assert "response.cancel" in outgoing
        assert log_events[first_done]["event"]["response"]["status"] == "cancelled"
    # What the sink received of the first answer: from its first sound to where it fell silent.
    played = pulse.take_speaker()
    loud = np.flatnonzero(np.abs(played) > 0.01)
    start = loud[0]
    gaps = np.flatnonzero(np.diff(loud) > 0.8 * PULSE_RATE)
    end = loud[gaps[0]] if len(gaps) else loud[-1]
    sink_ms = (end - start) * 1000 / PULSE_RATE
    assert abs(truncate["event"]["audio_end_ms"] - sink_ms) < 400, (truncate["event"]["audio_end_ms"], sink_ms)


def test_answers_play_without_gaps_on_a_loaded_machine(pulse, tmp_path):
    """One core kept busy (a recorder, a browser): the answer still reaches the speaker in time,
    with no wait for audio over 200 ms inside it, as omni talk counts it at its own player and notes
    it in --transcript."""
    log = tmp_path / "events.jsonl"
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        proc = start_talk(pulse, log, "--llm", "smollm2", "--instructions", "Answer in two or three sentences.")
        try:
            ask_aloud(pulse, log, "Tell me about the moon.")
            wait_for(log, "omni.answer.played")
        finally:
            stop(proc)
    finally:
        busy.kill()
        busy.wait()
    [played] = [e["event"] for e in events_of(log) if e["dir"] == "note"]
    assert played["audio_ms"] > 1500 and played["heard_ms"] >= played["audio_ms"] - 100, played
    assert played["longest_gap_ms"] <= 200, played  # (the device's own underruns are counted too, not asserted: they follow the load)
    assert len(trim_silence(pulse.take_speaker())) / PULSE_RATE > 1.5  # and it reached the speaker


BETA_ANSWER = "The weather is lovely today."


def pcm16_b64(samples: np.ndarray, rate: int) -> list[str]:
    """The answer as base64 PCM16 pieces of 0.2 s at `rate`."""
    import base64

    import soxr

    pcm = (np.clip(soxr.resample(samples, 24000, rate), -1, 1) * 32767).astype("<i2").tobytes()
    step = rate // 5 * 2
    return [base64.b64encode(pcm[i:i + step]).decode() for i in range(0, len(pcm), step)]


@pytest.fixture(scope="module")
def answer_audio() -> np.ndarray:
    return synthesize(BETA_ANSWER)


def test_talk_reads_the_beta_spellings(omni, tmp_path, judge, answer_audio):
    """OpenAI beta: response.audio.delta / response.audio_transcript.delta, audio at 16 kHz."""
    async def beta(ws):
        await ws.send(json.dumps({"type": "session.created", "session": {}}))
        async for message in ws:
            if json.loads(message)["type"] != "response.create":
                continue
            await ws.send(json.dumps({"type": "response.created", "response": {"id": "resp_1"}}))
            await ws.send(json.dumps({"type": "response.output_item.added", "item": {"id": "item_1"}}))
            for word in BETA_ANSWER.split(" "):
                await ws.send(json.dumps({"type": "response.audio_transcript.delta", "item_id": "item_1", "delta": word + " "}))
            for piece in pcm16_b64(answer_audio, 16000):
                await ws.send(json.dumps({"type": "response.audio.delta", "item_id": "item_1", "sample_rate_hz": 16000, "delta": piece}))
            await ws.send(json.dumps({"type": "response.done", "response": {"id": "resp_1", "status": "completed"}}))

    with served(beta) as url:
        check_answer_from(omni, url, tmp_path, judge)


def test_talk_speaks_vllm_omnis_legacy_path(omni, tmp_path, judge, answer_audio):
    """vLLM-Omni <= 0.30: no greeting, session.update {model} first, 16 kHz appends, commit
    {final} starts the answer, transcription.delta and audio in an `audio` field, no response.*."""
    heard = {}

    async def legacy(ws):
        received = bytearray()
        first = json.loads(await ws.recv())
        heard["first"] = first
        async for message in ws:
            event = json.loads(message)
            if event["type"] == "input_audio_buffer.append":
                received.extend(__import__("base64").b64decode(event["audio"]))
            elif event["type"] == "input_audio_buffer.commit" and event.get("final") is False:
                heard["seconds_at_16k"] = len(received) / 2 / 16000
                for word in BETA_ANSWER.split(" "):
                    await ws.send(json.dumps({"type": "transcription.delta", "delta": word + " "}))
                for piece in pcm16_b64(answer_audio, 16000):
                    await ws.send(json.dumps({"type": "response.output_audio.delta", "audio": piece,
                                              "format": "pcm16", "sample_rate_hz": 16000}))
                await ws.send(json.dumps({"type": "transcription.done", "text": BETA_ANSWER}))
                await ws.send(json.dumps({"type": "response.output_audio.done"}))

    with served(legacy) as url:
        check_answer_from(omni, url, tmp_path, judge, "--model", "Qwen/Qwen3-Omni-30B-A3B-Instruct")
    assert heard["first"] == {"type": "session.update", "model": "Qwen/Qwen3-Omni-30B-A3B-Instruct"}
    spoken = len(synthesize(QUESTIONS[0])) / 24000
    assert 0.7 * spoken < heard["seconds_at_16k"] < 1.0 * spoken + 1.0  # 16 kHz, not 24 kHz


def check_answer_from(omni, url, tmp_path, judge, *extra):
    question = tmp_path / "q.wav"
    sf.write(str(question), np.concatenate([synthesize(QUESTIONS[0]), np.zeros(12000, np.float32)]), 24000)
    said = tmp_path / "said.wav"
    result = omni("talk", "--server", url, "--input-file", str(question), "--output-file", str(said), *extra)
    assert result.returncode == 0, result.stderr
    assert BETA_ANSWER in result.stderr.decode()
    samples, rate = sf.read(str(said), dtype="float32")
    assert rate == 24000 and judge.wer_of(BETA_ANSWER, samples, rate) < 0.2


def test_server_vad_against_vllm_omnis_turn_based_handler(omni, tmp_path, judge):
    """vLLM-Omni's turn-based handler drops server VAD from the session: omni reads what the server
    took, says once that it finds the turns itself, and the conversation works (the real embedded
    engine answers behind the recorded vLLM-Omni wire)."""
    from omnicli.engine.staged import embedded_engine

    question, said, log = tmp_path / "q.wav", tmp_path / "a.wav", tmp_path / "events.jsonl"
    sf.write(str(question), np.concatenate([synthesize(QUESTIONS[0]), np.zeros(12000, np.float32)]), 24000)
    shape = VllmTurnBasedShape(embedded_engine())
    with served(shape.handler) as url:
        result = omni("talk", "--server", url, "--vad", "server", "--input-file", str(question),
                      "--output-file", str(said), "--transcript", str(log))
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines().count("omni talk: the server does not detect turns; using client VAD") == 1
    sent = [e["type"] for e in shape.received[0]]
    assert sent.count("input_audio_buffer.commit") == sent.count("response.create") == 1
    answer = answers(events_of(log))
    assert len(answer) == 1 and answer[0].strip()
    samples, rate = sf.read(str(said), dtype="float32")
    assert len(samples) > rate // 2 and judge.cer_of(answer[0], samples, rate) < 0.2


def test_list_devices_shows_the_pulseaudio_devices(omni, pulse):
    result = omni("talk", "--list-devices", env=pulse.env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines and all(line[:3].strip().isdigit() for line in lines)
    assert any(" pulse " in line or " default " in line for line in lines), lines
