"""Benchmark inputs: a Seed-TTS-eval `meta.lst`, or a plain text file with one sentence a line.

meta.lst lines are `utt|prompt_text|prompt_wav|infer_text[|extra]`; `#` comments and blank lines
are skipped; prompt wav paths are relative to the list. Malformed lines are reported with their
line numbers, skipped and counted, never guessed at.
"""

import random
from dataclasses import dataclass, field
from pathlib import Path

from omnicli.errors import UsageError


@dataclass(frozen=True)
class Item:
    """One utterance to synthesize and score, with its voice prompt when the dataset clones voices."""

    utt: str
    text: str
    """The text to synthesize, and the reference for scoring (Seed-TTS-eval's infer_text)."""
    line: int
    prompt_text: str | None = None
    prompt_wav: Path | None = None


@dataclass
class Dataset:
    """The utterances of a benchmark run and the lines skipped as malformed."""

    items: list[Item]
    malformed: list[str] = field(default_factory=list)
    """'line N: why' for each skipped line."""

    @property
    def has_prompts(self) -> bool:
        """Whether any utterance brings a voice prompt to clone."""
        return any(item.prompt_wav for item in self.items)


def load_dataset(path: str | Path, *, limit: int | None = None, shuffle: bool = False, seed: int = 0) -> Dataset:
    """Read a meta.lst or a plain text file into utterances, optionally shuffled and cut to `limit`."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"dataset not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read dataset {path}: {exc}") from exc
    content = [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]
    if any("|" in line for _, line in content):
        dataset = _meta_list(content, path.parent)
    else:
        dataset = Dataset([Item(f"line_{n:04d}", line, n) for n, line in content])
    if not dataset.items:
        raise UsageError(f"dataset {path} holds no utterances")
    if shuffle:
        random.Random(seed).shuffle(dataset.items)
    if limit is not None:
        dataset.items = dataset.items[:limit]
    return dataset


def _meta_list(content: list[tuple[int, str]], root: Path) -> Dataset:
    dataset = Dataset([])
    seen: set[str] = set()
    for number, line in content:
        fields = line.split("|")
        if len(fields) < 4:
            dataset.malformed.append(f"line {number}: expected utt|prompt_text|prompt_wav|infer_text, got {len(fields)} fields")
            continue
        utt, prompt_text, prompt_wav, text = (f.strip() for f in fields[:4])
        if not utt or not text:
            dataset.malformed.append(f"line {number}: empty utterance id or text")
            continue
        if utt in seen:
            dataset.malformed.append(f"line {number}: utterance id {utt!r} repeats an earlier line")
            continue
        seen.add(utt)
        dataset.items.append(Item(
            utt=utt, text=text, line=number,
            prompt_text=prompt_text or None,
            prompt_wav=(root / prompt_wav) if prompt_wav else None,
        ))
    return dataset
