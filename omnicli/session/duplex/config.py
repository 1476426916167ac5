"""A duplex session's configuration: `session.update` in the vLLM-Omni duplex shape (beta field
names such as `input_audio_format`, `turn_detection` at the top, and the GA `audio.*` objects),
checked and merged. The answer's own settings (instructions, modalities, voice, token limit) go
to the turn-based session's `SessionSettings`, so a response runs exactly as it does there.
"""

from dataclasses import dataclass, field
from typing import Any

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.errors import EventError
from omnicli.protocol.duplex import (
    IDLE_TIMEOUT_S,
    INPUT_RATE,
    INPUT_RATES,
    ErrorCode,
    OverlapPolicy,
    PlaybackCommitPolicy,
)
from omnicli.session.client_events import EAGERNESS, check_max_tokens
from omnicli.session.duplex.overlap import OverlapSettings
from omnicli.session.settings import SEMANTIC_VAD_DEFAULTS, SERVER_VAD_DEFAULTS, SessionSettings
from omnicli.turns.modes import Detection

MIN_IDLE_TIMEOUT_S = 0.5
INPUT_FORMATS = ("pcm16", "pcm_f32le")
"""Appended audio: 16-bit PCM, or 32-bit float (vLLM-Omni's PersonaPlex preset)."""


@dataclass
class DuplexConfig:
    """The duplex-only settings of a session: input audio, turn detection, overlap, commit policy, lease."""

    input_rate: int = INPUT_RATE
    input_format: str = "pcm16"
    """The encoding of appended audio when an append does not name its own `format`."""
    turn_detection: dict = field(default_factory=lambda: dict(SEMANTIC_VAD_DEFAULTS))
    overlap: OverlapSettings = field(default_factory=OverlapSettings)
    playback_commit_policy: PlaybackCommitPolicy = PlaybackCommitPolicy.COMMIT_ALL_ON_DONE
    idle_timeout_s: float = IDLE_TIMEOUT_S
    auto_response: bool = True
    extra_body: dict = field(default_factory=dict)


def session_view(config: DuplexConfig, settings: SessionSettings, state: dict, *, playback: dict,
                 capabilities: dict) -> dict:
    """The session object a duplex client is shown: `state` (id, turn state, epoch, active response)
    with the settings in both the beta and the GA field names, the playback ledger and the capabilities."""
    values, output, rate = settings.values, settings.output, config.input_rate
    return {
        "object": "realtime.session", "type": "realtime", "id": state["id"], "model": values["model"], **state,
        "modalities": values["output_modalities"], "output_modalities": values["output_modalities"],
        "instructions": values["instructions"], "voice": output.get("voice"), "speed": output.get("speed"),
        "input_audio_format": config.input_format, "output_audio_format": "pcm16", "response_format": "pcm16",
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": rate}, "sample_rate_hz": rate,
                            "turn_detection": config.turn_detection},
                  "output": {"format": {"type": "audio/pcm", "rate": SPEECH_RATE}, "voice": output.get("voice")}},
        "turn_detection": config.turn_detection, "max_response_output_tokens": values["max_output_tokens"],
        "idle_timeout_s": config.idle_timeout_s, "overlap_policy": config.overlap.policy.value,
        "overlap_short_ack_ms": config.overlap.short_ack_ms, "overlap_barge_in_ms": config.overlap.barge_in_ms,
        "playback_commit_policy": config.playback_commit_policy.value,
        "playback": playback,
        "extra_body": {**config.extra_body, "auto_response": config.auto_response},
        "capabilities": capabilities,
    }


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree


def _refuse(message: str, param: str, code: str = "invalid_value") -> None:
    raise EventError(message, code, param=param)


def _rate(session: dict) -> int | None:
    """The input rate, from wherever a client puts it: `audio.input.format.rate` (GA),
    `audio.input.sample_rate_hz`, `input_sample_rate_hz`, or the top-level `sample_rate_hz`
    vLLM-Omni's own client (`vllm_omni/clients/duplex.py`) sends."""
    fmt = _get(session, "audio", "input", "format")
    rate = _get(session, "audio", "input", "sample_rate_hz") or session.get("input_sample_rate_hz") \
        or session.get("sample_rate_hz")
    if isinstance(fmt, dict):
        if fmt.get("type") not in (None, "audio/pcm", "pcm16"):
            _refuse("input audio must be PCM16 (audio/pcm)", "session.audio.input.format", ErrorCode.UNSUPPORTED_AUDIO_FORMAT)
        rate = fmt.get("rate", rate)
    if rate is not None and rate not in INPUT_RATES:
        _refuse(f"the input rate must be one of {', '.join(map(str, INPUT_RATES))} Hz, got {rate}",
                "session.audio.input.format.rate", ErrorCode.UNSUPPORTED_AUDIO_FORMAT)
    return rate


def input_encoding(value: Any, param: str) -> str | None:
    """An input encoding (`input_audio_format`, or an append's `format`): pcm16 or pcm_f32le."""
    if value in (None, "audio/pcm"):
        return None if value is None else "pcm16"
    if value not in INPUT_FORMATS:
        _refuse(f"input audio must be one of {', '.join(INPUT_FORMATS)}, got {value!r}", param,
                ErrorCode.UNSUPPORTED_AUDIO_FORMAT)
    return value


def _check_output(session: dict) -> None:
    fmt = _get(session, "audio", "output", "format")
    if isinstance(fmt, dict) and (fmt.get("type") not in (None, "audio/pcm", "pcm16") or fmt.get("rate", SPEECH_RATE) != SPEECH_RATE):
        _refuse("output audio is 24 kHz PCM16 only", "session.audio.output.format", ErrorCode.UNSUPPORTED_AUDIO_FORMAT)
    rate = _get(session, "audio", "output", "sample_rate_hz")
    if rate is not None and rate != SPEECH_RATE:
        _refuse(f"output audio is {SPEECH_RATE} Hz only, got {rate}", "session.audio.output.sample_rate_hz",
                ErrorCode.UNSUPPORTED_AUDIO_FORMAT)
    if session.get("output_audio_format") not in (None, "pcm16", "audio/pcm"):
        _refuse("output audio is 24 kHz PCM16 only", "output_audio_format", ErrorCode.UNSUPPORTED_AUDIO_FORMAT)


def _turn_detection(value: Any) -> dict:
    """null: the server's default (semantic turns); server_vad and semantic_vad as in OpenAI."""
    if value is None:
        return dict(SEMANTIC_VAD_DEFAULTS)
    if not isinstance(value, dict):
        _refuse("turn_detection must be an object or null", "turn_detection", ErrorCode.UNSUPPORTED_TURN_DETECTION)
    kind = value.get("type", Detection.SERVER_VAD)
    if kind not in tuple(Detection):
        _refuse(f"turn_detection.type must be 'server_vad' or 'semantic_vad', got {kind!r}", "turn_detection.type",
                ErrorCode.UNSUPPORTED_TURN_DETECTION)
    defaults = SEMANTIC_VAD_DEFAULTS if kind == Detection.SEMANTIC_VAD else SERVER_VAD_DEFAULTS
    merged = {**defaults, **{k: v for k, v in value.items() if k in defaults and v is not None}, "type": kind}
    if kind == Detection.SEMANTIC_VAD and merged["eagerness"] not in EAGERNESS:
        _refuse(f"turn_detection.eagerness must be one of {', '.join(EAGERNESS)}", "turn_detection.eagerness")
    threshold = merged.get("threshold", 0.5)
    if not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        _refuse("turn_detection.threshold must be 0..1", "turn_detection.threshold")
    for name in ("silence_duration_ms", "prefix_padding_ms"):
        if not isinstance(merged.get(name, 0), int) or merged.get(name, 0) < 0:
            _refuse(f"turn_detection.{name} must be a non-negative integer", f"turn_detection.{name}")
    return merged


def _positive_int(session: dict, name: str) -> int | None:
    value = session.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        _refuse(f"{name} must be a non-negative integer", name)
    return value


def apply(config: DuplexConfig, settings: SessionSettings, session: Any) -> bool:
    """Merge one `session.update`'s `session` into both; True when turn detection changed.
    Checks everything before changing anything."""
    if not isinstance(session, dict):
        _refuse("session.update needs a 'session' object", "session", ErrorCode.INVALID_EVENT)
    rate = _rate(session)
    encoding = input_encoding(session.get("input_audio_format"), "input_audio_format")
    _check_output(session)
    detection = None
    has_detection = "turn_detection" in session or isinstance(_get(session, "audio", "input"), dict) and \
        "turn_detection" in session["audio"]["input"]
    if has_detection:
        raw = session["turn_detection"] if "turn_detection" in session else session["audio"]["input"]["turn_detection"]
        detection = _turn_detection(raw)
    policy = session.get("overlap_policy")
    if policy is not None and policy not in {p.value for p in OverlapPolicy}:
        _refuse(f"overlap_policy must be one of {', '.join(p.value for p in OverlapPolicy)}", "overlap_policy")
    commit = session.get("playback_commit_policy")
    if commit is not None and commit not in {p.value for p in PlaybackCommitPolicy}:
        _refuse(f"playback_commit_policy must be one of {', '.join(p.value for p in PlaybackCommitPolicy)}",
                "playback_commit_policy")
    short_ms, barge_ms = _positive_int(session, "overlap_short_ack_ms"), _positive_int(session, "overlap_barge_in_ms")
    idle = session.get("idle_timeout_s")
    if idle is not None and (isinstance(idle, bool) or not isinstance(idle, (int, float)) or idle < MIN_IDLE_TIMEOUT_S):
        _refuse(f"idle_timeout_s must be a number of seconds >= {MIN_IDLE_TIMEOUT_S}", "idle_timeout_s")
    if session.get("ref_audio") is not None:  # what the client asked for would not be heard
        _refuse("this server's voice cannot be cloned from a clip: leave ref_audio out to hear the session's voice",
                "ref_audio", ErrorCode.REF_AUDIO_UNSUPPORTED)
    extra = session.get("extra_body")
    if extra is not None and not isinstance(extra, dict):
        _refuse("extra_body must be an object", "extra_body")
    limit = session.get("max_response_output_tokens", session.get("max_output_tokens"))
    check_max_tokens(limit, "max_response_output_tokens")
    modalities = session.get("output_modalities", session.get("modalities"))
    if modalities is not None:
        if not isinstance(modalities, list) or not set(modalities) <= {"audio", "text"} or not modalities:
            _refuse("modalities must be a list of 'audio' and 'text'", "modalities")
        modalities = ["audio"] if "audio" in modalities else ["text"]

    ga: dict[str, Any] = {}
    if isinstance(session.get("instructions"), str):
        ga["instructions"] = session["instructions"]
    if modalities is not None:
        ga["output_modalities"] = modalities
    if limit is not None:
        ga["max_output_tokens"] = limit
    output = {k: v for k, v in (("voice", session.get("voice") or _get(session, "audio", "output", "voice")),
                                ("speed", session.get("speed") or _get(session, "audio", "output", "speed"))) if v is not None}
    if output:
        ga["audio"] = {"output": output}
    settings.update(ga)
    if rate is not None:
        config.input_rate = rate
    if encoding is not None:
        config.input_format = encoding
    if detection is not None:
        config.turn_detection = detection
        if detection.get("interrupt_response") is False:
            config.overlap.policy = OverlapPolicy.LISTEN_ONLY
    if policy is not None:
        config.overlap.policy = OverlapPolicy(policy)
    if commit is not None:
        config.playback_commit_policy = PlaybackCommitPolicy(commit)
    if short_ms is not None:
        config.overlap.short_ack_ms = short_ms
    if barge_ms is not None:
        config.overlap.barge_in_ms = barge_ms
    if idle is not None:
        config.idle_timeout_s = float(idle)
    if extra:
        config.extra_body.update(extra)
        if isinstance(extra.get("auto_response"), bool):
            config.auto_response = extra["auto_response"]
    return has_detection
