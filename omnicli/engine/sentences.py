"""Split text into sentences, the unit every voice speaks in: the first can play while the
rest is synthesized, and a long text shows progress one sentence at a time."""

import re

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+")
_MAX_CHARS = 400
_SOFT_BREAK = re.compile(r"(?<=[,;:])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences in order, stripped, none empty; paragraphs and lines always break.

    A run-on longer than a few hundred characters is cut further at commas so that no single
    chunk keeps the listener waiting.
    """
    sentences: list[str] = []
    for line in text.splitlines():
        for sentence in _SENTENCE_END.split(line):
            sentences.extend(_cut_long(sentence.strip()))
    return [s for s in sentences if s]


def _cut_long(sentence: str) -> list[str]:
    if len(sentence) <= _MAX_CHARS:
        return [sentence]
    pieces: list[str] = []
    current = ""
    for part in _SOFT_BREAK.split(sentence):
        if current and len(current) + len(part) + 1 > _MAX_CHARS:
            pieces.append(current)
            current = part
        else:
            current = f"{current} {part}".strip()
    pieces.append(current)
    return pieces
