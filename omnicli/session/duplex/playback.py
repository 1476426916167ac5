"""Playback truth: how much of an answer's audio was generated, sent and (by `playback.ack`)
played, and how much of it the conversation history holds.

With `ack_only` the stored assistant turn is what the client says was played: its transcript is
cut where playback stopped (whole sentences heard, then a share of the one being spoken). With
`commit_all_on_done` the whole answer is stored at `response.done`. A truncating ack (after an
interruption) cuts the item under either policy. Without acks, the client is assumed to play in
real time from the first audio delta: that is how the server knows the assistant is still audible.
"""

import time

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import EventError
from omnicli.protocol.duplex import PlaybackCommitPolicy, playback
from omnicli.session.conversation import Item, heard_text

AUDIBLE_MARGIN_S = 0.3
"""Without acks, the answer counts as audible this long past its estimated end."""


class Ledger:
    """One answer's audio accounts: generated, played and committed to history."""

    def __init__(self, response_id: str, item: Item, policy: PlaybackCommitPolicy, speaks: bool) -> None:
        self.response_id = response_id
        self.item = item
        self.policy = policy if speaks else PlaybackCommitPolicy.COMMIT_ALL_ON_DONE
        self.generated_samples = 0
        self.played_ms = 0
        self.committed_ms = 0
        self.done = False
        self.truncated_at: int | None = None
        self._spoken: list[tuple[int, str]] = []
        self._first_audio_at: float | None = None
        self._acked = False
        self._stopped = False

    @property
    def generated_ms(self) -> int:
        """The audio generated so far, in milliseconds."""
        return self.generated_samples * 1000 // SPEECH_RATE

    def audio(self, samples: int, text: str) -> None:
        """Count `samples` more of generated audio, which speak `text`."""
        if self._first_audio_at is None:
            self._first_audio_at = time.monotonic()
        self.generated_samples += samples
        self._spoken.append((self.generated_samples, text))

    def snapshot(self) -> dict[str, int]:
        """The answer's playback figures, as event metadata carries them."""
        generated = self.generated_ms
        return playback(generated, generated, self.played_ms, self.committed_ms)

    @property
    def history_committed(self) -> bool:
        """Whether the stored item is final: truncated, or done with all its audio committed."""
        return self.truncated_at is not None or (self.done and self.committed_ms >= self.generated_ms)

    def audible(self) -> bool:
        """Is the client (probably) still playing this answer?"""
        if self._stopped or self.truncated_at is not None or (self._acked and self.done and self.played_ms >= self.generated_ms):
            return False
        if self._first_audio_at is None:
            return False
        return time.monotonic() < self._first_audio_at + self.generated_ms / 1000 + AUDIBLE_MARGIN_S

    def stopped(self) -> None:
        """Barged in: the client was told to stop playing it."""
        self._stopped = True

    def ack(self, played_ms: int, truncate: bool) -> None:
        """Cumulative played position (never moves back); `truncate`: playback stopped there for good."""
        self._acked = True
        self.played_ms = min(max(self.played_ms, played_ms), self.generated_ms)
        if truncate and self.truncated_at is None:
            self.truncated_at = self.played_ms
        self.commit()

    def finished(self) -> None:
        """The answer is complete: bring the stored item in line with the policy."""
        self.done = True
        self.commit()

    def commit(self) -> None:
        """Bring the stored item in line with the policy."""
        content = self.item.wire.get("content") or []
        if not content or "transcript" not in content[0]:
            return
        if self.truncated_at is not None:
            keep = self.truncated_at
        elif self.policy == PlaybackCommitPolicy.ACK_ONLY:
            keep = self.played_ms
        elif self.done:
            keep = self.generated_ms
        else:
            return
        self.committed_ms = keep
        if keep < self.generated_ms or self.policy == PlaybackCommitPolicy.ACK_ONLY:
            content[0]["transcript"] = heard_text(Item({}, spoken=list(self._spoken)), keep)


class Ledgers:
    """The ledgers of a duplex session's answers, found by response id or item id, and the last one."""

    def __init__(self) -> None:
        self._named: dict[str, Ledger] = {}
        self.last: Ledger | None = None

    def open(self, response_id: str, item: Item, policy: PlaybackCommitPolicy, speaks: bool) -> Ledger:
        """A new answer's ledger; it becomes the last one."""
        made = Ledger(response_id, item, policy, speaks)
        self._named[response_id] = self._named[item.id] = self.last = made
        return made

    def get(self, name: str) -> Ledger | None:
        """The ledger of the answer (or its item) named `name`."""
        return self._named.get(name)

    def acknowledged(self, event: dict) -> Ledger:
        """The ledger a `playback.ack` names (by response or item id; else the last answer)."""
        name = event.get("response_id") or event.get("item_id")
        ledger = self._named.get(name) if name else self.last
        if ledger is None:
            raise EventError(f"no response '{name}' to acknowledge" if name else "no response to acknowledge",
                             "response_not_found", param="response_id")
        return ledger

    def audible_response(self) -> str | None:
        """The last answer's id while the client is (probably) still playing it."""
        return self.last.response_id if self.last is not None and self.last.audible() else None


def keep_played(ledger: Ledger) -> None:
    """The item keeps only the audio that was played (conversation.item.retrieve shows it)."""
    item, end = ledger.item, ledger.truncated_at or 0
    item.audio_samples = min(item.audio_samples, end * SPEECH_RATE // 1000)
    item.spoken = [(at, words) for at, words in item.spoken if at <= item.audio_samples]
