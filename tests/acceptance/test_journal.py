"""bench-wer's journal survives a crash at any point of a resume: it is appended to, never
rewritten, so every record written before stays on disk."""

import json
import subprocess
import sys
import textwrap

from omnicli.bench.journal import Journal, read_records

RECORDS = [{"utt": f"u{n:03d}", "status": "ok", "wer": 0.0, "hypothesis": "x" * 200} for n in range(40)]


def write_journal(folder, torn: bool) -> bytes:
    data = "".join(json.dumps(r) + "\n" for r in RECORDS) + ('{"utt": "u040", "sta' if torn else "")
    (folder / "items.jsonl").write_text(data)
    return data.encode()


def test_resume_that_dies_writing_loses_no_record(tmp_path):
    """The resuming process may write at most a few bytes before it dies (a file-size limit
    makes every longer write fail, as a kill mid-write would): whatever it did, the records stay."""
    before = write_journal(tmp_path, torn=True)
    script = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        from omnicli.bench.journal import Journal
        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) // 2}, {len(before) // 2}))
        journal = Journal(Path({str(tmp_path)!r}), resume=True)
        journal.append({{"utt": "u041", "status": "ok"}})
    """)
    died = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert died.returncode != 0  # it could not write, as if killed there
    assert (tmp_path / "items.jsonl").read_bytes()[: len(before)] == before
    assert read_records(tmp_path / "items.jsonl") == RECORDS


def test_resume_starts_a_fresh_line_after_a_torn_one(tmp_path):
    before = write_journal(tmp_path, torn=True)
    journal = Journal(tmp_path, resume=True)
    assert journal.done == {r["utt"] for r in RECORDS}
    journal.append({"utt": "u040", "status": "ok"})
    journal.close()
    assert (tmp_path / "items.jsonl").read_bytes() == before + b'\n{"utt": "u040", "status": "ok"}\n'
    assert read_records(tmp_path / "items.jsonl") == [*RECORDS, {"utt": "u040", "status": "ok"}]


def test_resume_of_a_clean_journal_only_appends(tmp_path):
    before = write_journal(tmp_path, torn=False)
    journal = Journal(tmp_path, resume=True)
    journal.append({"utt": "u040"})
    journal.close()
    assert (tmp_path / "items.jsonl").read_bytes() == before + b'{"utt": "u040"}\n'


def test_a_fresh_run_starts_an_empty_journal(tmp_path):
    write_journal(tmp_path, torn=False)
    journal = Journal(tmp_path, resume=False)
    journal.close()
    assert journal.records == [] and (tmp_path / "items.jsonl").read_bytes() == b""
