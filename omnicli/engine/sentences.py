"""Split text into sentences, the unit every voice speaks in: the first can play while the
rest is synthesized, and a long text shows progress one sentence at a time."""

import re
import textwrap

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+")
_MAX_CHARS = 200
"""Piper's memory grows with the square of a piece's length (measured: +150 MB for 200 characters,
+300 MB for 400, +690 MB for 1,000), so no piece is longer than this."""
_SOFT_BREAK = re.compile(r"(?<=[,;:])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences in order, stripped, none empty; paragraphs and lines always break.

    A run-on longer than a few hundred characters is cut further, at commas where it has them and
    at spaces where it has not, so no piece keeps the listener waiting and the work (and memory)
    of each piece is bounded whatever the text.
    """
    sentences: list[str] = []
    for line in text.splitlines():
        for sentence in _SENTENCE_END.split(line):
            sentences.extend(_cut_long(sentence.strip()))
    return [s for s in sentences if s]


def _cut_long(sentence: str) -> list[str]:
    if len(sentence) <= _MAX_CHARS:
        return [sentence]
    return _pack(_SOFT_BREAK.split(sentence), " ", _cut_words)


def _cut_words(clause: str) -> list[str]:
    if len(clause) <= _MAX_CHARS:
        return [clause]
    return _pack(clause.split(), " ", lambda word: textwrap.wrap(word, _MAX_CHARS))


def _pack(parts: list[str], joiner: str, cut) -> list[str]:
    """Join `parts` greedily into pieces of at most _MAX_CHARS; a part too long alone is `cut`."""
    pieces: list[str] = []
    current = ""
    for part in parts:
        for small in cut(part) if len(part) > _MAX_CHARS else [part]:
            if current and len(current) + len(small) + len(joiner) > _MAX_CHARS:
                pieces.append(current)
                current = small
            else:
                current = f"{current}{joiner}{small}".strip()
    if current:
        pieces.append(current)
    return pieces


_FIRST_CUT_MIN_CHARS = 16


class SentenceChunker:
    """Turns a stream of text pieces (LLM tokens) into whole sentences as soon as each ends.

    The very first piece of speech may end at a comma once it is a few words long: the listener
    hears the answer start sooner, and later sentences are spoken whole.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._first = True

    def feed(self, piece: str) -> list[str]:
        self._buffer += piece
        ready = self._take()
        if ready:
            self._first = False
        return ready

    def _take(self) -> list[str]:
        boundary = None
        for match in _SENTENCE_END.finditer(self._buffer):
            boundary = match.end()
        newline = self._buffer.rfind("\n")
        if newline >= 0 and (boundary is None or newline + 1 > boundary):
            boundary = newline + 1
        if boundary is None and self._first:
            for match in _SOFT_BREAK.finditer(self._buffer):
                if match.start() >= _FIRST_CUT_MIN_CHARS:
                    boundary = match.end()
                    break
        if boundary is None:
            if len(self._buffer) <= _MAX_CHARS:
                return []
            boundary = len(self._buffer)
        done, self._buffer = self._buffer[:boundary], self._buffer[boundary:]
        return split_sentences(done)

    def flush(self) -> list[str]:
        rest, self._buffer = self._buffer, ""
        return split_sentences(rest)
