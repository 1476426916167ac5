"""An answer's audio on the speaker, measured where it is heard: how much of it the listener has
actually heard is what the speaker played past the point where its first sample went in. Both
lanes cut an answer at that point and report it (`audio_end_ms`, `played_ms`)."""

from dataclasses import dataclass

from omnicli.audio.chunk import SPEECH_RATE


@dataclass
class Playing:
    """One answer's audio on the speaker: where its first sample plays and how much of it came."""

    response_id: str | None
    item_id: str | None
    mark: int
    """The speaker's frame count where this answer's first sample plays."""
    samples: int = 0
    """Samples received (24 kHz)."""
    acked_ms: int = -1
    """What the server was last told was played (duplex `playback.ack`)."""
    done: bool = False
    """The server sent all of it."""

    @classmethod
    def after(cls, speaker, response_id: str | None, item_id: str | None) -> "Playing":
        """An answer whose first sample plays once what the speaker holds now has played."""
        return cls(response_id, item_id, speaker.played_frames + round(speaker.buffered_seconds * speaker.device_rate))

    def played(self, speaker) -> int:
        """Samples (24 kHz) of it the listener has heard: what the speaker played past its mark."""
        heard = (speaker.played_frames - self.mark) * SPEECH_RATE / speaker.device_rate
        return int(min(max(heard, 0), self.samples))

    def played_ms(self, speaker) -> int:
        """Milliseconds of it the listener has heard."""
        return self.played(speaker) * 1000 // SPEECH_RATE
