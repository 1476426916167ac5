"""Turn commits the duplex server has not confirmed yet: one written as the socket dropped may never
have reached it, so once a resume's replay has had time to confirm it and has not, it is sent again."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from omnicli.talk.duplex.link import DuplexLink
from omnicli.talk.loop import POLL_SECONDS

log = logging.getLogger("omni")

REPLAY_SETTLE_S = 0.5
"""After a resume, how long the replay has to confirm a commit sent as the socket dropped."""


@dataclass
class SentCommit:
    """A commit the server has not confirmed yet (`input_audio_buffer.committed`, or an answer)."""

    event: dict
    resumes: int
    """The link's resumes when it was sent: a later one may have lost it."""
    resumed_at: float | None = None


class UnconfirmedCommits:
    """Keeps the latest commit until the server confirms it, and sends it again (once) when a resume lost it."""

    def __init__(self, link: DuplexLink, send: Callable[[dict], Awaitable[None]]) -> None:
        self.link = link
        self._send = send
        self.pending: SentCommit | None = None

    def sent(self, commit: dict) -> None:
        """`commit` is being sent (recorded before: its confirmation may come while it is sent)."""
        self.pending = SentCommit(commit, self.link.resumes)

    def settled(self) -> None:
        """Confirmed by the server, or made moot by a new turn (its commit carries what a lost one had)."""
        self.pending = None

    async def watch(self) -> None:
        """Send a commit again once a resume's replay has had `REPLAY_SETTLE_S` to confirm it and has not."""
        while True:
            await asyncio.sleep(POLL_SECONDS)
            commit = self.pending
            if commit is None or self.link.resumes == commit.resumes:
                continue
            if commit.resumed_at is None:
                commit.resumed_at = time.monotonic()
            elif time.monotonic() - commit.resumed_at >= REPLAY_SETTLE_S:
                self.pending = None
                log.debug("duplex: the commit sent as the connection dropped was not confirmed: sending it again")
                await self._send(commit.event)
