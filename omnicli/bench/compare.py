"""`--baseline RUN`: this run beside an earlier one, item by item (the utterances both scored), with
each figure's difference, a 95 % paired-bootstrap interval on it and whether it is significant."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnicli.bench.journal import read_records
from omnicli.bench.scoring import resampled_means
from omnicli.errors import UsageError

RESAMPLES = 10_000
"""Bootstrap resamples of the paired differences."""


@dataclass(frozen=True)
class Figure:
    """A per-utterance figure the comparison weighs, and which way is better."""

    key: str
    label: str
    lower_is_better: bool = True
    percent: bool = False


FIGURES = (Figure("wer", "WER", percent=True), Figure("mos", "MOS", lower_is_better=False),
           Figure("sim", "SIM", lower_is_better=False), Figure("ttfa", "first audio (s)"), Figure("rtf", "RTF"))


def load_baseline(path: str) -> tuple[Path, list[dict]]:
    """The journal of an earlier run (its --out folder or its items.jsonl) and its records."""
    given = Path(path).expanduser()
    journal = given / "items.jsonl" if given.is_dir() else given
    if not journal.is_file():
        raise UsageError(f"--baseline {path}: no items.jsonl there (give an earlier run's --out folder or its items.jsonl)")
    records = read_records(journal)
    if not any(record.get("status") == "ok" for record in records):
        raise UsageError(f"--baseline {path}: {journal} holds no scored utterance")
    return journal, records


def compare(current: list[dict], baseline: list[dict], *, baseline_path: str, seed: int = 0) -> dict:
    """The A/B of two runs' records: per figure the paired means, the difference (this run minus
    the baseline), its 95 % bootstrap interval, a two-sided p and the verdict; and every pair."""
    before = {r["utt"]: r for r in baseline if r.get("status") == "ok"}
    now = {r["utt"]: r for r in current if r.get("status") == "ok"}
    common = [utt for utt in now if utt in before]
    figures = {}
    for figure in FIGURES:
        pairs = [(before[u][figure.key], now[u][figure.key]) for u in common
                 if before[u].get(figure.key) is not None and now[u].get(figure.key) is not None]
        if pairs:
            figures[figure.key] = _weigh(figure, np.array(pairs, dtype=np.float64), seed)
    items = [{"utt": utt, **{f.key: [before[utt].get(f.key), now[utt].get(f.key)] for f in FIGURES}} for utt in common]
    return {"baseline": baseline_path, "paired": len(common), "only_in_this_run": len(now) - len(common),
            "only_in_baseline": len(before) - len(common), "figures": figures, "items": items}


def _weigh(figure: Figure, pairs: np.ndarray, seed: int) -> dict:
    """One figure's paired comparison (`pairs`: baseline, this run)."""
    differences = pairs[:, 1] - pairs[:, 0]
    means = resampled_means(differences, seed, RESAMPLES)
    low, high = (float(v) for v in np.percentile(means, [2.5, 97.5]))
    p_value = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    difference = float(differences.mean())
    significant = len(differences) > 1 and (low > 0 or high < 0)
    better = difference < 0 if figure.lower_is_better else difference > 0
    return {"label": figure.label, "percent": figure.percent, "pairs": len(differences),
            "baseline": float(pairs[:, 0].mean()), "this_run": float(pairs[:, 1].mean()), "difference": difference,
            "ci95": [low, high], "p": p_value, "significant": significant,
            "verdict": ("better" if better else "worse") if significant else "no significant change"}


def worse_figures(comparison: dict) -> list[str]:
    """One line per figure significantly worse than the baseline, for the user."""
    lines = []
    for figure in comparison["figures"].values():
        if figure["verdict"] == "worse":
            show = _percent if figure["percent"] else _plain
            lines.append(f"{figure['label']} is significantly worse than the baseline: {show(figure['baseline'])} -> "
                         f"{show(figure['this_run'])} (difference {show(figure['difference'], True)}, "
                         f"95 % interval {show(figure['ci95'][0], True)} to {show(figure['ci95'][1], True)}, "
                         f"{figure['pairs']} utterances)")
    return lines


def comparison_rows(comparison: dict) -> list[list[str]]:
    """Per figure: [figure, baseline, this run, difference (95 % interval), p, verdict]."""
    rows = []
    for figure in comparison["figures"].values():
        show = _percent if figure["percent"] else _plain
        low, high = (show(bound, True).removesuffix(" pts") for bound in figure["ci95"])
        rows.append([figure["label"], show(figure["baseline"]), show(figure["this_run"]),
                     f"{show(figure['difference'], True)} ({low} to {high})", f"{figure['p']:.3f}",
                     "not significant" if figure["verdict"] == "no significant change" else figure["verdict"]])
    return rows


COMPARISON_COLUMNS = ["", "baseline", "this run", "difference (95 % interval)", "p", "verdict"]


def _percent(value: float, signed: bool = False) -> str:
    return f"{value * 100:+.2f} pts" if signed else f"{value * 100:.2f} %"


def _plain(value: float, signed: bool = False) -> str:
    return f"{value:+.3f}" if signed else f"{value:.3f}"
