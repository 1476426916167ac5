"""`omni bench-wer` through the real Typer app: a scripted voice, a scripted judge, a tiny
dataset; exact records, summary, resume, the WER gate, and places it cannot write."""

import asyncio
import json

import pytest

from omnicli.bench.journal import read_records
from omnicli.errors import ServerError
from tests.helpers.cli_harness import ScriptedEngines, omni
from tests.helpers.scripted import ScriptedEngine, tone

SENTENCES = ["The cat sat.", "A dog ran far.", "Birds sing."]
HEARD = ["the cat sat", "a dog ran away", "birds sing"]


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    return path


def engines_for(heard=HEARD, speech=None) -> ScriptedEngines:
    return ScriptedEngines(ScriptedEngine(speech=speech or [tone(0.5)]), judge=ScriptedEngine(transcripts=list(heard)))


def lines_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_scores_every_utterance_and_writes_journal_summary_and_report(tmp_path, dataset):
    engines = engines_for()
    out, report = tmp_path / "run", tmp_path / "report.html"
    result = omni("bench-wer", "-d", dataset, "--out", out, "--report", report, "--json", engines=engines)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["utterances"], summary["scored"]) == (3, 3)
    assert summary["wer_mean"] == pytest.approx((0 + 0.25 + 0) / 3)  # "far" heard as "away"
    assert summary["wer_corpus"] == pytest.approx(1 / 9)
    assert summary["target"] == "embedded" and summary["audio_seconds"] == pytest.approx(1.5)
    assert [r.text for r in engines.scripted.requests] == SENTENCES[:1] + SENTENCES  # the first: the warm-up
    assert engines.scripted_judge.requests == [("transcribe", 0.5, 24000, "en", False)] * 3
    records = lines_of(out / "items.jsonl")
    assert [(r["utt"], r["status"], r["hypothesis"]) for r in records] == [
        ("line_0001", "ok", "the cat sat"), ("line_0002", "ok", "a dog ran away"), ("line_0003", "ok", "birds sing")]
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "line_0002" in report.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "run", "sentences.txt"]


def test_failed_requests_are_recorded_not_fatal(tmp_path, dataset):
    speech = lambda req: [ServerError("server answered 500: boom")] if req.text == "A dog ran far." else [tone(0.5)]  # noqa: E731
    engines = engines_for(heard=["the cat sat", "birds sing"], speech=speech)
    result = omni("bench-wer", "-d", dataset, "--json", engines=engines)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["failures"] == {"request_failed": 1, "no_audio": 0, "asr_failed": 0}
    assert result.stderr == "omni: line_0002 (line 2): request_failed: server answered 500: boom\n"


def test_wer_gate_exits_3(dataset):
    result = omni("bench-wer", "-d", dataset, "--json", "--max-wer", "0.05", engines=engines_for())
    assert result.exit_code == 3
    assert result.stderr == "omni: mean WER 0.0833 is above --max-wer 0.05\n"


def test_resume_appends_after_a_torn_line_and_keeps_every_record(tmp_path, dataset):
    out = tmp_path / "run"
    out.mkdir()
    first = {"utt": "line_0001", "line": 1, "reference": SENTENCES[0], "status": "ok", "wer": 0.0, "substitutions": 0,
             "deletions": 0, "insertions": 0, "hits": 3}
    before = (json.dumps(first) + "\n" + '{"utt": "line_0002", "line": 2, "refer').encode()  # killed mid-line
    (out / "items.jsonl").write_bytes(before)
    engines = engines_for(heard=["a dog ran far", "birds sing"])
    result = omni("bench-wer", "-d", dataset, "--out", out, "--resume", "--json", engines=engines)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == "omni: resuming: 1 utterances already scored, 2 to go\n"
    assert [r.text for r in engines.scripted.requests] == SENTENCES[1:2] + SENTENCES[1:]  # the first: the warm-up
    after = (out / "items.jsonl").read_bytes()
    assert after.startswith(before + b"\n")  # appended to, never rewritten
    assert [r["utt"] for r in read_records(out / "items.jsonl")] == ["line_0001", "line_0002", "line_0003"]
    assert json.loads(result.stdout)["scored"] == 3


def test_out_that_is_a_file_is_one_line(tmp_path, dataset):
    (tmp_path / "taken").write_text("")
    engines = engines_for()
    result = omni("bench-wer", "-d", dataset, "--out", tmp_path / "taken" / "run", engines=engines)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"omni: error: cannot make --out {tmp_path / 'taken' / 'run'}: Not a directory\n"
    assert engines.scripted.requests == []


@pytest.mark.parametrize("where", ["missing/report.html", "taken/report.html"])
def test_report_in_a_missing_folder_fails_before_the_run(tmp_path, dataset, where):
    (tmp_path / "taken").write_text("")
    report = tmp_path / where
    engines = engines_for()
    result = omni("bench-wer", "-d", dataset, "--report", report, engines=engines)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"omni: error: cannot write --report {report}: no such folder {report.parent}\n"
    assert engines.scripted.requests == []


def test_a_journal_that_cannot_be_opened_is_one_line(tmp_path, dataset):
    out = tmp_path / "run"
    (out / "items.jsonl").mkdir(parents=True)  # something in the journal's way
    engines = engines_for()
    result = omni("bench-wer", "-d", dataset, "--out", out, "--resume", engines=engines)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"omni: error: cannot write the journal {out / 'items.jsonl'}: Is a directory\n"
    assert engines.scripted.requests == []


# At scale: sweeps, open-loop arrivals, what a listener would hear


def test_a_concurrency_sweep_runs_once_per_level_each_in_its_folder(tmp_path, dataset):
    engines = engines_for(heard=HEARD * 3)
    out = tmp_path / "run"
    result = omni("bench-wer", "-d", dataset, "-c", "1,2,3", "--out", out, "--json", engines=engines)
    assert result.exit_code == 0, result.stderr
    sweep = json.loads(result.stdout)
    assert [run["max_concurrency"] for run in sweep["runs"]] == [1, 2, 3]
    assert [(run["scored"], run["completed"], run["failed"], run["request_rate"]) for run in sweep["runs"]] == [(3, 3, 0, None)] * 3
    assert [r.text for r in engines.scripted.requests] == SENTENCES[:1] + SENTENCES * 3  # one warm-up for all levels
    assert sorted(p.name for p in out.iterdir()) == ["c1", "c2", "c3", "summary.json"]
    assert json.loads((out / "summary.json").read_text()) == sweep
    assert json.loads((out / "c2" / "summary.json").read_text()) == sweep["runs"][1]
    assert [r["utt"] for r in lines_of(out / "c3" / "items.jsonl")] == ["line_0001", "line_0002", "line_0003"]


def test_the_sweep_prints_its_levels_side_by_side(dataset):
    result = omni("bench-wer", "-d", dataset, "-c", "1,4", engines=engines_for(heard=HEARD * 2))
    assert result.exit_code == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "c=1" in line)
    assert header.index("c=1") < header.index("c=4")
    scored = next(line for line in result.stdout.splitlines() if "utterances scored" in line)
    assert scored.count("3 of 3") == 2


def test_rate_mode_starts_requests_open_loop_with_no_limit_by_default(dataset):
    engines = engines_for()
    result = omni("bench-wer", "-d", dataset, "--rate", "50", "--seed", "7", "--json", engines=engines)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["request_rate"], summary["max_concurrency"], summary["completed"]) == (50.0, None, 3)
    assert summary["duration"] > 0 and summary["request_throughput"] == pytest.approx(3 / summary["duration"])
    assert summary["total_audio_duration_s"] == pytest.approx(1.5)
    assert summary["audio_throughput"] == pytest.approx(1.5 / summary["duration"])


def test_arrivals_are_a_seeded_poisson_process():
    from omnicli.bench.runner import arrival_times

    times = arrival_times(2000, 4.0, seed=1)
    assert times == arrival_times(2000, 4.0, seed=1) != arrival_times(2000, 4.0, seed=2)
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert times[0] == 0 and all(gap > 0 for gap in gaps)
    assert sum(gaps) / len(gaps) == pytest.approx(0.25, rel=0.1)  # mean gap 1/rate
    assert arrival_times(3, None, seed=1) == [0.0, 0.0, 0.0]  # closed loop: the limit paces them


def test_underruns_are_the_gaps_a_player_starting_at_the_first_packet_hears():
    from omnicli.bench.playback import Underruns, underruns

    assert underruns([]) == Underruns(0, 0.0)
    assert underruns([(0.5, 2.0)]) == Underruns(0, 0.0)  # one whole answer plays through
    assert underruns([(0.5, 1.0), (1.0, 1.0), (2.5, 1.0)]) == Underruns(0, 0.0)  # always ahead
    gaps = underruns([(1.0, 0.5), (2.0, 0.5), (2.25, 1.0), (4.0, 0.5)])  # ends 1.5 | 2.5 | 3.5
    assert (gaps.count, gaps.seconds, gaps.long, gaps.longest) == (2, pytest.approx(0.5 + 0.5), 2, pytest.approx(0.5))
    short = underruns([(0.0, 0.5), (0.55, 0.5), (1.3, 0.5)])  # a 50 ms gap, then a 250 ms one
    assert (short.count, short.long, short.longest) == (2, 1, pytest.approx(0.25))


def test_serving_figures_carry_vllm_bench_names():
    from omnicli.bench.serving import serving_figures

    records = [
        {"status": "ok", "ttfa": 0.1, "generation_seconds": 1.0, "audio_seconds": 2.0, "rtf": 0.5, "underruns": 0, "underrun_seconds": 0.0},
        {"status": "ok", "ttfa": 0.3, "generation_seconds": 3.0, "audio_seconds": 2.0, "rtf": 1.5, "underruns": 2, "underrun_seconds": 0.4,
         "long_gaps": 1, "longest_gap_seconds": 0.35},
        {"status": "request_failed", "error": "boom"},
    ]
    figures = serving_figures(records, 4.0, concurrency=2, rate=None)
    assert figures == {
        "completed": 2, "failed": 1, "max_concurrency": 2, "request_rate": None, "duration": 4.0,
        "request_throughput": 0.5, "total_audio_duration_s": 4.0, "audio_throughput": 1.0,
        "mean_audio_ttfp_ms": pytest.approx(200), "median_audio_ttfp_ms": pytest.approx(200), "p99_audio_ttfp_ms": pytest.approx(298),
        "mean_audio_rtf": 1.0, "median_audio_rtf": 1.0, "p99_audio_rtf": pytest.approx(1.49),
        "mean_audio_underrun_s": 0.2, "median_audio_underrun_s": 0.2, "p99_audio_underrun_s": pytest.approx(0.396),
        "audio_underrun_count": 2, "total_audio_underrun_s": 0.4, "audio_continuity_ok_rate": 0.5,
        "long_gap_count": 1, "longest_gap_s": 0.35,
    }


class Stuttering(ScriptedEngine):
    """A voice that says a little, stalls, then says the rest: a listener hears one gap."""

    async def speech(self, req):
        self.requests.append(req)
        yield tone(0.01)
        await asyncio.sleep(0.3)
        yield tone(0.5)


def test_a_stalled_stream_is_recorded_as_an_underrun_and_a_whole_answer_as_none(tmp_path, dataset):
    out = tmp_path / "run"
    result = omni("bench-wer", "-d", dataset, "--out", out, "--json", engines=ScriptedEngines(Stuttering(), judge=ScriptedEngine(transcripts=HEARD)))
    assert result.exit_code == 0, result.stderr
    records = lines_of(out / "items.jsonl")
    assert [(r["packets"], r["underruns"], r["long_gaps"]) for r in records] == [(2, 1, 1)] * 3
    assert all(r["underrun_seconds"] >= 0.25 for r in records)  # the stall, less the 10 ms that played
    assert all(r["longest_gap_seconds"] == r["underrun_seconds"] for r in records)
    summary = json.loads(result.stdout)
    assert (summary["audio_underrun_count"], summary["audio_continuity_ok_rate"], summary["long_gap_count"]) == (3, 0.0, 3)
    assert "gaps over 100 ms / longest gap (s)" in omni("bench-wer", "-d", dataset, engines=ScriptedEngines(
        Stuttering(), judge=ScriptedEngine(transcripts=HEARD))).stdout

    result = omni("bench-wer", "-d", dataset, "--json", engines=engines_for())
    whole = json.loads(result.stdout)
    assert (whole["audio_underrun_count"], whole["total_audio_underrun_s"], whole["audio_continuity_ok_rate"]) == (0, 0.0, 1.0)


@pytest.mark.parametrize("args, line", [
    (["-c", "0"], "--concurrency takes whole numbers from 1 to 256, separated by commas; got '0'"),
    (["-c", "1,x"], "--concurrency takes whole numbers from 1 to 256, separated by commas; got '1,x'"),
    (["-c", "4,8,4"], "--concurrency names 4 twice"),
    (["--rate", "0"], "--rate must be above 0 requests a second, got 0"),
    (["--rate", "2", "--audio-dir", "."], "--rate and a --concurrency list measure synthesis; --audio-dir only scores existing files"),
])
def test_bad_load_options_are_one_line(dataset, args, line):
    engines = engines_for()
    result = omni("bench-wer", "-d", dataset, *args, engines=engines)
    assert (result.exit_code, result.stderr) == (2, f"omni: error: {line}\n")
    assert engines.scripted.requests == []


def test_max_wer_gates_every_level_of_a_sweep(dataset):
    result = omni("bench-wer", "-d", dataset, "-c", "1,2", "--json", "--max-wer", "0.05", engines=engines_for(heard=HEARD * 2))
    assert result.exit_code == 3
    assert result.stderr == ("omni: mean WER 0.0833 at c=1 is above --max-wer 0.05\n"
                             "omni: mean WER 0.0833 at c=2 is above --max-wer 0.05\n")


def test_a_sweep_resumes_level_by_level(tmp_path, dataset):
    out = tmp_path / "run"
    first = omni("bench-wer", "-d", dataset, "-c", "1,2", "--out", out, "--json", engines=engines_for(heard=HEARD * 2))
    assert first.exit_code == 0, first.stderr
    (out / "c2" / "items.jsonl").write_text((out / "c2" / "items.jsonl").read_text().splitlines()[0] + "\n")
    engines = engines_for(heard=HEARD[1:])
    again = omni("bench-wer", "-d", dataset, "-c", "1,2", "--out", out, "--resume", "--json", engines=engines)
    assert again.exit_code == 0, again.stderr
    assert again.stderr == ("omni: resuming at c=1: 3 utterances already scored, 0 to go\n"
                            "omni: resuming at c=2: 1 utterances already scored, 2 to go\n")
    assert [r.text for r in engines.scripted.requests] == SENTENCES[1:2] + SENTENCES[1:]  # the first: the warm-up
    c1, c2 = json.loads(again.stdout)["runs"]
    assert (c1["scored"], c2["scored"]) == (3, 3)
    assert "completed" not in c1 and c2["completed"] == 2  # serving figures: this run's requests only


def test_a_run_is_set_beside_its_baseline_item_by_item(tmp_path, dataset):
    before, report = tmp_path / "before", tmp_path / "report.html"
    assert omni("bench-wer", "-d", dataset, "--out", before, engines=engines_for()).exit_code == 0
    perfect = ["the cat sat", "a dog ran far", "birds sing"]
    result = omni("bench-wer", "-d", dataset, "--json", "--baseline", before, "--report", report,
                  engines=engines_for(heard=perfect))
    assert result.exit_code == 0, result.stderr
    ab = json.loads(result.stdout)["ab"]
    assert (ab["baseline"], ab["paired"], ab["only_in_this_run"], ab["only_in_baseline"]) == (
        str(before / "items.jsonl"), 3, 0, 0)
    wer = ab["figures"]["wer"]
    assert (wer["baseline"], wer["this_run"], wer["difference"]) == (pytest.approx(0.25 / 3), 0.0, pytest.approx(-0.25 / 3))
    assert wer["verdict"] == "no significant change" and wer["ci95"][1] == 0.0  # one item of three changed: not enough
    assert [item["wer"] for item in ab["items"]] == [[0.0, 0.0], [0.25, 0.0], [0.0, 0.0]]
    assert set(ab["figures"]) == {"wer", "ttfa", "rtf"}
    page = report.read_text()
    assert "Against the baseline" in page and "not significant" in page


def test_fail_if_worse_exits_4_on_a_significant_regression_and_prints_the_table(tmp_path):
    sentences = [f"Sentence number {n} is here." for n in range(8)]
    dataset = tmp_path / "eight.txt"
    dataset.write_text("\n".join(sentences) + "\n")
    before = tmp_path / "before"
    right = [s.lower().rstrip(".") for s in sentences]
    assert omni("bench-wer", "-d", dataset, "--out", before, engines=engines_for(heard=right)).exit_code == 0
    wrong = [s.replace("here", "gone") for s in right]
    result = omni("bench-wer", "-d", dataset, "--baseline", before, "--fail-if-worse", engines=engines_for(heard=wrong))
    assert result.exit_code == 4, result.stderr
    assert result.stderr.splitlines()[0] == ("omni: WER is significantly worse than the baseline: 0.00 % -> 20.00 % "
                                             "(difference +20.00 pts, 95 % interval +20.00 pts to +20.00 pts, 8 utterances)")
    assert "against the baseline: 8 utterances in both" in result.stdout and "worse" in result.stdout
    without_gate = omni("bench-wer", "-d", dataset, "--baseline", before, engines=engines_for(heard=wrong))
    assert without_gate.exit_code == 0, without_gate.stderr


@pytest.mark.parametrize(("args", "needle"), [
    (["--fail-if-worse"], "--fail-if-worse needs --baseline RUN"),
    (["--baseline", "/nonexistent/run"], "--baseline /nonexistent/run: no items.jsonl there"),
])
def test_baseline_usage_errors_are_one_line_before_any_work(dataset, args, needle):
    engines = engines_for()
    result = omni("bench-wer", "-d", dataset, *args, engines=engines)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"omni: error: {needle} (give an earlier run's --out folder or its items.jsonl)"
                                                  if "nonexistent" in needle else f"omni: error: {needle}"]
    assert engines.scripted.requests == []


def test_mos_is_predicted_per_utterance_and_summarised_with_an_interval(tmp_path, dataset):
    out, report = tmp_path / "run", tmp_path / "report.html"
    speech = lambda req: [tone(0.5 if req.text == "The cat sat." else 1.0)]  # noqa: E731
    result = omni("bench-wer", "-d", dataset, "--mos", "--out", out, "--report", report, "--json",
                  engines=engines_for(speech=speech))
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [(r["utt"], r["mos"], r["mos_ovrl"]) for r in lines_of(out / "items.jsonl")] == [
        ("line_0001", 1.5, 1.0), ("line_0002", 2.0, 1.0), ("line_0003", 2.0, 1.0)]
    mos = summary["mos_mean"]
    assert mos["mean"] == pytest.approx(5.5 / 3) and 1.5 <= mos["ci95"][0] <= mos["mean"] <= mos["ci95"][1] <= 2.0
    assert summary["mos_ovrl_mean"] == {"mean": 1.0, "ci95": [1.0, 1.0]}
    assert (summary["mos_scored"], summary["mos_model"]) == (3, "MOS by length")
    assert "<th>MOS</th>" in report.read_text() and "MOS, DNSMOS P.808" in report.read_text()
    plain = omni("bench-wer", "-d", dataset, engines=engines_for())
    assert plain.exit_code == 0 and "MOS" not in plain.stdout  # only asked for with --mos


def test_a_higher_mos_is_better_in_the_comparison(tmp_path):
    sentences = [f"Sentence number {n} is here." for n in range(8)]
    dataset = tmp_path / "eight.txt"
    dataset.write_text("\n".join(sentences) + "\n")
    heard = [s.lower().rstrip(".") for s in sentences]
    before = tmp_path / "before"
    first = omni("bench-wer", "-d", dataset, "--mos", "--out", before,
                 engines=engines_for(heard=heard, speech=[tone(0.5)]))
    assert first.exit_code == 0, first.stderr
    result = omni("bench-wer", "-d", dataset, "--mos", "--baseline", before, "--json",
                  engines=engines_for(heard=heard, speech=[tone(1.0)]))
    assert result.exit_code == 0, result.stderr
    mos = json.loads(result.stdout)["ab"]["figures"]["mos"]
    assert (mos["baseline"], mos["this_run"], mos["difference"], mos["verdict"]) == (1.5, 2.0, 0.5, "better")
    assert json.loads(result.stdout)["ab"]["items"][0]["mos"] == [1.5, 2.0]


def test_sim_compares_each_clip_with_its_prompt_and_needs_prompts(tmp_path, dataset):
    import numpy as np
    import soundfile

    for name, seconds in (("one.wav", 1.0), ("two.wav", 0.25)):
        soundfile.write(tmp_path / name, np.full(int(seconds * 16000), 0.1, np.float32), 16000)
    meta = tmp_path / "meta.lst"
    meta.write_text(f"a|said one|{tmp_path / 'one.wav'}|The cat sat.\nb|said two|{tmp_path / 'two.wav'}|A dog ran far.\n")
    out = tmp_path / "run"
    result = omni("bench-wer", "-d", meta, "--sim", "--out", out, "--json", engines=engines_for(heard=HEARD[:2]))
    assert result.exit_code == 0, result.stderr
    assert [(r["utt"], r["sim"]) for r in lines_of(out / "items.jsonl")] == [("a", 0.5), ("b", 0.5)]  # 0.5 s clips
    summary = json.loads(result.stdout)
    assert summary["sim_mean"] == {"mean": 0.5, "ci95": [0.5, 0.5]}
    assert (summary["sim_scored"], summary["sim_model"]) == (2, "similarity by length")
    assert "mos_mean" not in summary
    refused = omni("bench-wer", "-d", dataset, "--sim", engines=engines_for())
    assert refused.exit_code == 2
    assert refused.stderr == "omni: error: --sim compares each clip with its prompt wav: give a meta.lst with prompt wavs\n"


def test_published_figures_are_shown_beside_the_run_labelled_as_published(tmp_path, dataset):
    report = tmp_path / "report.html"
    result = omni("bench-wer", "-d", dataset, "--published", "--report", report, engines=engines_for())
    assert result.exit_code == 0, result.stderr
    assert "published Seed-TTS-eval figures, not measured here" in result.stdout
    assert "Seed-TTS" in result.stdout and "2.25 %" in result.stdout and "FunAudioLLM/CosyVoice" in result.stdout
    page = report.read_text()
    assert "Published Seed-TTS-eval figures (not measured here)" in page and "0.762" in page
    plain = omni("bench-wer", "-d", dataset, "--report", report, engines=engines_for())
    assert "published" not in plain.stdout.lower() and "Published" not in report.read_text()
