"""A real PulseAudio daemon in user mode with a pipe source as the microphone and a pipe sink as
the speaker: tests hear exactly what `omni` plays, with no sound card and no kernel modules.

The speaker FIFO is drained by a reader thread into a buffer the test inspects; the microphone
FIFO is fed silence continuously (a pipe source delivers nothing without a writer), and tests
can queue speech into it.
"""

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

RATE = 48000


class PulseAudio:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.runtime = root / "runtime"
        self.socket = root / "native"
        self.mic_fifo = root / "mic.fifo"
        self.spk_fifo = root / "spk.fifo"
        self._captured = bytearray()
        self._mic_queue = bytearray()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.env: dict[str, str] = {}

    def start(self) -> None:
        self.runtime.mkdir(mode=0o700, parents=True)
        os.chmod(self.runtime, 0o700)
        os.mkfifo(self.spk_fifo)  # module-pipe-source makes the mic FIFO itself, and fails if it exists
        (self.root / "default.pa").write_text(
            f"load-module module-native-protocol-unix auth-anonymous=1 socket={self.socket}\n"
            f"load-module module-null-sink sink_name=nullsink rate={RATE} channels=1\n"
            f"load-module module-pipe-source source_name=vmic file={self.mic_fifo} format=s16le rate={RATE} channels=1\n"
            f"load-module module-pipe-sink sink_name=vspk file={self.spk_fifo} format=s16le rate={RATE} channels=1 use_system_clock_for_timing=yes\n"
            "set-default-source vmic\n"
            "set-default-sink vspk\n"
        )
        client_conf = self.root / "client.conf"
        client_conf.write_text(f"autospawn = no\ndefault-server = unix:{self.socket}\n")
        self.env = {
            "HOME": str(self.root),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "PULSE_SERVER": f"unix:{self.socket}",
            "PULSE_CLIENTCONFIG": str(client_conf),
        }
        env = {**os.environ, **self.env}
        # The speaker FIFO's reader is waiting before the daemon opens it for writing.
        threading.Thread(target=self._drain_speaker, daemon=True).start()
        subprocess.run(
            [shutil.which("pulseaudio") or "pulseaudio", "-n", "-F", str(self.root / "default.pa"),
             "--exit-idle-time=-1", "--daemonize=yes", "--use-pid-file=no", "--log-target=stderr"],
            env=env, check=True, capture_output=True, timeout=30,
        )
        deadline = time.monotonic() + 10
        while not (self.socket.exists() and self.mic_fifo.exists()):
            if time.monotonic() > deadline:
                raise RuntimeError("PulseAudio did not create its socket and microphone FIFO")
            time.sleep(0.05)
        threading.Thread(target=self._feed_microphone, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        env = {**os.environ, **self.env}
        subprocess.run(["pactl", "exit"], env=env, capture_output=True, timeout=10)

    def _drain_speaker(self) -> None:
        with open(self.spk_fifo, "rb", buffering=0) as fifo:
            while not self._stop.is_set():
                data = fifo.read(4096)
                if not data:
                    time.sleep(0.01)
                    continue
                with self._lock:
                    self._captured.extend(data)

    def _feed_microphone(self) -> None:
        period = 0.02
        silence = bytes(int(RATE * period) * 2)
        with open(self.mic_fifo, "wb", buffering=0) as fifo:
            next_time = time.monotonic()
            while not self._stop.is_set():
                with self._lock:
                    piece = bytes(self._mic_queue[: len(silence)])
                    del self._mic_queue[: len(silence)]
                try:
                    fifo.write(piece + silence[len(piece):])
                except BrokenPipeError:
                    return
                next_time += period
                time.sleep(max(0.0, next_time - time.monotonic()))

    def speak_into_microphone(self, samples: np.ndarray) -> None:
        """Queue float32 samples at 48 kHz to be 'heard' by the microphone in real time."""
        pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
        with self._lock:
            self._mic_queue.extend(pcm)

    def wait_until_quiet(self, quiet_s: float = 0.8, timeout: float = 60, level: float = 0.01) -> None:
        """Return once the speaker has played sound and then nothing above `level` for `quiet_s`:
        an answer made faster than real time is still playing when its last event arrives."""
        deadline, seen, loud_at = time.monotonic() + timeout, 0, None
        while time.monotonic() < deadline:
            with self._lock:
                data = bytes(self._captured[seen - seen % 2:])
                seen = len(self._captured)
            if np.abs(np.frombuffer(data[: len(data) - len(data) % 2], dtype="<i2")).max(initial=0) > level * 32768:
                loud_at = time.monotonic()
            if loud_at is not None and time.monotonic() - loud_at >= quiet_s:
                return
            time.sleep(0.1)
        raise AssertionError(f"the speaker did not play out and fall quiet within {timeout} s")

    def take_speaker(self) -> np.ndarray:
        """Everything played since the last call, as float32 at 48 kHz."""
        with self._lock:
            data = bytes(self._captured)
            self._captured.clear()
        data = data[: len(data) - len(data) % 2]
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
