"""Client events in: JSON text to a validated `openai.types.realtime` model, or an `EventError`.

Everything a client can get wrong is caught here, before the session acts: not JSON, nested
too deeply, text that is not Unicode, an unknown or unsupported type, a shape the schema
refuses, and values outside what the session can carry out (speed, token limits, VAD settings,
formats other than 24 kHz PCM16).
"""

import functools
import json
from dataclasses import dataclass
from typing import Any

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import EventError
from omnicli.turns.modes import Detection

MAX_DEPTH = 32
"""No client event needs more nesting than this; deeper is abuse (and recursion to refuse)."""
MAX_OUTPUT_TOKENS = 4096
SPEED_RANGE = (0.25, 1.5)
"""OpenAI Realtime GA's range for `audio.output.speed`."""

SUPPORTED = frozenset({
    "session.update", "input_audio_buffer.append", "input_audio_buffer.commit", "input_audio_buffer.clear",
    "conversation.item.create", "conversation.item.delete", "conversation.item.retrieve",
    "conversation.item.truncate", "response.create", "response.cancel",
})


@dataclass(frozen=True)
class ClientEvent:
    """The validated model to dispatch on, and the JSON it came from (payloads are kept as sent)."""

    model: Any
    raw: dict

    @property
    def event_id(self) -> str | None:
        """The client's own id for the event, echoed in an `error` about it."""
        return self.raw.get("event_id")


@functools.cache
def _schema():
    """The schema of every client event; built once, on first use, since building it is slow."""
    from openai.types.realtime import RealtimeClientEvent
    from pydantic import TypeAdapter

    return TypeAdapter(RealtimeClientEvent)


def parse(text: str) -> ClientEvent:
    """One client event's JSON text, checked and validated, or an EventError saying what is wrong."""
    from pydantic import ValidationError

    try:
        raw = json.loads(text)
    except RecursionError:
        raise EventError(f"the event is nested more than {MAX_DEPTH} levels deep", "invalid_event") from None
    except (ValueError, TypeError):
        raise EventError("the event is not valid JSON", "invalid_json") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise EventError("an event is a JSON object with a string 'type'", "invalid_event")
    _check_shape(raw)
    kind = raw["type"]
    if kind not in SUPPORTED:
        raise EventError(f"unknown event type '{kind}'", "unknown_event", param="type")
    if kind == "session.update":
        check_session(raw.get("session"))  # formats before the schema, which knows only 24 kHz
    try:
        model = _schema().validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:] if not str(p).startswith(("Realtime", "Conversation")))
        raise EventError(f"invalid {kind}: {where}: {first['msg']}", "invalid_event", param=where or None) from None
    if kind == "response.create":
        check_response(raw.get("response"))
    return ClientEvent(model, raw)


def _check_shape(raw: dict) -> None:
    """Refuse deep nesting and text that cannot be encoded (a lone surrogate) anywhere in the event."""
    pending: list[tuple[Any, int, str]] = [(raw, 1, "")]
    while pending:
        node, depth, where = pending.pop()
        if depth > MAX_DEPTH:
            raise EventError(f"the event is nested more than {MAX_DEPTH} levels deep", "invalid_event", param=where or None)
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in children:
            path = f"{where}.{key}" if where else str(key)
            for text in (key, value):
                if isinstance(text, str) and not text.isascii() and not _encodable(text):
                    raise EventError(f"{path} holds text that is not valid Unicode (a lone surrogate)", "invalid_event", param=path)
            if isinstance(value, (dict, list)):
                pending.append((value, depth + 1, path))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree


def _pcm_format_ok(fmt: Any) -> bool:
    if fmt is None:
        return True
    if isinstance(fmt, str):
        return fmt in ("pcm16", "audio/pcm")
    return isinstance(fmt, dict) and fmt.get("type") in ("audio/pcm", "pcm16") and fmt.get("rate", SPEECH_RATE) == SPEECH_RATE


def _in_range(value: Any, low: float, high: float | None = None) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True  # a wrong type is the schema's to refuse
    return low <= value and (high is None or value <= high)


def _refuse(message: str, param: str) -> None:
    raise EventError(message, "invalid_value", param=param)


def check_max_tokens(limit: Any, param: str) -> None:
    """Refuse a `max_output_tokens` outside 1..MAX_OUTPUT_TOKENS that is not 'inf'."""
    if limit is not None and limit != "inf" and not (isinstance(limit, int) and 1 <= limit <= MAX_OUTPUT_TOKENS):
        _refuse(f"max_output_tokens must be 1..{MAX_OUTPUT_TOKENS} or 'inf', got {limit!r}", param)


def check_session(session: Any) -> None:
    """What a `session.update` may set: 24 kHz PCM16 only, and values the session can carry out."""
    for side in ("input", "output"):
        if not _pcm_format_ok(_get(session, "audio", side, "format")):
            raise EventError("only 24 kHz mono PCM16 audio is supported (audio/pcm, rate 24000)",
                             "unsupported_audio_format", param=f"session.audio.{side}.format")
    speed = _get(session, "audio", "output", "speed")
    if not _in_range(speed, *SPEED_RANGE):
        _refuse(f"speed must be {SPEED_RANGE[0]}..{SPEED_RANGE[1]}, got {speed}", "session.audio.output.speed")
    check_max_tokens(_get(session, "max_output_tokens"), "session.max_output_tokens")
    detection = _get(session, "audio", "input", "turn_detection")
    check_turn_detection(detection)
    threshold = _get(detection, "threshold")
    if not _in_range(threshold, 0.0, 1.0):
        _refuse(f"turn_detection.threshold must be 0..1, got {threshold}", "session.audio.input.turn_detection.threshold")
    for field in ("silence_duration_ms", "prefix_padding_ms"):
        value = _get(detection, field)
        if not _in_range(value, 0):
            _refuse(f"turn_detection.{field} must not be negative, got {value}", f"session.audio.input.turn_detection.{field}")


TURN_DETECTION_TYPES = tuple(Detection)
EAGERNESS = ("low", "medium", "high", "auto")


def check_turn_detection(detection: Any) -> None:
    """The two kinds OpenAI GA defines, and semantic_vad's eagerness; refused by name, since the
    schema's own message for a union that fails names neither."""
    kind = _get(detection, "type")
    if kind is not None and kind not in TURN_DETECTION_TYPES:
        _refuse(f"turn_detection.type must be 'server_vad' or 'semantic_vad', got {kind!r}", "session.audio.input.turn_detection.type")
    eagerness = _get(detection, "eagerness")
    if kind == Detection.SEMANTIC_VAD and eagerness is not None and eagerness not in EAGERNESS:
        _refuse(f"turn_detection.eagerness must be one of {', '.join(EAGERNESS)}, got {eagerness!r}",
                "session.audio.input.turn_detection.eagerness")


def check_response(response: Any) -> None:
    """What a `response.create` may ask for: in-band responses within the token limit."""
    if _get(response, "conversation") == "none" or _get(response, "input") is not None:
        raise EventError("out-of-band responses are not supported", "unsupported_feature", param="response")
    check_max_tokens(_get(response, "max_output_tokens"), "response.max_output_tokens")
