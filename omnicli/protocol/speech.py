"""`POST /v1/audio/speech`: the body both our client sends and our server validates.

OpenAI's fields plus vLLM-Omni's extensions (task_type, language, ref_audio, ref_text,
max_new_tokens, stream, stream_format). Unknown fields are ignored, as OpenAI-style servers do.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from omnicli.audio.formats import AudioFormat


class SpeechBody(BaseModel):
    """The text-to-speech request: what to say, in which voice and format, streamed or whole."""

    model_config = ConfigDict(extra="ignore")

    input: str
    model: str | None = None
    voice: str | None = None
    response_format: AudioFormat = AudioFormat.WAV
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    instructions: str | None = None
    language: str | None = None
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    max_new_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_format: Literal["sse", "audio"] | None = None

    @field_validator("input")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input must not be empty")
        return value

    @model_validator(mode="after")
    def _streams_are_pcm_or_wav(self) -> "SpeechBody":
        if self.streaming and self.response_format not in (AudioFormat.PCM, AudioFormat.WAV):
            raise ValueError(
                f"streaming needs response_format 'pcm' or 'wav', got '{self.response_format.value}'"
            )
        return self

    @property
    def streaming(self) -> bool:
        """Whether the audio should stream as it is made rather than come as one file."""
        return self.stream or self.stream_format is not None

    @property
    def sse(self) -> bool:
        """Whether the stream is server-sent events rather than raw audio bytes."""
        return self.streaming and self.stream_format != "audio"
