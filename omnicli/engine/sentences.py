"""Split text into sentences, the unit every voice speaks in: the first can play while the
rest is synthesized, and a long text shows progress one sentence at a time. A streamed answer is
cut finer where a sentence runs long (`SentenceChunker`)."""

import re
import textwrap
import time
from collections.abc import Callable

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+")
_MAX_CHARS = 200
"""Piper's memory grows with a piece's length, so no piece is longer than this."""
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


_CLAUSE_MIN_CHARS = 16
"""The first piece may end at a comma (or ; :) once it is at least this long."""
_FIRST_WORDS_CHARS = 40
"""...and at a space once it is this long with no break in sight: about eight words, quick for the
thinker to write and for Piper to start speaking, so first audio never waits for a long first sentence."""
_FIRST_WAIT_SECONDS = 0.5
"""...and at a space, once it has three words, when the thinker has been writing it this long (a
thinker slowed by a busy machine): the first audio then comes within a second of the first words."""
_FIRST_WAIT_WORDS = 3
_LONG_CLAUSE_CHARS = 80
_LONG_WORDS_CHARS = 150
"""Later pieces: a long sentence is cut at a comma past 80 characters and at a space past 150, so
the next piece is ready before the one playing ends."""
RUNWAY_S = 0.8
"""...unless the audio still to play is shorter than this (a thinker slower than the voice): then
a later piece is cut as the first one is (a comma, about eight words, or three words), so its
synthesis starts before the speaker runs dry and the listener hears a short pause at a word
boundary, not a long silence in the middle of a sentence."""


class SentenceChunker:
    """Turns a stream of text pieces (LLM tokens) into speakable pieces as soon as each ends.

    A piece is a sentence, or a clause of a long one: the very first piece ends at a comma once it
    is a few words long, or at a space after about eight words, so the listener hears the answer
    start within a second whatever its first sentence; later sentences are spoken whole unless
    they run long, or unless the audio already spoken is about to run out (`runway`).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._buffer = ""
        self._first = True
        self._clock = clock
        self._began: float | None = None

    def feed(self, piece: str, runway: float | None = None) -> list[str]:
        """Add the next text piece; the pieces it completes, ready to speak, in order (often none).
        `runway`: seconds of the answer's audio still to play, where the caller knows it."""
        self._buffer += piece
        if self._began is None and self._buffer.strip():
            self._began = self._clock()
        ready = self._take(hurry=runway is not None and runway < RUNWAY_S)
        if ready:
            self._first = False
        return ready

    def _take(self, hurry: bool = False) -> list[str]:
        boundary = None
        for match in _SENTENCE_END.finditer(self._buffer):
            boundary = match.end()
        newline = self._buffer.rfind("\n")
        if newline >= 0 and (boundary is None or newline + 1 > boundary):
            boundary = newline + 1
        if boundary is None:
            boundary = self._clause_end(hurry)
        if boundary is None:
            if len(self._buffer) <= _MAX_CHARS:
                return []
            boundary = len(self._buffer)
        done, self._buffer = self._buffer[:boundary], self._buffer[boundary:]
        return split_sentences(done)

    def _clause_end(self, hurry: bool) -> int | None:
        """Where an unfinished sentence may be cut: a break past the clause length, else a space
        (one followed by more text: the word before it is whole) past the words length; a piece
        in a `hurry` is cut as the first one is."""
        first = self._first or hurry
        clause, words = (_CLAUSE_MIN_CHARS, _FIRST_WORDS_CHARS) if first else (_LONG_CLAUSE_CHARS, _LONG_WORDS_CHARS)
        for match in _SOFT_BREAK.finditer(self._buffer):
            if match.start() >= clause:
                return match.end()
        space = self._buffer.rfind(" ")
        if space >= words and self._buffer[:space].strip():
            return space + 1
        if first and space > 0 and len(self._buffer[:space].split()) >= _FIRST_WAIT_WORDS and (hurry or self._waited()):
            return space + 1
        return None

    def _waited(self) -> bool:
        return self._began is not None and self._clock() - self._began >= _FIRST_WAIT_SECONDS

    def flush(self) -> list[str]:
        """At the end of the stream: the text still held, as speakable pieces."""
        rest, self._buffer = self._buffer, ""
        return split_sentences(rest)


def first_piece(tokens: list[str], *, whole: bool) -> str | None:
    """The first speakable piece an answer streamed as `tokens` will say, as `SentenceChunker`
    cuts it when they come at once; None while it may still grow. `whole`: the answer ends there."""
    chunker = SentenceChunker(clock=lambda: 0.0)
    for token in tokens:
        if ready := chunker.feed(token):
            return ready[0]
    rest = chunker.flush() if whole else []
    return rest[0] if rest else None
