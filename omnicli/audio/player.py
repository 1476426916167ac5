"""Play float32 chunks on an output device while they are still being made.

A PortAudio callback pulls from a small jitter buffer; chunks are resampled from the engine's
24 kHz to the device's own rate with one streaming resampler, so joins between chunks are
seamless. The stream starts once ~100 ms are buffered, and ends after the last sample is out.

ALSA reports its own troubles (an underrun when the callback ran late) by printing straight to
fd 2, which lands in the middle of a progress bar; omni routes those messages to its debug log
and counts underruns itself instead (`underruns`), for the caller to report once, in words: from
the callback's status flags, and from the callback's own lateness, since PortAudio does not
always flag an underrun (the whole process stopped for a while, for one).
"""

import asyncio
import logging
import threading
import time
from collections import deque

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.audio.devices import find_device, sounddevice
from omnicli.audio.resampler import StreamResampler
from omnicli.errors import AudioDeviceError

_PREBUFFER_SECONDS = 0.1
_TAIL_PADDING_SECONDS = 0.1  # devices drop the last few ms of a stream; pad so speech is not cut
_FINISH_POLL_SECONDS = 0.05
_LATE_MARGIN_SECONDS = 0.05
"""A callback later than the audio the device still held, by more than this, means it ran dry."""
_STARTING_LATENCIES = 2
"""PortAudio may flag an underflow in a stream's first moments, its buffer full (the device
starting): within this many of the device's latencies of audio played, the flag is not a dropout."""
log = logging.getLogger("omni")


class Player:
    """`continuous=True` (a conversation): once started the device plays silence between
    answers; `flush()` drops what has not been heard yet (barge-in)."""

    realtime = True
    """It plays at the listener's pace: running dry is heard."""

    def __init__(self, device: str | int | None = None, rate: int = SPEECH_RATE, *, continuous: bool = False) -> None:
        sd = sounddevice()
        _quiet_alsa()
        info = find_device(device, "output")
        try:
            self.device_rate = int(info["default_samplerate"])
            sd.check_output_settings(device, samplerate=self.device_rate, channels=1, dtype="float32")
            self._stream = sd.OutputStream(
                samplerate=self.device_rate,
                channels=1,
                dtype="float32",
                device=device,
                callback=self._callback,
                # The device's larger buffer (tens of ms) rides out a busy moment (the GIL held
                # by synthesis, the other core taken) without a dropout; barge-in still stops
                # the answer within it, well under what a listener notices.
                latency="high",
            )
        except (sd.PortAudioError, ValueError) as exc:
            name = info.get("name", device or "default")
            raise AudioDeviceError(f"cannot open the output device {name!r}: {exc}") from exc
        self._rate = rate
        self._continuous = continuous
        self._resampler = StreamResampler(rate, self.device_rate)
        self._queue: deque[np.ndarray] = deque()
        self._lock = threading.Lock()
        self._buffered = 0
        self._closing = False
        self._started = False
        self.played_frames = 0
        """Frames handed to the device so far (silence between answers not counted)."""
        self.underruns = 0
        """Times the device ran dry because the callback came late (a dropout the listener heard)."""
        self._underflowing = False
        self._last_callback: tuple[float, int] | None = None
        """When the last callback ran, and the frames it wrote."""
        self._done = threading.Event()

    def start(self) -> None:
        """Run the device now (a conversation's speaker plays silence until there is speech)."""
        if not self._started:
            self._started = True
            self._stream.start()

    @property
    def buffered_seconds(self) -> float:
        """How much audio waits to be played, in seconds."""
        return self._buffered / self.device_rate

    def flush(self) -> None:
        """Forget everything not yet played, at once."""
        with self._lock:
            self._queue.clear()
            self._buffered = 0
        self._resampler = StreamResampler(self._rate, self.device_rate)

    def write(self, samples: np.ndarray) -> None:
        """Queue samples for playback, resampled to the device's rate."""
        self._push(self._resampler.process(samples))

    def _push(self, samples: np.ndarray) -> None:
        if len(samples):
            with self._lock:
                self._queue.append(np.asarray(samples, dtype=np.float32))
                self._buffered += len(samples)
        if not self._started and (self._closing or self._buffered >= _PREBUFFER_SECONDS * self.device_rate):
            self._started = True
            self._stream.start()

    def _ran_dry(self, frames: int, flagged: bool) -> bool:
        """Whether the device ran out of audio before this callback: PortAudio says so (except as
        the device starts: it flags an underflow there with the buffer full), or the callback came
        later than the last one's audio and the device's own buffer could last."""
        now, last = time.monotonic(), self._last_callback
        self._last_callback = (now, frames)
        starting = self.played_frames < _STARTING_LATENCIES * self._stream.latency * self.device_rate
        if last is None:
            return flagged and not starting
        then, written = last
        late = now - then > written / self.device_rate + self._stream.latency + _LATE_MARGIN_SECONDS
        return (flagged and not starting) or late

    def _callback(self, outdata, frames, timing, status) -> None:
        dry = self._ran_dry(frames, status.output_underflow)
        if dry and not self._underflowing:
            self.underruns += 1  # one dropout, however many callbacks it spans
        self._underflowing = dry
        out = outdata[:, 0]
        filled = 0
        with self._lock:
            while filled < frames and self._queue:
                head = self._queue[0]
                take = min(frames - filled, len(head))
                out[filled : filled + take] = head[:take]
                filled += take
                if take == len(head):
                    self._queue.popleft()
                else:
                    self._queue[0] = head[take:]
            self._buffered -= filled
            self.played_frames += filled
            finished = self._closing and not self._queue and not self._continuous
        out[filled:] = 0.0
        if finished:
            self._done.set()
            raise sounddevice().CallbackStop

    async def finish(self) -> None:
        """Play what is buffered to the end, then close the device."""
        self._push(self._resampler.process(np.zeros(0, dtype=np.float32), last=True))
        self._push(np.zeros(int(_TAIL_PADDING_SECONDS * self.device_rate), dtype=np.float32))
        self._closing = True
        self._push(np.zeros(0, dtype=np.float32))
        # Waited for on the event loop, not in a worker thread: Ctrl-C cancels this at once,
        # where a thread blocked in wait() held the process until the audio ran out.
        # Bounded: a device that stops calling back must not hang the command.
        deadline = time.monotonic() + self._buffered / self.device_rate + 5.0
        while not self._done.is_set():
            if time.monotonic() > deadline:
                self.close()
                raise AudioDeviceError("the output device stopped playing before the end")
            await asyncio.sleep(_FINISH_POLL_SECONDS)
        await asyncio.to_thread(self._drain_and_close)

    def _drain_and_close(self) -> None:
        try:
            self._stream.stop()  # returns once the device's buffer has played out
        finally:
            self._stream.close()
            self._resampler.close()

    def close(self) -> None:
        """Stop at once (Ctrl-C, error): what the device still holds is dropped, not played."""
        try:
            self._stream.abort()
        finally:
            self._stream.close()
            self._resampler.close()


_alsa_handler: object = None
"""The ALSA error handler, kept alive for as long as ALSA may call it (the whole process)."""


def _quiet_alsa() -> None:
    """Send ALSA's error messages (e.g. "ALSA lib pcm.c:8570:(snd_pcm_recover) underrun
    occurred", printed from PortAudio's audio thread) to the debug log instead of fd 2."""
    global _alsa_handler
    if _alsa_handler is not None:
        return
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("asound")
    try:
        alsa = ctypes.CDLL(name or "libasound.so.2")  # the copy PortAudio already loaded
    except OSError:
        _alsa_handler = False  # PortAudio without ALSA: nothing prints
        return
    # void handler(const char *file, int line, const char *function, int err, const char *fmt, ...);
    # the variadic arguments are not read, so the text is the format ("%s occurred").
    handler_type = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)

    def handler(file, line, function, err, fmt) -> None:
        log.debug("ALSA: %s: %s", (function or b"?").decode(errors="replace"), (fmt or b"").decode(errors="replace"))

    _alsa_handler = handler_type(handler)
    alsa.snd_lib_error_set_handler(_alsa_handler)
