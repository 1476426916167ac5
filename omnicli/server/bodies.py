"""Request bodies as this server accepts them: the shared wire models, plus what a server must
refuse that a local command need not (sizes, unspeakable or unencodable text, several choices,
voices given as paths). Each refusal is a 400 with a clear message before any work starts."""

from pydantic import field_validator, model_validator

from omnicli.protocol.chat import ChatBody
from omnicli.protocol.speech import SpeechBody

MAX_SPEECH_CHARS = 4096
"""OpenAI's limit for /v1/audio/speech input."""


def check_text(value: str, field: str, *, allow_nul: bool = True) -> str:
    """Text must encode as UTF-8: a lone surrogate (legal in JSON's \\uXXXX) cannot."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{field} holds a lone surrogate ({value[exc.start]!r}) at character {exc.start}; "
                         "send valid Unicode text") from None
    if not allow_nul and "\0" in value:
        raise ValueError(f"{field} holds a NUL character at character {value.index(chr(0))}")
    return value


class ServedSpeechBody(SpeechBody):
    """A speech request as this server accepts it: speakable text within OpenAI's length limit."""

    @field_validator("input")
    @classmethod
    def _speakable(cls, value: str) -> str:
        if len(value) > MAX_SPEECH_CHARS:
            raise ValueError(f"input is {len(value)} characters long; the limit is {MAX_SPEECH_CHARS}")
        check_text(value, "input", allow_nul=False)
        if value.strip() and not any(c.isalnum() for c in value):
            raise ValueError("input has nothing to speak (no letters or digits)")
        return value


class ServedChatBody(ChatBody):
    """A chat request as this server accepts it: one choice only."""

    n: int = 1
    """OpenAI's number of choices; this server answers with one."""

    @field_validator("n")
    @classmethod
    def _one_choice(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"n must be 1 (this server answers with one choice), got {value}")
        return value

    @model_validator(mode="after")
    def _encodable(self) -> "ServedChatBody":
        for i, message in enumerate(self.messages):
            texts = [message.content] if isinstance(message.content, str) else [
                part.text for part in message.content or [] if part.text is not None]
            for text in texts:
                check_text(text, f"messages[{i}].content")
        return self
