"""`items.jsonl`: one line per finished utterance, written as it finishes, so a killed run loses
nothing and `--resume` finishes the rest. A line cut short by the kill is dropped on resume."""

import json
import os
from pathlib import Path


class Journal:
    def __init__(self, out_dir: Path | None, *, resume: bool) -> None:
        self.records: list[dict] = []
        self._handle = None
        if out_dir is None:
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "items.jsonl"
        if resume and path.exists():
            self.records = _read_whole_lines(path)
            # Rewrite without a torn last line, so appends start on a clean line.
            path.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
            self._handle = open(path, "a", encoding="utf-8")
        else:
            self._handle = open(path, "w", encoding="utf-8")

    @property
    def done(self) -> set[str]:
        return {r["utt"] for r in self.records}

    def append(self, record: dict) -> None:
        self.records.append(record)
        if self._handle is not None:
            self._handle.write(json.dumps(record) + "\n")
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _read_whole_lines(path: Path) -> list[dict]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "utt" in record:
            records.append(record)
    return records
