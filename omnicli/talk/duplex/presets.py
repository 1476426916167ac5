"""What `omni talk --duplex` asks a duplex server for: the session shape of each known model
(`--preset`), and the microphone's audio in that shape's input format.

A preset only shapes the `session.update` (input rate and encoding, voice clip, model knobs in
`extra_body`); how the conversation then goes is decided by the `capabilities` the server
answers with, never by the preset's or the model's name.
"""

import base64
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.pcm import float_to_pcm16
from omnicli.errors import UsageError


@dataclass(frozen=True)
class Preset:
    """A known model's session shape: input format and rate, voice, and the knobs it needs."""

    name: str
    input_rate: int = 16000
    input_format: str = "pcm16"
    """"pcm16" or "pcm_f32le", little-endian mono."""
    output_rate: int = SPEECH_RATE
    needs_ref_audio: bool = False
    """The model speaks in a voice cloned from a clip (`ref_audio`), and refuses a session without one."""
    overlap_policy: str | None = None
    playback_commit_policy: str | None = None
    extra_body: dict = field(default_factory=dict)
    voice: str | None = None
    """The voice asked for unless `--voice` names another (PersonaPlex's bundled voice prompts)."""


PRESETS = {
    "default": Preset("default"),
    "minicpmo": Preset("minicpmo", needs_ref_audio=True, overlap_policy="listen_only",
                       playback_commit_policy="ack_only",
                       extra_body={"native_duplex": True, "force_listen_count": 0}),
    "personaplex": Preset("personaplex", input_rate=24000, input_format="pcm_f32le", voice="NATF2.pt"),
}


def preset(name: str | None, ref_audio: str | None) -> Preset:
    """The preset `--preset NAME` names, checked against what it needs (a usage error if not)."""
    chosen = PRESETS.get(name or "default")
    if chosen is None:
        raise UsageError(f"--preset must be one of {', '.join(PRESETS)}, got {name!r}")
    if chosen.needs_ref_audio and not ref_audio:
        raise UsageError(f"--preset {chosen.name} needs --ref-audio FILE (a clip of the voice the model speaks in)")
    return chosen


def ref_audio_data_url(path: str) -> str:
    """A voice clip as the `data:audio/wav;base64,...` URL `session.update` carries; any audio
    file omni reads is sent as WAV."""
    from omnicli.audio.formats import AudioFormat, encode, read_audio_file

    data, samples, rate = read_audio_file(path, "--ref-audio")
    wav = data if data[:4] == b"RIFF" else encode(samples, rate, AudioFormat.WAV)
    return "data:audio/wav;base64," + base64.b64encode(wav).decode()


_PICTURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")
"""JPEG and PNG, what `video_frames` carries."""
MAX_PICTURE_BYTES = 8 * 1024 * 1024


def camera_frame(path: str) -> str:
    """`--image`: a JPEG or PNG picture, base64, as a camera frame rides an append."""
    try:
        if Path(path).stat().st_size > MAX_PICTURE_BYTES:  # said before a huge file is read
            raise UsageError(f"--image {path} is over {MAX_PICTURE_BYTES // 2**20} MiB; send a smaller picture")
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read --image {path}: {exc.strerror or exc}") from exc
    if not data.startswith(_PICTURES):
        raise UsageError(f"--image {path} is not a JPEG or PNG picture")
    return base64.b64encode(data).decode()


def session_config(chosen: Preset, *, model: str | None = None, ref_audio: str | None = None,
                   instructions: str | None = None, voice: str | None = None) -> dict:
    """The `session` of the opening `session.update`: both the beta spellings of the formats
    and the rates, as vLLM-Omni's own client declares them."""
    session: dict = {
        "modalities": ["audio", "text"],
        "input_audio_format": chosen.input_format,
        "output_audio_format": "pcm16",
        "sample_rate_hz": chosen.input_rate,
        "audio": {"input": {"sample_rate_hz": chosen.input_rate}, "output": {"sample_rate_hz": chosen.output_rate}},
        "turn_detection": None,
        "extra_body": {"auto_response": True, **chosen.extra_body},
    }
    optional = {"model": model, "ref_audio": ref_audio, "instructions": instructions, "voice": voice or chosen.voice,
                "overlap_policy": chosen.overlap_policy, "playback_commit_policy": chosen.playback_commit_policy}
    session.update({key: value for key, value in optional.items() if value is not None})
    return session


class InputEncoder:
    """Microphone frames (float32 at 24 kHz) as the bytes the preset's input format wants."""

    def __init__(self, chosen: Preset) -> None:
        from omnicli.audio.resampler import StreamResampler

        self.format = chosen.input_format
        self.rate = chosen.input_rate
        self._resampler = StreamResampler(SPEECH_RATE, chosen.input_rate)

    def encode(self, frame: np.ndarray) -> bytes:
        """A microphone frame as the bytes of the preset's input format and rate."""
        samples = self._resampler.process(frame)
        if self.format == "pcm_f32le":
            return np.clip(samples, -1.0, 1.0).astype("<f4").tobytes()
        return float_to_pcm16(samples)

    def duration_ms(self, data: bytes) -> float:
        """Milliseconds of audio that encoded `data` holds."""
        return len(data) * 1000 / (self.rate * (4 if self.format == "pcm_f32le" else 2))
