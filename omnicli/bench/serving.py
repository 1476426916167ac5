"""The serving figures of a run, under the names `vllm bench serve --omni` gives them in its
result JSON, so a bench-wer run and a vLLM-Omni bench run on one server read side by side.

Times to first audio are in milliseconds and underruns in seconds, as there; `p99_` is its
default percentile. Only this run's requests count (a resumed run's earlier ones ran under
another load).
"""

import statistics

from omnicli.bench.playback import CONTINUITY_THRESHOLD_S
from omnicli.bench.scoring import percentile


def serving_figures(records: list[dict], duration: float, *, concurrency: int | None, rate: float | None) -> dict:
    """The run's throughput, latency and underrun figures, named as `vllm bench serve --omni` names them."""
    answered = [r for r in records if r.get("generation_seconds") is not None]
    audio = sum(r.get("audio_seconds") or 0.0 for r in answered)
    ttfp = [r["ttfa"] * 1000 for r in answered if r.get("ttfa") is not None]
    rtf = [r["rtf"] for r in answered if r.get("rtf") is not None]
    underrun = [r.get("underrun_seconds") or 0.0 for r in answered]
    figures: dict = {
        "completed": len(answered),
        "failed": sum(1 for r in records if r.get("status") == "request_failed"),
        "max_concurrency": concurrency,
        "request_rate": rate,
        "duration": duration,
        "request_throughput": len(answered) / duration if duration > 0 else None,
        "total_audio_duration_s": audio,
        "audio_throughput": audio / duration if duration > 0 else None,
    }
    figures |= _spread("audio_ttfp_ms", ttfp)
    figures |= _spread("audio_rtf", rtf)
    figures |= _spread("audio_underrun_s", underrun)
    figures["audio_underrun_count"] = sum(r.get("underruns") or 0 for r in answered)
    figures["total_audio_underrun_s"] = sum(underrun)
    figures["long_gap_count"] = sum(r.get("long_gaps") or 0 for r in answered)
    figures["longest_gap_s"] = max((r.get("longest_gap_seconds") or 0.0 for r in answered), default=None)
    figures["audio_continuity_ok_rate"] = (
        sum(1 for u in underrun if u <= CONTINUITY_THRESHOLD_S) / len(underrun) if underrun else None)
    return figures


def _spread(name: str, values: list[float]) -> dict:
    """`mean_NAME`, `median_NAME`, `p99_NAME` (None when there is nothing to measure)."""
    return {
        f"mean_{name}": statistics.fmean(values) if values else None,
        f"median_{name}": statistics.median(values) if values else None,
        f"p99_{name}": percentile(values, 0.99),
    }
