"""Speech over an answer that a server without barge-in will not cut, judged in the client: kept
from its onset, it is a backchannel if it ends short and a barge-in once it lasts longer."""

from collections import deque

import numpy as np

from omnicli.session.duplex.overlap import SHORT_ACK_MS
from omnicli.talk.sources import FRAME_MS

PREROLL_MS = 300
"""Client-forced barge-in clears the input buffer; this much audio from before the speech was
detected is sent again after the clear, so the user's first syllable is not lost."""


def backchannel_ms(session: dict) -> int:
    """The longest remark over an answer that is not the user taking the turn: the session's
    `overlap_short_ack_ms`, or the server's default."""
    ms = session.get("overlap_short_ack_ms")
    return ms if isinstance(ms, int) and not isinstance(ms, bool) and ms > 0 else SHORT_ACK_MS


class RemarkOverAnswer:
    """The user's speech over an answer, from its onset, while it may still be a backchannel."""

    def __init__(self) -> None:
        self._preroll: deque[np.ndarray] = deque(maxlen=max(1, PREROLL_MS // FRAME_MS) + 1)
        """The latest frames sent: the speech's onset when Silero says it started."""
        self.began_ms: int | None = None
        """Where the speech began (ms of audio heard), while it is being weighed."""
        self.audio: list[np.ndarray] = []
        """That speech from its onset: sent again after the clear, should it become a barge-in."""

    @property
    def open(self) -> bool:
        """Speech over an answer is being weighed."""
        return self.began_ms is not None

    def heard(self, frame: np.ndarray) -> None:
        """One more frame of the microphone, sent to the server."""
        self._preroll.append(frame)
        if self.began_ms is not None:
            self.audio.append(frame)

    def begin(self, at_ms: int) -> None:
        """Speech over the answer began at `at_ms`: keep it, with the frames before its detection."""
        self.began_ms, self.audio = at_ms, list(self._preroll)

    def end(self) -> list[np.ndarray]:
        """Stop weighing it; the speech kept so far."""
        audio, self.began_ms, self.audio = self.audio, None, []
        return audio
