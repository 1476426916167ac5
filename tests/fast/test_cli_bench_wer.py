"""`omni bench-wer` through the real Typer app: a scripted voice, a scripted judge, a tiny
dataset; exact records, summary, resume, the WER gate, and places it cannot write."""

import json

import pytest

from omnicli.bench.journal import read_records
from omnicli.errors import ServerError

from cli_harness import ScriptedEngines, omni
from scripted import ScriptedEngine, tone

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
    assert [r.text for r in engines.scripted.requests] == SENTENCES
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
    assert [r.text for r in engines.scripted.requests] == SENTENCES[1:]
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
