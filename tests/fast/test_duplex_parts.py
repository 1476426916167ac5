"""The duplex lane's parts on their own: the replay journal, the overlap policy, the playback
ledger, and `session.update` checking."""

import pytest

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import EventError
from omnicli.protocol.duplex import (
    Capabilities,
    OverlapAction,
    OverlapPolicy,
    PlaybackCommitPolicy,
    ResyncReason,
    duplex_requested,
    error_code_and_message,
    handshake_error,
    realtime_error,
)
from omnicli.session.conversation import Item
from omnicli.session.duplex.config import DuplexConfig, apply
from omnicli.session.duplex.journal import Journal
from omnicli.session.duplex.overlap import OverlapSettings, when_stopped, while_speaking
from omnicli.session.duplex.playback import Ledger
from omnicli.session.settings import SessionSettings


def test_the_journal_numbers_events_and_replays_what_was_not_acknowledged():
    journal = Journal()
    stamped = [journal.record({"type": f"e{i}"}) for i in range(5)]
    assert [e["server_event_seq"] for e in stamped] == [1, 2, 3, 4, 5]
    assert [e["type"] for e in journal.after(2)] == ["e2", "e3", "e4"]
    journal.ack(3)
    assert [e["server_event_seq"] for e in journal.after(3)] == [4, 5]
    assert journal.after(5) == []
    assert journal.after(1) == ResyncReason.JOURNAL_GAP  # acknowledged, so no longer kept
    assert journal.after(6) == ResyncReason.JOURNAL_GAP  # never sent


def test_a_journal_that_overflowed_asks_for_a_resync():
    journal = Journal(max_events=3)
    for i in range(5):
        journal.record({"type": f"e{i}"})
    assert journal.after(1) == ResyncReason.JOURNAL_OVERFLOW
    assert [e["server_event_seq"] for e in journal.after(2)] == [3, 4, 5]


def test_the_overlap_policy_drops_backchannels_defers_remarks_and_barges_in_on_sustained_speech():
    barge, listen = OverlapSettings(), OverlapSettings(OverlapPolicy.LISTEN_ONLY)
    assert when_stopped(barge, 400).action == OverlapAction.DROP
    assert when_stopped(barge, 900).action == OverlapAction.LISTEN
    assert while_speaking(barge, 1100) is None
    assert while_speaking(barge, 1200).action == OverlapAction.BARGE_IN
    assert while_speaking(listen, 5000) is None
    assert when_stopped(listen, 5000).action == OverlapAction.LISTEN
    assert when_stopped(barge, 400).fields(barge.policy) == {
        "policy": "barge_in_on_speech", "action": "drop", "reason": "backchannel", "overlap_ms": 400, "buffer_audio": False}


def _ledger(policy: PlaybackCommitPolicy) -> Ledger:
    item = Item({"id": "item_a", "role": "assistant", "content": [{"type": "output_audio", "transcript": "One two. Three four."}]})
    ledger = Ledger("resp_a", item, policy, speaks=True)
    ledger.audio(SPEECH_RATE, "One two.")
    ledger.audio(SPEECH_RATE, "Three four.")
    return ledger


def test_ack_only_history_follows_the_acks_and_commit_all_keeps_everything_at_done():
    ack_only = _ledger(PlaybackCommitPolicy.ACK_ONLY)
    ack_only.finished()
    assert ack_only.item.wire["content"][0]["transcript"] == "" and not ack_only.history_committed
    ack_only.ack(1500, truncate=False)
    assert ack_only.item.wire["content"][0]["transcript"] == "One two. Three"
    ack_only.ack(9000, truncate=False)  # beyond what was generated: clamped
    assert ack_only.snapshot() == {"generated_ms": 2000, "sent_ms": 2000, "played_ms": 2000, "committed_ms": 2000}
    assert ack_only.history_committed and ack_only.item.wire["content"][0]["transcript"] == "One two. Three four."

    commit_all = _ledger(PlaybackCommitPolicy.COMMIT_ALL_ON_DONE)
    commit_all.finished()
    assert commit_all.committed_ms == 2000 and commit_all.item.wire["content"][0]["transcript"] == "One two. Three four."
    commit_all.ack(1000, truncate=True)  # an interruption cuts it under either policy
    assert commit_all.item.wire["content"][0]["transcript"] == "One two." and commit_all.committed_ms == 1000


def test_session_update_is_checked_whole_before_anything_changes():
    config, settings = DuplexConfig(), SessionSettings("m")
    apply(config, settings, {"input_audio_format": "pcm16", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}},
                             "turn_detection": {"type": "server_vad", "interrupt_response": False},
                             "playback_commit_policy": "ack_only", "idle_timeout_s": 5, "instructions": "Hi."})
    assert config.input_rate == 24000 and config.turn_detection["type"] == "server_vad"
    assert config.overlap.policy == OverlapPolicy.LISTEN_ONLY  # interrupt_response=false: never barge in
    assert config.playback_commit_policy == PlaybackCommitPolicy.ACK_ONLY and settings.values["instructions"] == "Hi."
    for bad, param in [({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 8000}}}}, "session.audio.input.format.rate"),
                       ({"turn_detection": {"type": "magic"}}, "turn_detection.type"),
                       ({"overlap_policy": "shout"}, "overlap_policy"),
                       ({"idle_timeout_s": 0}, "idle_timeout_s"),
                       ({"instructions": "Changed.", "output_audio_format": "g711_ulaw"}, "output_audio_format")]:
        with pytest.raises(EventError) as refused:
            apply(config, settings, bad)
        assert refused.value.param == param
    assert settings.values["instructions"] == "Hi."


def test_the_wire_helpers():
    assert duplex_requested("1") and duplex_requested("True") and duplex_requested("on")
    assert not duplex_requested("0") and not duplex_requested(None)
    assert error_code_and_message(handshake_error("session_resume_expired", "gone")) == ("session_resume_expired", "gone")
    assert error_code_and_message(realtime_error("duplex_session_busy", "full")) == ("duplex_session_busy", "full")
    assert realtime_error("duplex_session_busy", "full")["error"]["type"] == "rate_limit_error"
    assert not Capabilities.of({"session": {"capabilities": {"implementation_level": "x"}}}).supports_barge_in
