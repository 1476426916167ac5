"""`POST /v1/chat/completions` as our server reads it: OpenAI's request, checked up front.

Content parts: text, `input_audio` {data (base64), format}, `image_url` {url (data URI)}.
"""

import base64
import binascii
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from omnicli.audio.formats import AudioFormat

CHAT_AUDIO_FORMATS = [f.value for f in AudioFormat] + ["pcm16"]
"""What chat's `audio.format` accepts: every format omni writes, and chat APIs' name for pcm."""


class AudioOptions(BaseModel):
    """Chat's `audio` field: the voice and format of a spoken answer."""

    model_config = ConfigDict(extra="ignore")

    voice: str | None = None
    format: str = "wav"

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in CHAT_AUDIO_FORMATS:
            raise ValueError(f"Invalid audio format '{value}'. Supported formats: {CHAT_AUDIO_FORMATS}")
        return value


class InputAudio(BaseModel):
    """An audio clip inside a message: base64 data and its format."""

    data: str
    format: str = "wav"

    @field_validator("data")
    @classmethod
    def _base64(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("input_audio.data is not valid base64") from exc
        return value


class ImageUrl(BaseModel):
    """An image inside a message, by URL (a data URI carries the image itself)."""

    url: str


class ContentPart(BaseModel):
    """One part of a message's content: text, audio or an image."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["text", "input_audio", "image_url"]
    text: str | None = None
    input_audio: InputAudio | None = None
    image_url: ImageUrl | None = None


class ChatMessage(BaseModel):
    """One message of the conversation: who said it and what."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart] | None = None


class StreamOptions(BaseModel):
    """Streaming options; `include_usage` asks for a final chunk with token counts."""

    include_usage: bool = False


class ChatBody(BaseModel):
    """The chat completion request: the conversation, the wanted modalities and how to stream."""

    model_config = ConfigDict(extra="ignore")

    messages: list[ChatMessage] = Field(min_length=1)
    model: str | None = None
    modalities: list[Literal["text", "audio"]] = ["text"]
    audio: AudioOptions | None = None
    voice: str | None = None
    """vLLM-Omni reads the voice from the top level too."""
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=8192)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=8192)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
