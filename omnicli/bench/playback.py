"""What a listener would hear of a streamed answer: the gaps where the audio ran out.

A real-time player starts at the first packet and plays each packet when the one before has
ended; when the next has not arrived by then, the listener hears a gap until it does, and
playback goes on from there. The total of those gaps equals vLLM-Omni's `audio_underrun`
(its bench's worst player deficit, for a player that never pauses), so the two compare.
"""

from dataclasses import dataclass

CONTINUITY_THRESHOLD_S = 0.1
"""An answer whose gaps add up to no more than this sounds continuous (vLLM-Omni's default)."""


@dataclass(frozen=True)
class Underruns:
    """The gaps a real-time listener would hear in one streamed answer."""

    count: int
    """Gaps heard: packets that arrived after the audio before them had finished playing."""
    seconds: float
    """Their total length."""
    long: int = 0
    """Gaps longer than `CONTINUITY_THRESHOLD_S` each: pauses a listener notices."""
    longest: float = 0.0
    """The longest gap, in seconds."""


def underruns(packets: list[tuple[float, float]]) -> Underruns:
    """`packets`: (arrival time, seconds of audio) in arrival order, any clock."""
    if not packets:
        return Underruns(0, 0.0)
    arrived, length = packets[0]
    ends = arrived + length
    gaps = []
    for arrived, length in packets[1:]:
        if arrived > ends:
            gaps.append(arrived - ends)
            ends = arrived
        ends += length
    return Underruns(len(gaps), sum(gaps), sum(1 for gap in gaps if gap > CONTINUITY_THRESHOLD_S), max(gaps, default=0.0))
