"""Long text to a speech server: pieces under its request limit, requested ahead, heard in order.

Servers cap `input` (OpenAI at 4,096 characters, `omni serve` too, others at 8,000), so a chapter
goes as several requests, cut where a reader pauses: between paragraphs, else between
sentences, else between words. A few pieces are requested ahead while earlier ones are written,
so the server is never idle, and never more than a few, so memory stays bounded.
"""

import asyncio
import dataclasses
import re
import textwrap
from collections.abc import AsyncGenerator, Callable

from omnicli.audio.chunk import AudioChunk
from omnicli.engine.base import Engine, SpeechRequest
from omnicli.engine.sentences import split_sentences

AHEAD = 3
"""Pieces in flight at once: the one being written and two more."""

_PARAGRAPH = re.compile(r"\n\s*\n")


def split_text(text: str, max_chars: int) -> list[str]:
    """`text` in pieces of at most `max_chars`, whole paragraphs where they fit, else whole
    sentences, else words (a word longer than the limit is cut)."""
    pieces: list[str] = []
    current = ""
    for paragraph in _PARAGRAPH.split(text.strip()):
        paragraph = paragraph.strip()
        units = [paragraph] if len(paragraph) <= max_chars else _sentences(paragraph, max_chars)
        joiner = "\n\n"
        for unit in units:
            if current and len(current) + len(joiner) + len(unit) <= max_chars:
                current += joiner + unit
            else:
                if current:
                    pieces.append(current)
                current = unit
            joiner = " "
    if current:
        pieces.append(current)
    return pieces


def _sentences(paragraph: str, max_chars: int) -> list[str]:
    units: list[str] = []
    for sentence in split_sentences(paragraph):
        units.extend([sentence] if len(sentence) <= max_chars else textwrap.wrap(sentence, max_chars))
    return units


def requests_for(request: SpeechRequest, max_chars: int) -> list[SpeechRequest]:
    """One request per piece of `request.text`, each otherwise the same."""
    return [dataclasses.replace(request, text=piece) for piece in split_text(request.text, max_chars)]


_END = object()


async def speak_ahead(
    engine: Engine, requests: list[SpeechRequest], *, ahead: int = AHEAD,
    finished: Callable[[SpeechRequest], None] = lambda request: None,
) -> AsyncGenerator[AudioChunk, None]:
    """The speech of every request, strictly in order, with up to `ahead` requests in flight;
    `finished(request)` after a piece's last chunk. The first failure ends it all."""
    queues: list[asyncio.Queue] = [asyncio.Queue() for _ in requests]
    tasks: list[asyncio.Task] = []

    async def fetch(index: int) -> None:
        try:
            async for chunk in engine.speech(requests[index]):
                queues[index].put_nowait(chunk)
        except Exception as exc:  # handed to the reader, who raises it in order
            queues[index].put_nowait(exc)
        else:
            queues[index].put_nowait(_END)

    def start(index: int) -> None:
        if index < len(requests):
            tasks.append(asyncio.create_task(fetch(index)))

    try:
        for index in range(ahead):
            start(index)
        for index, request in enumerate(requests):
            while (item := await queues[index].get()) is not _END:
                if isinstance(item, Exception):
                    raise item
                yield item
            finished(request)
            start(index + ahead)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
