"""Where the user's voice comes from: a microphone, or a WAV file played in real time.

Both deliver float32 mono frames at 24 kHz, FRAME_MS long, on an asyncio queue.
"""

import asyncio
import time
from typing import Any

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.resampler import StreamResampler
from omnicli.errors import AudioDeviceError

FRAME_MS = 40
_RATES_TO_TRY = (48000, 44100, 32000, 24000, 16000)


class Microphone:
    """A sounddevice input stream; its callback hands audio to the event loop."""

    def __init__(self, device: str | int | None = None) -> None:
        from omnicli.audio.devices import find_device, sounddevice

        sd = sounddevice()
        info = find_device(device, "input")
        self.rate = self._usable_rate(sd, device, int(info["default_samplerate"]))
        self.name = info["name"]
        self._device = device
        self._resampler = StreamResampler(self.rate, SPEECH_RATE)
        self.frames: asyncio.Queue = asyncio.Queue()
        self._stream: Any = None

    @staticmethod
    def _usable_rate(sd, device, preferred: int) -> int:
        for rate in (preferred, *_RATES_TO_TRY):
            try:
                sd.check_input_settings(device, samplerate=rate, channels=1, dtype="int16")
                return rate
            except (sd.PortAudioError, ValueError):
                continue
        raise AudioDeviceError(f"the input device {device or '(default)'} cannot record mono PCM16 at any usual rate")

    async def start(self) -> None:
        """Open the input stream; its frames then arrive on `frames`."""
        from omnicli.audio.devices import sounddevice

        sd = sounddevice()
        loop = asyncio.get_running_loop()

        def callback(indata, frames, time_info, status) -> None:
            samples = indata[:, 0].astype(np.float32) / 32768.0
            loop.call_soon_threadsafe(self._deliver, samples)

        try:
            self._stream = sd.InputStream(samplerate=self.rate, channels=1, dtype="int16", device=self._device,
                                          blocksize=int(self.rate * FRAME_MS / 1000), callback=callback)
            self._stream.start()
        except sd.PortAudioError as exc:
            if self._stream is not None:
                stream, self._stream = self._stream, None
                stream.close()
            raise AudioDeviceError(f"cannot open the input device {self.name!r}: {exc}") from exc

    def _deliver(self, samples: np.ndarray) -> None:
        self.frames.put_nowait(self._resampler.process(samples))

    async def stop(self) -> None:
        """Stop and close the input stream, if one is open."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await asyncio.to_thread(stream.stop)
            stream.close()


class FileVoice:
    """A WAV file 'spoken' into the session in real time, then silence so a turn can end."""

    def __init__(self, path: str, *, tail_seconds: float = 2.0) -> None:
        from omnicli.audio.formats import read_audio_file
        from omnicli.audio.pcm import resample

        _, samples, rate = read_audio_file(path, "--input-file")
        self.audio = np.concatenate([resample(samples, rate, SPEECH_RATE), np.zeros(int(tail_seconds * SPEECH_RATE), np.float32)])
        self.frames: asyncio.Queue = asyncio.Queue()
        self.finished = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        """Begin speaking the file into `frames` in real time."""
        self._task = asyncio.create_task(self._play())

    async def _play(self) -> None:
        step = SPEECH_RATE * FRAME_MS // 1000
        start = time.monotonic()
        for n, offset in enumerate(range(0, len(self.audio), step)):
            await asyncio.sleep(max(0.0, start + n * FRAME_MS / 1000 - time.monotonic()))
            self.frames.put_nowait(self.audio[offset : offset + step])
        self.finished.set()

    async def stop(self) -> None:
        """Stop speaking the file."""
        if self._task is not None:
            self._task.cancel()
