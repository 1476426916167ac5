"""The overlap policy of the duplex lane: what user speech heard while the assistant speaks means.

A short remark ("uh-huh", "right") is a backchannel: dropped, the answer goes on. Speech that goes
on past `barge_in_ms` is the user taking the turn: with `barge_in_on_speech` the answer is
cancelled (barge-in); with `listen_only` it never is. Speech between the two, or any long remark
under `listen_only`, is kept and answered after the current answer (deferred to the turn end).
Durations are of voiced audio, from where Silero heard speech begin.
"""

from dataclasses import dataclass

from omnicli.protocol.duplex import OverlapAction, OverlapPolicy

SHORT_ACK_MS = 700
BARGE_IN_MS = 1200
"""vLLM-Omni's defaults (`overlap_short_ack_ms`, `overlap_barge_in_ms`)."""


@dataclass
class OverlapSettings:
    """The session's overlap policy and its two thresholds, in ms of voiced audio."""

    policy: OverlapPolicy = OverlapPolicy.BARGE_IN_ON_SPEECH
    short_ack_ms: int = SHORT_ACK_MS
    barge_in_ms: int = BARGE_IN_MS


@dataclass(frozen=True)
class Decision:
    """What to do with the user's speech over the answer, why, and how long it has lasted."""

    action: OverlapAction
    reason: str
    overlap_ms: int

    def fields(self, policy: OverlapPolicy) -> dict:
        """The `overlap.decision` event's own fields."""
        return {"policy": policy.value, "action": self.action.value, "reason": self.reason, "overlap_ms": self.overlap_ms,
                "buffer_audio": self.action != OverlapAction.DROP}


def while_speaking(settings: OverlapSettings, overlap_ms: int) -> Decision | None:
    """The user is still talking over the answer: a barge-in once it has lasted long enough."""
    if settings.policy == OverlapPolicy.BARGE_IN_ON_SPEECH and overlap_ms >= settings.barge_in_ms:
        return Decision(OverlapAction.BARGE_IN, "sustained_overlap_speech", overlap_ms)
    return None


def when_stopped(settings: OverlapSettings, overlap_ms: int) -> Decision:
    """The user stopped before a barge-in: a backchannel is dropped, anything longer deferred."""
    if overlap_ms < settings.short_ack_ms:
        return Decision(OverlapAction.DROP, "backchannel", overlap_ms)
    return Decision(OverlapAction.LISTEN, "overlap_deferred", overlap_ms)
