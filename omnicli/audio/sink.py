"""Where synthesized speech goes: a file (written whole, atomically), stdout, the speaker.

Raw PCM to stdout streams as it is made, so `omni speak ... -o - --format pcm | aplay` starts
at once; container formats are encoded once at the end, so a file is never half-written.
"""

import sys
from typing import TYPE_CHECKING

import numpy as np

from omnicli.audio.atomic import atomic_write
from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.audio.formats import AudioFormat, encode
from omnicli.audio.pcm import float_to_pcm16, resample
from omnicli.audio.resampler import StreamResampler
from omnicli.errors import OmniError

if TYPE_CHECKING:
    from omnicli.audio.player import Player


class SpeechOutput:
    """Sends synthesized speech to a file, stdout or the speaker, whichever the command asked for."""

    def __init__(
        self,
        *,
        output: str | None,
        fmt: AudioFormat,
        rate: int,
        play: bool,
        device: str | int | None = None,
    ) -> None:
        self.output = output
        self.fmt = fmt
        self.rate = rate
        self._play = play
        self._device = device
        self._player: Player | None = None
        self._parts: list[np.ndarray] = []
        self._samples = 0
        self._stdout_stream = output == "-" and fmt is AudioFormat.PCM
        self._stdout_resampler = StreamResampler(SPEECH_RATE, rate) if self._stdout_stream else None

    async def open(self) -> None:
        """Open the speaker before any synthesis, so a bad device fails first."""
        if self._play:
            from omnicli.audio.player import Player

            self._player = Player(self._device)

    async def write(self, chunk: AudioChunk) -> None:
        """Take the next chunk of speech: play it, stream it to stdout or keep it for the file."""
        self._samples += len(chunk.samples)
        if self._player is not None:
            self._player.write(chunk.samples)
        if self._stdout_resampler is not None:
            self._emit(float_to_pcm16(self._stdout_resampler.process(chunk.samples)))
        elif self.output is not None:
            self._parts.append(chunk.samples)

    @property
    def player(self) -> "Player | None":
        """The speaker, once open and until it is finished or aborted (for a playback display)."""
        return self._player

    @property
    def empty(self) -> bool:
        """No audio was written (yet)."""
        return self._samples == 0

    async def finish(self) -> float:
        """Complete every output; returns the seconds of speech produced."""
        if self._samples == 0:
            raise OmniError("no audio was produced")
        if self._stdout_resampler is not None:
            self._emit(float_to_pcm16(self._stdout_resampler.process(np.zeros(0, np.float32), last=True)))
        elif self.output is not None:
            audio = resample(np.concatenate(self._parts), SPEECH_RATE, self.rate)
            data = encode(audio, self.rate, self.fmt)
            if self.output == "-":
                self._emit(data)
            else:
                atomic_write(self.output, data)
        if self._player is not None:
            player, self._player = self._player, None
            await player.finish()
        return self._samples / SPEECH_RATE

    def abort(self) -> None:
        """Stop playback at once when synthesis failed or was interrupted."""
        if self._player is not None:
            player, self._player = self._player, None
            player.close()

    @staticmethod
    def _emit(data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
