"""vLLM-Omni's duplex Realtime contract (`/v1/realtime?duplex=1`): the wire vocabulary that
`omni serve`'s duplex lane and `omni talk --duplex` both speak, so neither spells a name twice.

Names follow vLLM-Omni's docs/serving/realtime_duplex_api.md (Tier 1 OpenAI names in their
beta spelling, Tier 2 extensions, Tier 3 vLLM-Omni-only events). A client branches on the
`capabilities` of `session.created`, never on the model name. Every server event on the wire
carries `server_event_seq` (strictly increasing per session), the replay cursor of `session.resume`.
"""

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

PATH = "/v1/realtime"
DUPLEX_QUERY = "duplex"
"""`?duplex=1|true|on` selects the duplex lane. Other query parameters: `model`, `session_id`,
`autostart` (`0`: no implicit session; the first event opens one with `session.update` or resumes
one with `session.resume`, as vLLM-Omni's own client does), `resume`, `native_duplex`."""
DUPLEX_ON = ("1", "true", "on")
SEQ = "server_event_seq"

INPUT_RATE = 16000
"""The model-neutral default: 16 kHz PCM16 in (24 kHz is accepted too), 24 kHz PCM16 out."""
INPUT_RATES = (16000, 24000)
OUTPUT_RATE = 24000
DISCONNECT_GRACE_S = 30.0
"""How long a session whose socket dropped waits for `session.resume`."""
IDLE_TIMEOUT_S = 300.0
"""The session lease (`session.idle_timeout_s`): no client event (a heartbeat is enough) for this long -> expired."""
HEARTBEAT_INTERVAL_S = 30.0


def duplex_requested(value: str | None) -> bool:
    """Whether a `?duplex=` query value turns the duplex lane on."""
    return value is not None and value.strip().lower() in DUPLEX_ON


class ClientEvent(StrEnum):
    """Client -> server. Aliases the server also accepts are in CLIENT_ALIASES."""

    SESSION_UPDATE = "session.update"
    SESSION_HEARTBEAT = "session.heartbeat"
    SESSION_EVENT_ACK = "session.event_ack"  # {server_event_seq}: trims the replay journal
    SESSION_CLOSE = "session.close"
    SESSION_RESUME = "session.resume"  # {session_id, resume_token, incarnation, last_received_server_event_seq}
    INPUT_APPEND = "input_audio_buffer.append"  # {audio, sample_rate_hz?, is_speech?}
    INPUT_COMMIT = "input_audio_buffer.commit"  # {create_response?, final?, is_speech?}
    INPUT_CLEAR = "input_audio_buffer.clear"
    INPUT_CANCEL = "input.cancel"  # advances epoch
    INPUT_TEXT_APPEND = "input.text.append"
    ITEM_CREATE = "conversation.item.create"
    ITEM_RETRIEVE = "conversation.item.retrieve"
    ITEM_DELETE = "conversation.item.delete"
    ITEM_TRUNCATE = "conversation.item.truncate"
    RESPONSE_CREATE = "response.create"
    RESPONSE_CANCEL = "response.cancel"  # advances epoch
    OUTPUT_AUDIO_CLEAR = "output_audio_buffer.clear"  # advances epoch
    BARGE_IN = "barge_in"
    TURN_SIGNAL = "turn.signal"  # {event: "barge_in", payload: {...}}
    PLAYBACK_ACK = "playback.ack"  # {response_id?, item_id?, played_ms, committed_ms?, truncate?}


CLIENT_ALIASES = {
    "input.commit": ClientEvent.INPUT_COMMIT, "push_chunk": ClientEvent.INPUT_APPEND,
    "input.audio.append": ClientEvent.INPUT_APPEND, "input_text.append": ClientEvent.INPUT_TEXT_APPEND,
    "push_text": ClientEvent.INPUT_TEXT_APPEND, "signal_turn": ClientEvent.TURN_SIGNAL,
    "audio.playback_ack": ClientEvent.PLAYBACK_ACK, "close_session": ClientEvent.SESSION_CLOSE,
    "close": ClientEvent.SESSION_CLOSE, "session_close": ClientEvent.SESSION_CLOSE,
}


class ServerEvent(StrEnum):
    """Server -> client."""

    ERROR = "error"
    SESSION_CREATED = "session.created"  # + incarnation, attachment_generation, resume_token; session.capabilities
    SESSION_UPDATED = "session.updated"
    HEARTBEAT_ACK = "session.heartbeat_ack"
    SESSION_CLOSED = "session.closed"  # {session_id, reason}
    SESSION_RESUMED = "session.resumed"  # {session_id, incarnation, attachment_generation, resume_token}; replay follows
    SESSION_REPLACED = "session.replaced"  # to the superseded socket, which is then closed
    SESSION_EXPIRED = "session.expired"  # {session_id, incarnation, reason}
    RESYNC_REQUIRED = "session.resync_required"  # {session_id, reason}: start a new session
    SPEECH_STARTED = "input_audio_buffer.speech_started"
    SPEECH_STOPPED = "input_audio_buffer.speech_stopped"
    INPUT_COMMITTED = "input_audio_buffer.committed"  # event: {turn_id, epoch, response_create_deferred, ...}
    INPUT_CLEARED = "input_audio_buffer.cleared"
    ITEM_ADDED = "conversation.item.added"
    ITEM_CREATED = "conversation.item.created"
    ITEM_DONE = "conversation.item.done"
    ITEM_DELETED = "conversation.item.deleted"
    ITEM_RETRIEVED = "conversation.item.retrieved"
    ITEM_TRUNCATED = "conversation.item.truncated"
    INPUT_TRANSCRIPTION = "conversation.item.input_audio_transcription.completed"
    RESPONSE_CREATED = "response.created"
    OUTPUT_ITEM_ADDED = "response.output_item.added"
    CONTENT_PART_ADDED = "response.content_part.added"
    RESPONSE_SPEAK = "response.speak"  # once per response, before its first audio delta
    # Audio in the GA spelling, as vLLM-Omni's realtime projection sends it (its protocol/realtime/events.py) and the
    # only one its own DuplexClient reads; its API document still shows the beta `response.audio.delta`, which
    # BETA_AUDIO names and our client reads too.
    AUDIO_DELTA = "response.output_audio.delta"  # + format, sample_rate_hz, metadata{epoch, audio_duration_ms, playback, ...}
    AUDIO_TRANSCRIPT_DELTA = "response.output_audio_transcript.delta"  # one per audio delta
    TEXT_DELTA = "response.output_text.delta"
    TEXT_DONE = "response.output_text.done"
    AUDIO_DONE = "response.output_audio.done"
    AUDIO_TRANSCRIPT_DONE = "response.output_audio_transcript.done"
    CONTENT_PART_DONE = "response.content_part.done"
    OUTPUT_ITEM_DONE = "response.output_item.done"
    RESPONSE_DONE = "response.done"  # response.status completed|cancelled|failed; status_details.reason
    RATE_LIMITS = "rate_limits.updated"
    RESPONSE_LISTEN = "response.listen"  # a pause that is not a turn end; the server keeps listening
    OUTPUT_AUDIO_CLEARED = "output_audio_buffer.cleared"
    PLAYBACK_ACKNOWLEDGED = "playback.acknowledged"  # event: {played_ms, committed_ms, playback, history_committed, ...}
    OVERLAP_DECISION = "overlap.decision"  # {policy, action, reason, overlap_ms, epoch}
    # Tool calls (Nemotron VoiceChat): a `function_call` output item, its arguments streamed, and a raw
    # fallback when the model's call is malformed (no call_id or name).
    FUNCTION_CALL_ARGUMENTS_DELTA = "response.function_call_arguments.delta"
    FUNCTION_CALL_ARGUMENTS_DONE = "response.function_call_arguments.done"  # {item_id, call_id, arguments}
    FUNCTION_CALL_MALFORMED = "duplex.function_call.done"  # event: {call_id, name, arguments}


class ImplementationLevel(StrEnum):
    """What decides when to listen and when to speak, as `session.created` reports it."""

    MODEL_NATIVE = "model_native_duplex"
    """The model itself decides listen/speak (MiniCPM-o with native_duplex, PersonaPlex, Nemotron)."""
    CHAT_FALLBACK = "chat_fallback"
    """The document's "chat-fallback lane": a turn-taking policy around a chat model (omni's cascade)."""


class OverlapPolicy(StrEnum):
    """What user speech over the assistant's answer may do."""

    LISTEN_ONLY = "listen_only"
    """User speech over the assistant never interrupts: short remarks are dropped, longer ones deferred."""
    BARGE_IN_ON_SPEECH = "barge_in_on_speech"
    """Short remarks (backchannels) are dropped; sustained speech cancels the response (barge-in)."""


class OverlapAction(StrEnum):
    """What was done with one stretch of overlapping speech (`overlap.decision`)."""

    DROP = "drop"
    LISTEN = "listen"
    BARGE_IN = "barge_in"


class PlaybackCommitPolicy(StrEnum):
    """How much of an answer enters the conversation's history."""

    ACK_ONLY = "ack_only"
    """The stored assistant turn holds only what `playback.ack` says was played."""
    COMMIT_ALL_ON_DONE = "commit_all_on_done"
    """The whole answer enters history at `response.done` (a client that never acks)."""


class ClosedReason(StrEnum):
    """Why a session ended (`session.closed`)."""

    SESSION_CLOSE = "session_close"
    TIMEOUT = "timeout"
    DISCONNECT = "disconnect"


class ExpiredReason(StrEnum):
    """Why a session expired and can no longer be resumed (`session.expired`)."""

    DISCONNECT_GRACE = "disconnect_grace_expired"
    IDLE_TTL = "idle_ttl_expired"
    """The lease ran out: no client event (heartbeat or other) for `idle_timeout_s`."""


class ResyncReason(StrEnum):
    """Why a resume cannot replay the missed events (`session.resync_required`)."""

    JOURNAL_GAP = "journal_gap"
    """The client asked to replay from before the oldest event still journalled."""
    JOURNAL_OVERFLOW = "journal_overflow"


class ErrorCode(StrEnum):
    """The `code` of a duplex `error` event."""

    SESSION_BUSY = "duplex_session_busy"  # --max-duplex-sessions reached (rate_limit_error)
    RESUME_EXPIRED = "session_resume_expired"  # unknown, closed or expired session
    RESUME_INVALID = "session_resume_invalid"  # wrong resume_token or incarnation
    RESUME_UNSUPPORTED = "session_resume_unsupported"
    SESSION_NOT_OPEN = "session_not_open"  # an event before the opening session.update/session.resume
    REF_AUDIO_REQUIRED = "ref_audio_required"  # MiniCPM-o flavour
    REF_AUDIO_UNSUPPORTED = "ref_audio_unsupported"  # omni serve: its voice is not cloned from a clip
    RUNTIME_CONFIG_INVALID = "invalid_duplex_runtime_config"  # vLLM-Omni: the model refused the session's knobs
    BARGE_IN_UNSUPPORTED = "barge_in_unsupported"
    UNSUPPORTED_TURN_DETECTION = "unsupported_turn_detection"
    UNSUPPORTED_AUDIO_FORMAT = "unsupported_audio_format"
    INPUT_BUFFER_EMPTY = "input_audio_buffer_empty"
    INVALID_EVENT = "invalid_event"
    UNKNOWN_EVENT = "unknown_event"
    SERVER_ERROR = "server_error"


BETA_AUDIO_DELTA = "response.audio.delta"
BETA_AUDIO_TRANSCRIPT_DELTA = "response.audio_transcript.delta"
"""The beta names of the audio events, which vLLM-Omni's API document (and the MiniCPM-o flavour) use."""

ERROR_TYPES = {ErrorCode.SESSION_BUSY: "rate_limit_error", ErrorCode.SERVER_ERROR: "server_error"}
"""The OpenAI error class of a code; `invalid_request_error` for the rest."""
_ERROR_TYPES = {code.value: kind for code, kind in ERROR_TYPES.items()}


class Capabilities(BaseModel):
    """`session.created.session.capabilities`. Unknown keys are kept (a server may add more); a
    flag a server leaves out reads as unsupported."""

    model_config = ConfigDict(extra="allow")

    implementation_level: str | None = None
    chunk_period_ms: int | None = None
    supports_input_append: bool = False
    supports_barge_in: bool = False
    supports_session_resume: bool = False
    supports_session_lease: bool = False
    supports_audio_truncate: bool = False
    supports_multi_session: bool = False
    input_modes: list[str] = Field(default_factory=list)
    signal_sources: list[str] = Field(default_factory=list)
    target_barge_in_latency_ms: int | None = None

    @classmethod
    def of(cls, session_created: dict) -> "Capabilities":
        """The capabilities a `session.created` (or `session.updated`) event advertises."""
        session = session_created.get("session") or {}
        return cls.model_validate(session.get("capabilities") or {})


def playback(generated_ms: int = 0, sent_ms: int = 0, played_ms: int = 0, committed_ms: int = 0) -> dict[str, int]:
    """The playback ledger as events carry it."""
    return {"generated_ms": generated_ms, "sent_ms": sent_ms, "played_ms": played_ms, "committed_ms": committed_ms}


def realtime_error(code: str, message: str, *, event_id: str | None = None, param: str | None = None) -> dict[str, Any]:
    """An `error` event in the Realtime shape (after the handshake)."""
    kind = _ERROR_TYPES.get(str(code), "invalid_request_error")
    return {"type": ServerEvent.ERROR.value,
            "error": {"type": kind, "code": str(code), "message": message, "event_id": event_id, "param": param}}


def handshake_error(code: str, message: str) -> dict[str, Any]:
    """A handshake-stage error in the flat native shape: `{type: "error", error: "...", code}`."""
    return {"type": ServerEvent.ERROR.value, "error": message, "code": str(code)}


def error_code_and_message(event: dict) -> tuple[str | None, str]:
    """(code, message) of an `error` event in either shape."""
    error = event.get("error")
    if isinstance(error, dict):
        return error.get("code"), str(error.get("message") or "")
    return event.get("code"), str(error or "")


def resume_event(session_id: str, resume_token: str, incarnation: int, last_received_server_event_seq: int) -> dict[str, Any]:
    """The `session.resume` a client sends on a new socket (`?duplex=1&autostart=0`)."""
    return {"type": ClientEvent.SESSION_RESUME.value, "session_id": session_id, "resume_token": resume_token,
            "incarnation": incarnation, "last_received_server_event_seq": last_received_server_event_seq}
