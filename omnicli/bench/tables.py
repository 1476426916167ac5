"""The figures of a run as rows a person reads: the printed summary, and the HTML report's.

One list of rows serves both, with a column per run when a sweep made several, so every level
of `--concurrency 1,4,8` reads side by side.
"""

from collections.abc import Callable


def _pct(value) -> str:
    return "–" if value is None else f"{value * 100:.2f} %"


def _num(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _underruns(s: dict) -> str:
    if s.get("audio_underrun_count") is None:
        return "–"
    ok = s.get("audio_continuity_ok_rate")
    continuous = "" if ok is None else f" ({ok * 100:.0f} % continuous)"
    return f"{s['audio_underrun_count']} / {s['total_audio_underrun_s']:.2f} s{continuous}"


def _throughput(s: dict) -> str:
    if s.get("request_throughput") is None:
        return "–"
    return f"{s['request_throughput']:.2f} / {_num(s.get('audio_throughput'), 2)}"


ROWS: list[tuple[str, Callable[[dict], str]]] = [
    ("utterances scored", lambda s: f"{s['scored']} of {s['utterances']}"),
    ("WER (mean of utterances)", lambda s: _pct(s["wer_mean"])),
    ("WER (corpus)", lambda s: _pct(s["wer_corpus"])),
    ("WER median / p90", lambda s: f"{_pct(s['wer_median'])} / {_pct(s['wer_p90'])}"),
    ("failed: request / no audio / ASR",
     lambda s: "{request_failed} / {no_audio} / {asr_failed}".format(**s["failures"])),
    ("malformed lines skipped", lambda s: str(s.get("malformed_lines", 0))),
    ("first audio p50 / p90 (s)", lambda s: f"{_num(s['ttfa_p50'])} / {_num(s['ttfa_p90'])}"),
    ("first audio mean / median / p99 (ms)",
     lambda s: " / ".join(_num(s.get(f"{k}_audio_ttfp_ms"), 0) for k in ("mean", "median", "p99"))),
    ("RTF (mean)", lambda s: _num(s["rtf_mean"])),
    ("underruns: gaps / total", _underruns),
    ("gaps over 100 ms / longest gap (s)", lambda s: "–" if s.get("long_gap_count") is None
     else f"{s['long_gap_count']} / {_num(s.get('longest_gap_s'))}"),
    ("requests/s / audio s per s", _throughput),
    ("duration (s)", lambda s: _num(s.get("duration"), 1)),
    ("audio (s)", lambda s: f"{s['audio_seconds']:.1f}"),
]
"""Every row: its name, and its value from one run's summary."""


def _mean_and_interval(figure: dict | None) -> str:
    if figure is None:
        return "–"
    return f"{figure['mean']:.2f} ({figure['ci95'][0]:.2f}–{figure['ci95'][1]:.2f})"


OPTIONAL_ROWS: list[tuple[str, str, Callable[[dict], str]]] = [
    ("mos_mean", "MOS, DNSMOS P.808 (mean, 95 % interval)", lambda s: _mean_and_interval(s.get("mos_mean"))),
    ("mos_ovrl_mean", "MOS, DNSMOS P.835 overall", lambda s: _mean_and_interval(s.get("mos_ovrl_mean"))),
    ("sim_mean", "SIM to the prompt (mean, 95 % interval)", lambda s: _mean_and_interval(s.get("sim_mean"))),
]
"""Rows shown when a run measured them (--mos, --sim): the key that says so, the name, the value."""


def level_name(summary: dict) -> str:
    """`c=4`, `2.0/s`, or `c=4, 2.0/s`: the load a run was measured under."""
    concurrency, rate = summary.get("max_concurrency"), summary.get("request_rate")
    parts = ([f"c={concurrency}"] if concurrency else []) + ([f"{rate:g}/s"] if rate else [])
    return ", ".join(parts) or "c=∞"


def summary_rows(runs: list[dict]) -> list[list[str]]:
    """One row per figure: its name, then its value in each run."""
    rows = [[name, *(value(run) for run in runs)] for name, value in ROWS]
    extra = [[name, *(value(run) for run in runs)] for key, name, value in OPTIONAL_ROWS if any(key in run for run in runs)]
    return rows[:4] + extra + rows[4:]


def server_rows(run: dict) -> list[list[str]]:
    """Per server of a run: [server, requests, failed, first audio p50, RTF mean, skipped]."""
    return [[url, str(f["requests"]), str(f["failures"]), _num(f["ttfa_p50"]), _num(f["rtf_mean"]),
             "yes" if f["skipped"] else "no"] for url, f in (run.get("servers") or {}).items()]


SERVER_COLUMNS = ["server", "requests", "failed", "first audio p50 (s)", "RTF mean", "skipped"]


def print_tables(runs: list[dict], file, *, published: bool = False) -> None:
    """The summary (a column per run), the A/B, the per-server figures where there are any, and
    other systems' published figures when asked for."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file)
    sweep = len(runs) > 1
    table = Table(title="bench-wer", show_header=sweep)
    table.add_column("")
    for run in runs:
        table.add_column(level_name(run), justify="right" if sweep else "left")
    for row in summary_rows(runs):
        table.add_row(*row)
    console.print(table)
    for run in runs:
        if "ab" in run:
            _print_comparison(console, run, sweep)
    for run in runs:
        if rows := server_rows(run):  # lines, not a table: a URL is read whole at any width
            console.print(f"servers at {level_name(run)}:" if sweep else "servers:")
            for url, requests, failed, first_audio, rtf, skipped in rows:
                console.print(f"  {url}  {requests} requests, {failed} failed, first audio p50 {first_audio} s, "
                              f"RTF {rtf}{', skipped' if skipped == 'yes' else ''}", highlight=False, markup=False, soft_wrap=True)
    if published:
        from omnicli.bench.published import PUBLISHED_COLUMNS, SOURCE, published_rows

        table = Table(title="published Seed-TTS-eval figures, not measured here", title_justify="left")
        for column in PUBLISHED_COLUMNS:
            table.add_column(column)
        for row in published_rows():
            table.add_row(*row)
        console.print(table)
        console.print(f"source: {SOURCE}", highlight=False, markup=False, soft_wrap=True)


def _print_comparison(console, run: dict, sweep: bool) -> None:
    """The A/B against --baseline: a row per figure."""
    from rich.table import Table

    from omnicli.bench.compare import COMPARISON_COLUMNS, comparison_rows

    ab = run["ab"]
    where = f" at {level_name(run)}" if sweep else ""
    table = Table(title=f"against the baseline{where}: {ab['paired']} utterances in both", title_justify="left")
    for column in COMPARISON_COLUMNS:
        table.add_column(column)
    for row in comparison_rows(ab):
        table.add_row(*row)
    console.print(table)
    console.print(f"baseline: {ab['baseline']}", highlight=False, markup=False, soft_wrap=True)
