"""The duplex answers on the speaker, and the server told how much of each the listener heard:
`playback.ack` with the cumulative `played_ms` every ACK_SECONDS while an answer plays, when it
has played out, and at every cut (with `truncate` where the server can shorten its stored answer),
so the history the server keeps is what was heard."""

import time
from collections.abc import Awaitable, Callable

from omnicli.errors import OmniError
from omnicli.protocol.duplex import ClientEvent
from omnicli.talk.playing import Playing

ACK_SECONDS = 0.25
"""How often `playback.ack` reports progress while an answer plays."""


class SpeakerAcks:
    """The answers on the speaker, oldest first, and what the server was told of each."""

    def __init__(self, speaker, send: Callable[[dict], Awaitable[None]], truncates: Callable[[], bool]) -> None:
        """`truncates`: whether the server can shorten a stored answer to what was heard (its capabilities)."""
        self.speaker = speaker
        self.on_speaker: list[Playing] = []
        self._send = send
        self._truncates = truncates
        self._last_ack_at = 0.0

    @property
    def newest(self) -> Playing | None:
        """The newest answer on the speaker."""
        return self.on_speaker[-1] if self.on_speaker else None

    def playing(self, response_id: str, item_id: str | None) -> Playing:
        """The answer `response_id` on the speaker; a new one starts after what the speaker holds."""
        newest = self.newest
        if newest is None or newest.response_id != response_id:
            newest = Playing.after(self.speaker, response_id, item_id)
            self.on_speaker.append(newest)
        return newest

    def of(self, response_id: str | None) -> Playing | None:
        """The answer `response_id` if it is on the speaker."""
        return next((p for p in self.on_speaker if p.response_id == response_id), None)

    async def follow(self) -> None:
        """One look at the speaker: progress acknowledged when due, answers played out acknowledged and let go."""
        due = time.monotonic() - self._last_ack_at >= ACK_SECONDS
        for playing in list(self.on_speaker):
            finished = playing.done and playing.played(self.speaker) >= playing.samples
            if finished or due:
                await self.ack(playing)
            if finished and playing in self.on_speaker:
                self.on_speaker.remove(playing)

    async def cut(self) -> list[tuple[Playing, int]]:
        """The user talked over them: what was not heard is dropped from the speaker, and the server
        told how much of each was heard. Each answer cut, with the samples of it heard."""
        cut = [(playing, playing.played(self.speaker)) for playing in self.on_speaker]
        self.speaker.flush()
        self.on_speaker = []
        for playing, _ in cut:
            await self.ack(playing, cut=True)
        return cut

    async def ack_all(self) -> None:
        """At the end: what was played of each answer, sent if the connection still takes it."""
        for playing in self.on_speaker:
            await self.ack(playing, quietly=True)

    async def ack(self, playing: Playing, *, cut: bool = False, quietly: bool = False) -> None:
        """`playback.ack` with the cumulative `played_ms` (when it moved, and always at a cut)."""
        played = playing.played_ms(self.speaker)
        if played == playing.acked_ms and not cut:
            return
        playing.acked_ms = played
        self._last_ack_at = time.monotonic()
        event: dict = {"type": ClientEvent.PLAYBACK_ACK.value, "response_id": playing.response_id,
                       "played_ms": played, "committed_ms": played}
        if playing.item_id:
            event["item_id"] = playing.item_id
        if cut and self._truncates():
            event["truncate"] = True
        try:
            await self._send(event)
        except OmniError:
            if not quietly:
                raise
