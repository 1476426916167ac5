"""The realtime dialects `omni talk` speaks. Server events are read whichever dialect the
server speaks: OpenAI GA (and vLLM-Omni's turn-based handler), OpenAI beta spellings, and
vLLM-Omni's legacy speech-to-text style path (audio in an `audio` field, `transcription.delta`,
no response.*). What the client sends differs between GA (`GA`) and that legacy path (`Legacy`).
"""

import base64
from dataclasses import dataclass

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import float_to_pcm16
from omnicli.errors import capped

AUDIO_DELTAS = {"response.output_audio.delta", "response.audio.delta"}
ANSWER_TEXT = {"response.output_audio_transcript.delta", "response.audio_transcript.delta",
               "response.output_text.delta", "response.text.delta", "transcription.delta"}


@dataclass(frozen=True)
class Heard:
    """A server event, whatever its dialect, reduced to what the talk client acts on."""

    kind: str
    """audio, answer_text, user_text, response_started, response_done, speech_started,
    speech_stopped, session, session_updated, error, or other."""
    text: str = ""
    pcm: bytes = b""
    rate: int = SPEECH_RATE
    item_id: str | None = None
    status: str | None = None
    detects_turns: bool = False
    """session, session_updated: whether the session the server holds has turn detection on."""
    audio_end_ms: int | None = None
    """speech_stopped: where the speech ended, in ms of the audio appended (when the server says)."""


def read(event: dict) -> Heard:
    """What a server event means to the talk client, whichever dialect it comes in."""
    kind = event.get("type", "")
    if kind in AUDIO_DELTAS:
        data = event.get("delta") or event.get("audio") or ""
        return Heard("audio", pcm=base64.b64decode(data), rate=int(event.get("sample_rate_hz") or SPEECH_RATE),
                     item_id=event.get("item_id"))
    if kind in ANSWER_TEXT:
        return Heard("answer_text", text=event.get("delta") or "", item_id=event.get("item_id"))
    if kind == "conversation.item.input_audio_transcription.completed":
        return Heard("user_text", text=event.get("transcript") or "", item_id=event.get("item_id"))
    if kind == "response.created":
        return Heard("response_started", item_id=(event.get("response") or {}).get("id"))
    if kind == "response.output_item.added":
        return Heard("answer_item", item_id=(event.get("item") or {}).get("id"))
    if kind == "response.done":
        return Heard("response_done", status=(event.get("response") or {}).get("status"))
    if kind in ("response.output_audio.done", "response.audio.done"):
        return Heard("audio_done")
    if kind == "input_audio_buffer.speech_started":
        return Heard("speech_started", item_id=event.get("item_id"))
    if kind == "input_audio_buffer.speech_stopped":
        end = event.get("audio_end_ms")
        return Heard("speech_stopped", item_id=event.get("item_id"), audio_end_ms=end if isinstance(end, int) else None)
    if kind in ("session.created", "session.updated"):
        return Heard("session" if kind == "session.created" else "session_updated",
                     detects_turns=detects_turns(event.get("session")))
    if kind == "error":
        error = event.get("error") or {}
        return Heard("error", text=capped(str(error.get("message") or error)))
    return Heard("other")


def detects_turns(session) -> bool:
    """What the server accepted, not what was asked: GA keeps `turn_detection` under
    `audio.input`, beta at the top; vLLM-Omni's turn-based handler drops it (no server VAD)."""
    if not isinstance(session, dict):
        return False
    audio_in = (session.get("audio") or {}).get("input") or {}
    return bool(audio_in.get("turn_detection") or session.get("turn_detection"))


def _append(pcm: np.ndarray) -> dict:
    return {"type": "input_audio_buffer.append", "audio": base64.b64encode(float_to_pcm16(pcm)).decode()}


class GA:
    """OpenAI Realtime GA: 24 kHz appends; commit + response.create ask; cancel and truncate interrupt."""

    interruptible = True
    commit_starts_answer = False
    may_detect_turns = True

    def session_update(self, *, turn_detection: dict | None, instructions: str | None, voice: str | None,
                       model: str | None) -> dict:
        """The opening `session.update`: audio formats, turn detection, instructions and voice."""
        pcm = {"type": "audio/pcm", "rate": SPEECH_RATE}
        session: dict = {"type": "realtime", "output_modalities": ["audio"],
                         "audio": {"input": {"format": pcm, "turn_detection": turn_detection},
                                   "output": {"format": dict(pcm)}}}
        if instructions:
            session["instructions"] = instructions
        if voice:
            session["audio"]["output"]["voice"] = voice
        return {"type": "session.update", "session": session}

    def append(self, frame: np.ndarray) -> dict:
        """A microphone frame (24 kHz) as an `input_audio_buffer.append` event."""
        return _append(frame)

    def ask(self) -> list[dict]:
        """The events that end the user's turn and ask for the answer."""
        return [{"type": "input_audio_buffer.commit"}, {"type": "response.create"}]

    def goodbye(self) -> list[dict]:
        """The events to send before the connection closes (none in GA)."""
        return []


LEGACY_RATE = 16000


class Legacy(GA):
    """vLLM-Omni <= 0.30: `session.update {model}` first, 16 kHz appends, `commit {final: false}`
    starts the answer and `{final: true}` ends the input; no cancel or truncate."""

    interruptible = False
    commit_starts_answer = True
    may_detect_turns = False

    def __init__(self) -> None:
        from omnicli.audio.resampler import StreamResampler

        self._resampler = StreamResampler(SPEECH_RATE, LEGACY_RATE)

    def session_update(self, *, turn_detection: dict | None, instructions: str | None, voice: str | None,
                       model: str | None) -> dict:
        """The legacy opener: it names the model and nothing else."""
        return {"type": "session.update", "model": model}

    def append(self, frame: np.ndarray) -> dict:
        """A microphone frame resampled to 16 kHz, as an append event."""
        return _append(self._resampler.process(frame))

    def ask(self) -> list[dict]:
        """A commit that is not final: the server answers what it has heard so far."""
        return [{"type": "input_audio_buffer.commit", "final": False}]

    def goodbye(self) -> list[dict]:
        """The final commit, which tells the legacy server the input has ended."""
        return [{"type": "input_audio_buffer.commit", "final": True}]
