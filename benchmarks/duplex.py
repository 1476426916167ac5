"""Duplex vs turn-based: how soon the answer starts, one `omni serve`, side by side (issue 11).

    python benchmarks/duplex.py                  # SmolLM2 (OMNI_LLM=smollm2)
    python benchmarks/duplex.py --llm qwen-1.5b  # another thinker

One `omni serve` on 127.0.0.1; latency.py's ten spoken questions (4 s apart) in one WAV, spoken in
real time by headless `omni talk --server URL --input-file ... --transcript log.jsonl` twice:
turn-based (`--vad client`: 500 ms of silence commits, then `response.create`) and duplex
(`--duplex`, default preset: the client's Silero commits with `create_response: false`; the server
listens all along with its own turn detection, and may answer `response.listen` instead).
Figures, from the transcripts (the client's clock, events as sent and received):
- commit -> first audio: from the commit the server acted on, `input_audio_buffer.committed` (in)
  last before the answer's `response.created`, to that answer's first `response.(output_)audio.delta`;
  the same moment in both lanes, whoever decided the turn was over (duplex: the server's own VAD
  or the client's commit). Commits made while an answer ran (`response_create_deferred: true`)
  are answered only after it: counted, not timed.
- end of speech -> first audio: the client's Silero (the same detector in both lanes) commits
  500 ms after speech ends, so end of speech = each client commit - 0.5 s; to the first audio
  delta after it (duplex answers the server began before the client's commit count too).
- counts: client commits, server commits (deferred ones and what ASR heard in them), answers with
  audio, cancelled, `response.speak` / `response.listen` (duplex), and the server's event-loop lag
  during each talk (`omni_event_loop_lag_seconds` from /metrics, wakes of a 20 ms timer).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from latency import dialog, loop_lag_buckets  # benchmarks/latency.py: the dialog WAV, the /metrics histogram
from local_serve import omni_serve

from omnicli.bench.scoring import percentile

SILENCE_S = 0.5
"""The client VAD's silence before a commit (omni talk's default, both lanes)."""
AUDIO_DELTAS = ("response.audio.delta", "response.output_audio.delta")


def talk(url: str, wav: Path, log: Path, env: dict, lane: list[str]) -> float:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "omnicli", "talk", "--server", url, *lane, "--input-file", str(wav),
                           "--output-file", str(log.with_suffix(".wav")), "--transcript", str(log)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"  omni talk {' '.join(lane)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return time.monotonic() - started


def figures(log: Path) -> dict:
    """The transcript's turns and answers (see the docstring for the definitions)."""
    events = [json.loads(line) for line in open(log)] if log.exists() else []
    commits_out = [e["t"] for e in events if e["dir"] == "out" and e["event"].get("type") == "input_audio_buffer.commit"]
    committed: tuple[float, str | None] | None = None
    deferred: set[str] = set()
    heard: dict[str, str] = {}
    started: dict[str, tuple[float, str | None] | None] = {}  # response -> the server's commit it answers
    first: dict[str, float] = {}
    out: dict = {"committed": [], "speech": [], "turns": len(commits_out), "commits": 0, "deferred": 0, "answers": 0,
                 "late": 0, "cut": 0, "speaks": 0, "listens": 0}
    for e in events:
        if e["dir"] != "in":
            continue
        event, t = e["event"], e["t"]
        kind = event.get("type")
        rid = event.get("response_id") or (event.get("response") or {}).get("id")
        if kind == "input_audio_buffer.committed":
            out["commits"] += 1
            committed = (t, event.get("item_id"))
            if (event.get("event") or {}).get("response_create_deferred"):
                out["deferred"] += 1
                deferred.add(event.get("item_id"))
        elif kind == "conversation.item.input_audio_transcription.completed":
            heard[event.get("item_id")] = event.get("transcript", "")
        elif kind == "response.created" and rid:
            started[rid], committed = committed, None
        elif kind in AUDIO_DELTAS and rid and rid not in first:
            first[rid] = t
        elif kind == "response.listen":
            out["listens"] += 1
        elif kind == "response.speak":
            out["speaks"] += 1
        elif kind == "response.done" and (event.get("response") or {}).get("status") == "cancelled":
            out["cut"] += 1
    for rid, t in first.items():
        out["answers"] += 1
        commit = started.get(rid)
        if commit is None:
            continue
        if commit[1] in deferred:  # answered after the answer that was running: not a latency
            out["late"] += 1
        else:
            out["committed"].append(t - commit[0])
    out["extra"] = [heard.get(item, "?") for item in deferred]
    deltas = sorted(first.values())
    for commit_at in commits_out:
        end = commit_at - SILENCE_S
        answer = next((t for t in deltas if t > end), None)
        if answer is not None and answer - end < 10:
            out["speech"].append(answer - end)
    return out


def p(values: list[float], q: float) -> str:
    value = percentile(values, q)
    return "-" if value is None else f"{value * 1000:.0f}"


def lag_summary(counts: dict[str, float]) -> str:
    total = counts.get("+Inf", 0)
    if not total:
        return "no wakes measured"
    late = {le: (total - counts.get(le, 0)) / total for le in ("0.02", "0.05", "0.1")}
    return f"{total:.0f} wakes; later than 20 ms {late['0.02']:.2%}, 50 ms {late['0.05']:.2%}, 100 ms {late['0.1']:.2%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default=os.environ.get("OMNI_LLM", "smollm2"), help="thinker (default smollm2)")
    args = parser.parse_args()
    load_before = os.getloadavg()

    work = Path(tempfile.mkdtemp(prefix="omni-duplex-"))
    wav = dialog(work)
    env = {**os.environ, "OMNI_LLM": args.llm}
    lanes = {"turn-based": ["--vad", "client"], "duplex": ["--duplex"]}
    results, lags, walls = {}, {}, {}
    with omni_serve(args.llm) as url:
        for name, lane in lanes.items():
            before = loop_lag_buckets(url)
            walls[name] = talk(url, wav, work / f"{name}.jsonl", env, lane)
            after = loop_lag_buckets(url)
            lags[name] = {le: after[le] - before.get(le, 0) for le in after}
            results[name] = figures(work / f"{name}.jsonl")
    load = os.getloadavg()
    print(f"\nomni serve, {args.llm}, {len(lanes)} headless talks of 10 spoken questions; ms, p50 / p90; 1-min load "
          f"average {load_before[0]:.2f} before, {load[0]:.2f} after ({os.cpu_count()} cores); transcripts in {work}")
    names = list(lanes)
    print(f"{'':<40}" + "".join(f"{n:>22}" for n in names))

    def line(label: str, key: str) -> None:
        print(f"{label:<40}" + "".join(f"{p(results[n][key], .5) + ' / ' + p(results[n][key], .9):>22}" for n in names))

    line("commit (server's) -> first audio", "committed")
    line("end of speech -> first audio", "speech")
    for key, label in (("turns", "client commits"), ("commits", "server commits (committed)"),
                       ("deferred", "  of which while an answer ran"), ("answers", "answers (with audio)"),
                       ("late", "  of which to those deferred commits"), ("cut", "answers cancelled"),
                       ("speaks", "response.speak"), ("listens", "response.listen")):
        print(f"{label:<40}" + "".join(f"{results[n][key]:>22}" for n in names))
    print(f"{'talk wall time, s':<40}" + "".join(f"{walls[n]:>22.0f}" for n in names))
    for n in names:
        if results[n]["extra"]:
            print(f"{n}: deferred commits heard as {results[n]['extra']}")
    print("server event loop (omni_event_loop_lag_seconds): wakes of a 20 ms timer, how late")
    for n in names:
        print(f"  {n}: {lag_summary(lags[n])}")


if __name__ == "__main__":
    main()
