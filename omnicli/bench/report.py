"""`--report report.html`: one self-contained page (inline SVG, no scripts, no network) with the
summary (a column per level of a sweep), the per-server figures, and for each run a WER
histogram, a latency chart and the worst utterances."""

import html

from omnicli.bench.tables import SERVER_COLUMNS, level_name, server_rows, summary_rows

_BINS = [0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0001]
_CSS = """body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:980px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4}svg{background:#fafafa;border:1px solid #eee}.num{text-align:right}
.bad{color:#b00}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}"""


def _fmt(value, digits=3, percent=False) -> str:
    if value is None:
        return "–"
    return f"{value * 100:.2f} %" if percent else f"{value:.{digits}f}"


def _bars(labels: list[str], counts: list[int], color: str, width=900, height=220) -> str:
    top = max(counts) or 1
    slot = width / max(1, len(counts))
    parts = [f'<svg width="{width}" height="{height + 40}" role="img">']
    for i, (label, count) in enumerate(zip(labels, counts, strict=False)):
        bar = (height - 20) * count / top
        x = i * slot + slot * 0.15
        parts.append(f'<rect x="{x:.1f}" y="{height - bar:.1f}" width="{slot * 0.7:.1f}" height="{bar:.1f}" fill="{color}"/>')
        parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{height - bar - 4:.1f}" font-size="12" text-anchor="middle">{count}</text>')
        parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{height + 18}" font-size="12" text-anchor="middle">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def wer_histogram(records: list[dict]) -> str:
    """An SVG bar chart of how many utterances fall in each WER band."""
    wers = [r["wer"] for r in records if r.get("status") == "ok"]
    labels, counts = [], []
    for low, high in zip(_BINS, _BINS[1:], strict=False):
        labels.append(f"{low * 100:g}–{min(high, 1) * 100:g}%" if high <= 1 else f"≥{low * 100:g}%")
        counts.append(sum(1 for w in wers if low <= w < high))
    counts[-1] += sum(1 for w in wers if w >= _BINS[-1])
    return _bars(labels, counts, "#4a7bd0")


def latency_chart(records: list[dict]) -> str:
    """An SVG histogram of times to first audio, or a note when there are none."""
    ttfa = sorted(r["ttfa"] for r in records if r.get("ttfa") is not None)
    if not ttfa:
        return "<p>No time-to-first-audio figures (scored existing audio).</p>"
    steps = 10
    top = ttfa[-1] or 1
    edges = [top * i / steps for i in range(steps + 1)]
    counts = [sum(1 for t in ttfa if edges[i] <= t < edges[i + 1] or (i == steps - 1 and t == top)) for i in range(steps)]
    labels = [f"{edges[i] * 1000:.0f}ms" for i in range(steps)]
    return _bars(labels, counts, "#3a9a6a")


def render(runs: list[tuple[dict, list[dict]]], *, title: str, worst: int = 15, published: bool = False) -> str:
    """The page for one run, or for a sweep: its figures side by side (and others' published
    figures, when asked for), then each run's charts."""
    summaries = [summary for summary, _ in runs]
    sweep = len(runs) > 1
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>"]
    out.append(_table(["", *map(level_name, summaries)] if sweep else None, summary_rows(summaries)))
    if published:
        from omnicli.bench.published import PUBLISHED_COLUMNS, SOURCE, published_rows

        out.append("<h2>Published Seed-TTS-eval figures (not measured here)</h2>"
                   f"<p>Other judges and test sets than this run's; source: {html.escape(SOURCE)}</p>"
                   + _table(PUBLISHED_COLUMNS, published_rows()))
    for summary in summaries:
        if servers := server_rows(summary):
            out.append(f"<h2>Servers{f' at {level_name(summary)}' if sweep else ''}</h2>" + _table(SERVER_COLUMNS, servers))
    for summary, records in runs:
        level = f" at {level_name(summary)}" if sweep else ""
        if "ab" in summary:
            out.append(_comparison(summary["ab"], level))
        out.append(_details(records, level, worst))
    out.append("</body></html>\n")
    return "".join(out)


def _table(header: list[str] | None, rows: list[list[str]]) -> str:
    cells = [] if header is None else ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        name, *values = row
        cells.append(f"<tr><th>{html.escape(name)}</th>" + "".join(f"<td class='num'>{html.escape(v)}</td>" for v in values) + "</tr>")
    return "<table>" + "".join(cells) + "</table>"


def _comparison(ab: dict, level: str) -> str:
    """The A/B against --baseline: the figures, then every utterance both runs scored."""
    from omnicli.bench.compare import COMPARISON_COLUMNS, comparison_rows

    out = [f"<h2>Against the baseline{level}</h2><p>{html.escape(ab['baseline'])}: {ab['paired']} utterances in both; "
           f"{ab['only_in_this_run']} only in this run, {ab['only_in_baseline']} only in the baseline.</p>",
           _table(COMPARISON_COLUMNS, comparison_rows(ab)),
           "<table><tr><th>utt</th><th>WER before</th><th>WER now</th><th>first audio before (s)</th><th>first audio now (s)</th></tr>"]
    for item in ab["items"]:
        (wer_before, wer_now), (ttfa_before, ttfa_now) = item["wer"], item["ttfa"]
        mark = " class='bad'" if wer_now > wer_before else ""
        out.append(f"<tr><td>{html.escape(item['utt'])}</td><td class='num'>{_fmt(wer_before, percent=True)}</td>"
                   f"<td class='num'{mark}>{_fmt(wer_now, percent=True)}</td><td class='num'>{_fmt(ttfa_before)}</td>"
                   f"<td class='num'>{_fmt(ttfa_now)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _details(records: list[dict], level: str, worst: int) -> str:
    scored = sorted((r for r in records if r.get("status") == "ok"), key=lambda r: -r["wer"])[:worst]
    failed = [r for r in records if r.get("status") != "ok"]
    extra = [(key, label) for key, label in (("mos", "MOS"), ("sim", "SIM")) if any(r.get(key) is not None for r in records)]
    out = [f"<h2>WER per utterance{level}</h2>" + wer_histogram(records),
           f"<h2>Time to first audio{level}</h2>" + latency_chart(records),
           f"<h2>Worst {len(scored)} utterances{level}</h2><table><tr><th>utt</th><th>WER</th>"
           + "".join(f"<th>{label}</th>" for _, label in extra) + "<th>reference</th><th>hypothesis</th></tr>"]
    for r in scored:
        cells = "".join(f"<td class='num'>{_fmt(r.get(key), 2)}</td>" for key, _ in extra)
        out.append(f"<tr><td>{html.escape(r['utt'])}</td><td class='num'>{_fmt(r['wer'], percent=True)}</td>{cells}"
                   f"<td>{html.escape(r['reference'])}</td><td>{html.escape(r.get('hypothesis', ''))}</td></tr>")
    out.append("</table>")
    if failed:
        out.append(f"<h2>Failures{level}</h2><table><tr><th>utt</th><th>kind</th><th>why</th></tr>")
        out += [f"<tr><td>{html.escape(r['utt'])}</td><td class='bad'>{r['status']}</td><td>{html.escape(r.get('error', ''))}</td></tr>" for r in failed]
        out.append("</table>")
    return "".join(out)
