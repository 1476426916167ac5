"""Server events as `omni talk` understands them, whichever realtime dialect the server speaks:
OpenAI GA (and vLLM-Omni's turn-based handler), OpenAI beta spellings, and vLLM-Omni's legacy
speech-to-text style path (audio in an `audio` field, `transcription.delta`, no response.*)."""

import base64
from dataclasses import dataclass

AUDIO_DELTAS = {"response.output_audio.delta", "response.audio.delta"}
ANSWER_TEXT = {"response.output_audio_transcript.delta", "response.audio_transcript.delta",
               "response.output_text.delta", "response.text.delta", "transcription.delta"}


@dataclass(frozen=True)
class Heard:
    kind: str
    """audio, answer_text, user_text, response_started, response_done, speech_started,
    speech_stopped, session, error, or other."""
    text: str = ""
    pcm: bytes = b""
    rate: int = 24000
    item_id: str | None = None
    status: str | None = None


def read(event: dict) -> Heard:
    kind = event.get("type", "")
    if kind in AUDIO_DELTAS:
        data = event.get("delta") or event.get("audio") or ""
        return Heard("audio", pcm=base64.b64decode(data), rate=int(event.get("sample_rate_hz") or 24000),
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
        return Heard("speech_stopped", item_id=event.get("item_id"))
    if kind in ("session.created", "session.updated"):
        return Heard("session")
    if kind == "error":
        error = event.get("error") or {}
        return Heard("error", text=str(error.get("message") or error))
    return Heard("other")
