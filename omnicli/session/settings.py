"""The session's configuration, as `session.updated` shows it: what the client may set, merged in
field by field; everything else a client sends (tools, tracing, transcription, ...) is dropped,
as vLLM-Omni's handler does, so an update never fails on a field the session cannot honour."""

import copy
from typing import TYPE_CHECKING, Any

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.engine.voice_models import DEFAULT_VOICE
from omnicli.engine.voices import served_voice
from omnicli.errors import UsageError
from omnicli.turns.modes import SILENCE_RULE_MS, Detection

if TYPE_CHECKING:
    from omnicli.engine.base import Engine

DEFAULT_INSTRUCTIONS = "You are a friendly voice assistant. Answer in one or two short sentences."
SERVER_VAD_DEFAULTS = {
    "type": Detection.SERVER_VAD, "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": SILENCE_RULE_MS,
    "create_response": True, "interrupt_response": True,
}
SEMANTIC_VAD_DEFAULTS = {"type": Detection.SEMANTIC_VAD, "eagerness": "auto", "create_response": True, "interrupt_response": True}
"""Turns that end by meaning (Smart Turn after a short pause); `eagerness` sets how soon."""
_SETTABLE = {
    "instructions": True, "output_modalities": True, "max_output_tokens": True,
    "audio": {"input": {"format": True, "turn_detection": True}, "output": {"format": True, "voice": True, "speed": True}},
}
"""The fields a client may set (True: take the value whole); the rest of an update is dropped."""


class SessionSettings:
    """The session object a client configures with `session.update`, with its defaults."""

    def __init__(self, model_id: str) -> None:
        pcm = {"type": "audio/pcm", "rate": SPEECH_RATE}
        self.values: dict[str, Any] = {
            "type": "realtime",
            "model": model_id,
            "output_modalities": ["audio"],
            "instructions": DEFAULT_INSTRUCTIONS,
            "max_output_tokens": "inf",
            "audio": {
                "input": {"format": dict(pcm), "turn_detection": None},
                "output": {"format": dict(pcm), "voice": DEFAULT_VOICE, "speed": 1.0},
            },
        }

    async def take_engine_voice(self, engine: "Engine") -> None:
        """Show the engine's own default voice (the first it lists) until the client names one."""
        from omnicli.errors import OmniError

        try:
            voices = await engine.voices()
        except OmniError:
            return  # an engine that cannot list its voices keeps omni's default name
        if voices:
            self.output["voice"] = voices[0].name

    @property
    def turn_detection(self) -> dict | None:
        """The client's turn detection settings; None when the client commits turns itself."""
        return self.values["audio"]["input"]["turn_detection"]

    @property
    def output(self) -> dict:
        """The settings of the answer's audio: format, voice and speed."""
        return self.values["audio"]["output"]

    def update(self, session: dict) -> bool:
        """Merge in a checked `session.update`; True when turn detection changed."""
        from omnicli.errors import EventError

        update = _settable(session, _SETTABLE)
        modalities = update.get("output_modalities")
        if modalities is not None and modalities not in (["audio"], ["text"]):
            raise EventError("output_modalities must be ['audio'] or ['text']", "invalid_value", param="output_modalities")
        audio_in = update.get("audio", {}).get("input", {})
        detection_changed = "turn_detection" in audio_in
        if audio_in.get("turn_detection"):
            detection = audio_in["turn_detection"]
            defaults = SEMANTIC_VAD_DEFAULTS if detection.get("type") == Detection.SEMANTIC_VAD else SERVER_VAD_DEFAULTS
            audio_in["turn_detection"] = {**defaults, **{k: v for k, v in detection.items() if k in defaults and v is not None},
                                          "type": defaults["type"]}
        elif detection_changed:
            audio_in["turn_detection"] = None
        self.values = _merge(self.values, update)
        if detection_changed:  # taken whole: one kind's fields never linger in the other's
            self.values["audio"]["input"]["turn_detection"] = audio_in["turn_detection"]
        return detection_changed


def _settable(update: Any, allowed: dict) -> dict:
    if not isinstance(update, dict):
        return {}
    kept = {}
    for key, rule in allowed.items():
        if key in update:
            kept[key] = copy.deepcopy(update[key]) if rule is True else _settable(update[key], rule)
    return kept


def _merge(base: dict, update: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


async def with_served_voice(engine: "Engine", session: Any, param: str) -> Any:
    """`session` (a `session.update`'s object) with the voice it names, at `voice` or
    `audio.output.voice`, as the engine calls it (OpenAI's names mapped to the closest); an
    unknown voice is an EventError on `param`."""
    from omnicli.errors import EventError

    if not isinstance(session, dict):
        return session
    session = copy.deepcopy(session)  # the client's own dict is left as it sent it
    audio = session.get("audio")
    output = audio.get("output") if isinstance(audio, dict) else None
    for holder in (session, output):
        if isinstance(holder, dict) and isinstance(holder.get("voice"), str):
            try:
                holder["voice"] = await served_voice(engine, holder["voice"])
            except UsageError as exc:
                raise EventError(str(exc), "invalid_value", param=param) from None
    return session
