"""Who gets the CPU cores when the thinker and the talker both want them.

On two cores the listener waits on one thing only: the first audio of an answer. Piper speaks
a short first piece far more slowly beside a generating LLM thread than alone, so while an
answer's first piece is synthesized the thinker pauses between two tokens; the text it would
have written meanwhile is not needed until that first piece has played. A pause is capped, so a
talker that never finishes cannot starve the thinker. While no speech is being synthesized
(before an answer's first piece, and between pieces) the thinker takes every core, since it
writes the first piece sooner with every thread than with one.
"""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_MAX_PAUSE_SECONDS = 2.0


class CorePriority:
    """Shares the cores between the thinker and the talker: speech first, the thinker otherwise."""

    def __init__(self) -> None:
        self._urgent = 0
        self._speaking = 0
        self._changed = threading.Condition()

    @contextmanager
    def urgent_speech(self) -> Iterator[None]:
        """While this is held, `thinker_turn` waits."""
        with self._changed:
            self._urgent += 1
        try:
            yield
        finally:
            with self._changed:
                self._urgent -= 1
                self._changed.notify_all()

    def thinker_turn(self) -> None:
        """Called by the thinker's thread before each token: returns at once unless speech is urgent."""
        with self._changed:
            self._changed.wait_for(lambda: self._urgent == 0, timeout=_MAX_PAUSE_SECONDS)

    @property
    def urgent(self) -> bool:
        """Whether urgent speech is being synthesized now, so the thinker waits."""
        return self._urgent > 0

    @contextmanager
    def speaking(self) -> Iterator[None]:
        """Held by the talker while it synthesizes a piece."""
        with self._changed:
            self._speaking += 1
        try:
            yield
        finally:
            with self._changed:
                self._speaking -= 1

    def thinker_threads(self) -> int:
        """The threads the thinker's next token may use: all cores while no speech is being made."""
        return THREADS.thinker if self._speaking else THREADS.thinker_prompt


PRIORITY = CorePriority()
"""One per process: the in-process stages share the machine's cores."""


@dataclass(frozen=True)
class ThreadBudget:
    """Threads per stage, decided together rather than by each library's default. The stages of
    one turn mostly run one after another (hear, then think while speaking), so each may use
    every core, except the thinker's token loop while the talker synthesizes beside it: it then
    keeps one core free for the talker (`CorePriority.thinker_threads`).
    Silero and Smart Turn (turns/vad.py, turns/smart_turn.py) take one thread each: they run
    on every 32 ms of microphone audio, beside everything else."""

    cores: int

    @property
    def thinker(self) -> int:
        """Threads for the thinker's tokens while the talker synthesizes: one core left for it."""
        return max(1, self.cores - 1)

    @property
    def thinker_prompt(self) -> int:
        """Threads for reading a prompt, and for tokens while no speech is being made."""
        return self.cores

    @property
    def talker(self) -> int:
        """Threads for the Piper voice's ONNX session."""
        return self.cores

    @property
    def asr(self) -> int:
        """Threads for Whisper (CTranslate2)."""
        return self.cores

    @property
    def turn_text(self) -> int:
        """Reading whether a turn's words are finished (turns/text_turn.py): between hearing and
        thinking, with nothing else to do."""
        return self.cores


THREADS = ThreadBudget(os.cpu_count() or 2)
