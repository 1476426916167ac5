"""`items.jsonl`: one line per finished utterance, written as it finishes, so a killed run loses
nothing and `--resume` finishes the rest.

Resuming never rewrites the file: a kill at any moment must leave every finished record on disk.
A line cut short by an earlier kill stays where it is, the next record starts on a fresh line,
and readers skip lines that are not whole records.
"""

import json
import os
from pathlib import Path
from typing import TextIO

from omnicli.errors import OmniError


class Journal:
    """The run's finished records, in memory and appended durably to items.jsonl as each finishes."""

    def __init__(self, out_dir: Path | None, *, resume: bool) -> None:
        self.records: list[dict] = []
        self.path = out_dir / "items.jsonl" if out_dir is not None else None
        self._handle: TextIO | None = None
        if out_dir is None:
            return
        path = out_dir / "items.jsonl"
        try:
            if resume and path.exists():
                self.records = read_records(path)
                torn = _ends_mid_line(path)
                self._handle = open(path, "a", encoding="utf-8")
                if torn:
                    self._write("\n")
            else:
                self._handle = open(path, "w", encoding="utf-8")
        except OSError as exc:
            raise OmniError(f"cannot write the journal {path}: {exc.strerror or exc}") from exc

    @property
    def done(self) -> set[str]:
        """The utterance ids already finished, which a resumed run skips."""
        return {r["utt"] for r in self.records}

    def append(self, record: dict) -> None:
        """Keep a finished record and put it on disk before going on."""
        self.records.append(record)
        if self._handle is not None:
            try:
                self._write(json.dumps(record) + "\n")
            except OSError as exc:
                raise OmniError(f"cannot write the journal {self.path}: {exc.strerror or exc}") from exc

    def _write(self, text: str) -> None:
        assert self._handle is not None
        self._handle.write(text)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the journal file."""
        if self._handle is not None:
            self._handle.close()


def read_records(path: Path) -> list[dict]:
    """Every whole record in the journal; torn or foreign lines are skipped."""
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "utt" in record:
            records.append(record)
    return records


def _ends_mid_line(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return False
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"
