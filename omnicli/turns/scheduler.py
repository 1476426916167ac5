"""Who may use the cores before a turn is committed: one `AnswerScheduler` per process, passed
to every realtime session in it (both lanes), counts what is listening, transcribing early and
answering, and from that says whether work that may be thrown away is worth starting now."""

import weakref
from collections.abc import Iterator
from contextlib import contextmanager


class AnswerScheduler:
    """Decides, for all the realtime sessions of one process together, whether an early
    transcript may start at a short pause and whether an answer may begin before it is asked for."""

    def __init__(self) -> None:
        self._listening: weakref.WeakSet = weakref.WeakSet()
        self._transcribing = 0
        self._answering = 0

    def listen(self, listener: object) -> None:
        """A session's input starts listening (held weakly: a listener that is gone stops counting)."""
        self._listening.add(listener)

    def leave(self, listener: object) -> None:
        """A session's input stops listening (its session closed)."""
        self._listening.discard(listener)

    @contextmanager
    def transcribing(self) -> Iterator[None]:
        """Counts one early transcript for as long as it runs."""
        self._transcribing += 1
        try:
            yield
        finally:
            self._transcribing -= 1

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Counts one answer for as long as it is being made."""
        self._answering += 1
        try:
            yield
        finally:
            self._answering -= 1

    @property
    def answers_running(self) -> int:
        """Answers being made now, all sessions together."""
        return self._answering

    def idle(self) -> bool:
        """Nothing is transcribed early or answered: a transcript at the first short pause costs nobody."""
        return self._transcribing == 0 and self._answering == 0

    def one_talker(self) -> bool:
        """One session listens and nothing is being answered: hearing words while the user still
        speaks (thrown away at every new word) takes the cores from nobody."""
        return len(self._listening) <= 1 and self._answering == 0
