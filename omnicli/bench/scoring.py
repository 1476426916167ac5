"""Word error rate exactly as Seed-TTS-eval computes it, and the summary of a run.

Normalisation: every punctuation mark (ASCII and Chinese, as `string.punctuation` plus
`zhon.hanzi.punctuation`) is removed except the apostrophe; English is lowercased; Chinese is
split into characters, so its "WER" is a CER. Optionally Whisper's English normaliser instead.
Per utterance: jiwer's `process_words`.
"""

import re
import statistics
import string
from dataclasses import dataclass

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _punctuation() -> str:
    from zhon.hanzi import punctuation as chinese

    return (string.punctuation + chinese).replace("'", "")


def language_of(text: str) -> str:
    """'zh' when the text holds Chinese characters, else 'en': it decides how words are split."""
    return "zh" if _CJK.search(text) else "en"


def normalize(text: str, language: str, normalizer: str = "seed-tts") -> str:
    """The text as Seed-TTS-eval compares it (or Whisper's English normaliser when asked)."""
    if normalizer == "whisper" and language == "en":
        from whisper_normalizer.english import EnglishTextNormalizer

        return " ".join(EnglishTextNormalizer()(text).split())
    text = text.translate(str.maketrans("", "", _punctuation()))
    if language == "zh":
        return " ".join(ch for ch in text if not ch.isspace())
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class Score:
    """One utterance's word error rate, its error counts and the normalised texts compared."""

    wer: float
    substitutions: int
    deletions: int
    insertions: int
    hits: int
    reference: str
    hypothesis: str


def score(reference: str, hypothesis: str, *, language: str | None = None, normalizer: str = "seed-tts") -> Score:
    """Compare the heard words with the reference after normalisation, as Seed-TTS-eval does."""
    import jiwer

    language = language or language_of(reference)
    truth, hypo = normalize(reference, language, normalizer), normalize(hypothesis, language, normalizer)
    if not truth:
        raise ValueError("the reference text is empty after normalisation")
    if not hypo:  # jiwer refuses an empty hypothesis: everything was deleted
        words = len(truth.split())
        return Score(1.0, 0, words, 0, 0, truth, hypo)
    out = jiwer.process_words(truth, hypo)
    return Score(out.wer, out.substitutions, out.deletions, out.insertions, out.hits, truth, hypo)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th quantile by linear interpolation (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def resampled_means(values, seed: int = 0, resamples: int = 10_000):
    """The means of `resamples` bootstrap resamples of `values` (an array), `seed` fixing them."""
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    return data[np.random.default_rng(seed).integers(0, len(data), (resamples, len(data)))].mean(axis=1)


def mean_with_interval(values: list[float], seed: int = 0) -> dict | None:
    """The mean and its 95 % bootstrap interval (None for no values)."""
    if not values:
        return None
    import numpy as np

    low, high = np.percentile(resampled_means(values, seed), [2.5, 97.5])
    return {"mean": statistics.fmean(values), "ci95": [float(low), float(high)]}


def summarize(records: list[dict]) -> dict:
    """The run's figures from its per-utterance records (items.jsonl lines)."""
    scored = [r for r in records if r.get("status") == "ok"]
    wers = [r["wer"] for r in scored]
    ttfa = [r["ttfa"] for r in scored if r.get("ttfa") is not None]
    rtf = [r["rtf"] for r in scored if r.get("rtf") is not None]
    errors = sum(r["substitutions"] + r["deletions"] + r["insertions"] for r in scored)
    words = sum(r["substitutions"] + r["deletions"] + r["hits"] for r in scored)
    failures = {kind: sum(1 for r in records if r.get("status") == kind) for kind in ("request_failed", "no_audio", "asr_failed")}
    return {
        "utterances": len(records),
        "scored": len(scored),
        "failures": failures,
        "wer_mean": statistics.fmean(wers) if wers else None,
        "wer_corpus": errors / words if words else None,
        "wer_median": statistics.median(wers) if wers else None,
        "wer_p90": percentile(wers, 0.9),
        "ttfa_p50": percentile(ttfa, 0.5),
        "ttfa_p90": percentile(ttfa, 0.9),
        "rtf_mean": statistics.fmean(rtf) if rtf else None,
        "audio_seconds": sum(r.get("audio_seconds") or 0 for r in scored),
        **_naturalness(scored),
        **_similarity(scored),
    }


def _naturalness(scored: list[dict]) -> dict:
    """The predicted MOS over the utterances (bench-wer --mos): mean and 95 % interval, and P.835's overall."""
    mos = [r["mos"] for r in scored if r.get("mos") is not None]
    if not mos:
        return {}
    overall = [r["mos_ovrl"] for r in scored if r.get("mos_ovrl") is not None]
    return {"mos_mean": mean_with_interval(mos), "mos_ovrl_mean": mean_with_interval(overall), "mos_scored": len(mos)}


def _similarity(scored: list[dict]) -> dict:
    """Speaker similarity to the prompts over the utterances (bench-wer --sim): mean and 95 % interval."""
    sims = [r["sim"] for r in scored if r.get("sim") is not None]
    return {"sim_mean": mean_with_interval(sims), "sim_scored": len(sims)} if sims else {}
