"""Where each millisecond of a spoken answer goes: a per-turn timeline, on two cores.

    python benchmarks/latency.py                    # talk in process, chat, serve at 1/4/8 sessions
    python benchmarks/latency.py --llm qwen-1.5b    # the default thinker instead of SmolLM2
    python benchmarks/latency.py --parts talk chat  # a subset
    python benchmarks/latency.py --parts talk --rules client smart   # some of talk's turn rules
    python benchmarks/latency.py --parts talk --thinker-server       # no answer begun in the pause
    python benchmarks/latency.py --parts talk --per-turn             # each turn's figures too
    python benchmarks/latency.py --parts talk --rules server semantic --trace --per-turn   # each turn's stages
    python benchmarks/latency.py --parts talk --trace                # when each stage ran, after end of speech
    python benchmarks/latency.py --parts serve --sessions 1,4 --spread   # sessions' turns ending evenly apart

talk: twenty spoken questions (talk.py's ten and ten more, read by the embedded voice without its
sampling noise, so every run hears the same audio), headless, the session in process, once a turn rule:
turns ended by client VAD (500 ms of silence), by Smart Turn in the client (`--vad smart`), by
the session's server_vad (`--vad server`: 500 ms of silence, the commit the session's) and by
the session's semantic_vad (`--vad semantic`: Smart Turn, then the early transcript must read
finished; the commit is the session's). With --thinker-server the thinker is llama-cpp-python's
OpenAI server (another process, the same GGUF): omni cannot read ahead into a server, so no answer
is begun in the pause and each starts at its commit, as against vLLM-Omni or any server. Per turn, from
the commit: answer asked of the engine, transcript ready (ASR), first token, first speakable text,
talker start, first chunk synthesized, first audio delta out of the session, first sample handed
to the speaker (headless: the same moment); each step's p50/p90 measured from the commit.
chat: talk.py's ten questions typed, `omni chat`'s engine call, request -> each step.
serve: `omni serve` on 127.0.0.1 and 1, 4 and 8 concurrent headless `omni talk` sessions over
WebSockets, each speaking talk.py's ten questions, each session from another one on; commit -> first audio and end of speech -> first
sample, p50/p90, answers per minute (so a latency win is not paid for with throughput), and how many
answers the client heard a gap in (audio arriving after what came before had played out).
Goals (issue 15): commit -> first audio p50 <= 350 ms; end of speech -> first sample p50 <= 600 ms
with semantic turns (benchmarks/turns.py measures how often those cut a sentence).
"""

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf
from local_serve import omni_serve
from stage_trace import StageTrace  # benchmarks/stage_trace.py
from talk import QUESTIONS, quantile_ms  # benchmarks/talk.py: the same ten spoken questions
from talk_llm_server import start_llama_server
from turns import voice  # benchmarks/turns.py: the embedded voice without sampling noise

from omnicli.bench.scoring import percentile
from omnicli.server.loop_lag import LoopLag

STEPS = ["heard", "first_token", "first_piece", "talker_start", "first_chunk"]
MORE_QUESTIONS = [
    "What do cows drink?", "How many wheels does a bicycle have?", "What is the capital of France?",
    "Is the sun hot?", "What do you wear on your feet?", "How many hours are in a day?", "What sound does a dog make?",
    "Where does the sun rise?", "What color are bananas?", "Do fish have legs?",
]
"""In process, ten more questions: twenty turns steady the medians."""
RULES = {"client": "500 ms of silence (client VAD)", "smart": "Smart Turn in the client (--vad smart)",
         "server": "the session's server_vad, 500 ms of silence (--vad server)",
         "semantic": "the session's semantic_vad, auto: Smart Turn and the words (--vad semantic)"}
NAMES = {"request": "answer asked of the engine", "heard": "transcript ready (ASR)", "first_token": "first token", "first_piece": "first speakable text",
         "talker_start": "talker start", "first_chunk": "first chunk synthesized",
         "delta": "first audio delta out", "played": "first sample to the speaker"}


def row(name: str, values: list[float], goal: str = "") -> str:
    p50, p90 = percentile(values, .5), percentile(values, .9)
    if p50 is None or p90 is None:
        return f"{name:<44}{'-':>8}{'-':>8}"
    return f"{name:<44}{p50 * 1000:>8.0f}{p90 * 1000:>8.0f}   {goal}"


def recording(engine) -> list[dict]:
    """The engine, with every answer's timeline (ChatDone.marks) kept in order."""
    from omnicli.engine.base import ChatDone

    marks: list[dict] = []
    chat = engine.chat

    async def timed(request):
        async for delta in chat(request):
            if isinstance(delta, ChatDone):
                marks.append(delta.marks)
            yield delta

    engine.chat = timed
    return marks


class Timeline:
    """The talk client's event log, kept as absolute monotonic times (the engine's clock)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []

    def write(self, direction: str, event: dict) -> None:
        self.events.append((time.monotonic(), direction, event.get("type", "")))

    def close(self) -> None:
        pass


class Quiet:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def dialog(work: Path, questions: list[str] = QUESTIONS, name: str = "dialog", lead_in: float = 0.0) -> Path:
    """The questions read by the embedded voice without its sampling noise (the same audio every
    run, so Smart Turn's verdicts do not move the figures), 4 s of silence after each; `lead_in`
    seconds of silence first."""
    say, gap = voice(), np.zeros(24000 * 4, dtype=np.float32)
    path = work / f"{name}-{len(questions)}.wav"
    first = np.zeros(int(24000 * lead_in), dtype=np.float32)
    sf.write(path, np.concatenate([first, *(x for q in questions for x in (say(q), gap))]), 24000)
    return path


def talk_engine(llm: str, thinker_server: str | None):
    """The embedded engine; with `thinker_server`, its thinker is that server."""
    from omnicli.cli.engines import EngineChoice, Engines, stage_servers
    from omnicli.config import Connection

    return Engines().engine(EngineChoice(Connection(None, None), llm=llm, stages=stage_servers(llm=thinker_server)))


def talk_timeline(llm: str, work: Path, turns: str, thinker_server: str | None = None, per_turn: bool = False,
                  trace: bool = False) -> None:
    from omnicli.talk.client import TalkClient, TalkOptions
    from omnicli.talk.sources import FileVoice
    from omnicli.talk.speakers import FileSpeaker
    from omnicli.talk.transport import LocalTransport
    from omnicli.turns.modes import TurnMode

    engine = talk_engine(llm, thinker_server)
    wav = dialog(work, QUESTIONS + MORE_QUESTIONS)
    marks = recording(engine)
    stages = StageTrace(engine) if trace else None
    log = Timeline()
    client = TalkClient(LocalTransport(engine), FileVoice(str(wav)), FileSpeaker(), TalkOptions(turns=TurnMode(turns)), Quiet(), log)
    lag = LoopLag()

    async def talk() -> None:
        probe = asyncio.create_task(lag.run())
        try:
            await client.run(asyncio.Event())
        finally:
            probe.cancel()

    asyncio.run(talk())

    if turns in ("server", "semantic"):  # the session commits the turns it ends
        commits = [t for t, d, kind in log.events if d == "in" and kind == "input_audio_buffer.committed"]
    else:
        commits = [t for t, d, kind in log.events if d == "out" and kind == "input_audio_buffer.commit"]
    deltas = [t for t, d, kind in log.events if d == "in" and kind == "response.output_audio.delta"]
    steps: dict[str, list[float]] = {step: [] for step in ["request", *STEPS, "delta", "played"]}
    for answer in marks:
        # The commit this answer is for: the last one before its request (a turn whose answer was
        # cancelled by the next one leaves a commit without a finished answer).
        commit = max((t for t in commits if t <= answer["request"]), default=None)
        if commit is None:
            continue
        for step in ["request", *STEPS]:
            if step in answer:
                steps[step].append(answer[step] - commit)
        first = next((t for t in deltas if t > commit), None)
        if first is not None:
            steps["delta"].append(first - commit)
            steps["played"].append(first - commit)  # headless: heard the moment it arrives
    speech_end = [t.waited for t in client.state.timings if t.waited is not None]
    turn_end = [t.asked_at - t.started_at for t in client.state.timings if not t.by_key]
    rule = RULES[turns]
    where = "in llama-cpp-python's server (no answer begun in the pause)" if thinker_server else "in process"
    print(f"\ntalk, in process, thinker {llm} {where}, turns end by {rule}: {len(commits)} turns, {len(marks)} answers;"
          " ms from the commit")
    print(f"{'step':<44}{'p50':>8}{'p90':>8}")
    for step, values in steps.items():
        print(row("  " + NAMES[step], values, "goal p50 <= 350" if step == "played" else ""))
    print(row("end of speech -> turn end", turn_end))
    print(row("end of speech -> first sample", speech_end, "goal p50 <= 600 with semantic turns"))
    if per_turn:
        print("  per turn, end of speech -> turn end / first sample, ms:",
              ", ".join(f"{(t.asked_at - t.started_at) * 1000:.0f}/{(t.waited or 0) * 1000:.0f}" for t in client.state.timings))
    if stages is not None:
        stages.report([(t.started_at, t.first_played_at or t.asked_at + 5) for t in client.state.timings if not t.by_key], each_turn=per_turn)
    print(lag_line("event loop (session + client)", lag.lags))


@contextlib.contextmanager
def thinker_server(llm: str, work: Path) -> Iterator[str]:
    """llama-cpp-python's OpenAI server with `llm`'s GGUF, on a free port, stopped at the end."""
    from omnicli.engine.thinker import resolve_llm

    process, url = start_llama_server(resolve_llm(llm), work / "llama-server.log")
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def lag_line(name: str, lags: list[float]) -> str:
    """How late a 20 ms timer woke: what blocked the event loop, if anything did."""
    p50, p99 = percentile(lags, .5), percentile(lags, .99)
    if p50 is None or p99 is None:
        return f"{name}: no wakes measured"
    late = sum(1 for x in lags if x >= 0.02)
    return (f"{name}: lag p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
            f"max {max(lags) * 1000:.0f} ms; {late} of {len(lags)} wakes >= 20 ms late")


def chat_timeline(llm: str) -> None:
    from omnicli.engine.base import AudioDelta, ChatDone, ChatRequest, Message, TextPart
    from omnicli.engine.staged import embedded_engine
    from omnicli.session.settings import DEFAULT_INSTRUCTIONS

    engine = embedded_engine(llm=llm)
    asyncio.run(engine.preload())
    steps: dict[str, list[float]] = {step: [] for step in [*STEPS, "delta"]}

    async def ask(question: str) -> None:
        request = ChatRequest([Message("system", [TextPart(DEFAULT_INSTRUCTIONS)]), Message("user", [TextPart(question)])],
                              modalities=("text", "audio"), max_tokens=120, temperature=0.0)
        first_audio = None
        async for delta in engine.chat(request):
            if isinstance(delta, AudioDelta) and first_audio is None:
                first_audio = time.monotonic()
            elif isinstance(delta, ChatDone):
                for step in STEPS:
                    if step in delta.marks:
                        steps[step].append(delta.marks[step] - delta.marks["request"])
                if first_audio is not None:
                    steps["delta"].append(first_audio - delta.marks["request"])

    asyncio.run(ask("Say hi."))  # warm
    for key in steps:
        steps[key].clear()
    for question in QUESTIONS:
        asyncio.run(ask(question))
    print(f"\nchat, in process, {llm}: {len(QUESTIONS)} typed questions; ms from the request")
    print(f"{'step':<44}{'p50':>8}{'p90':>8}")
    for step, values in steps.items():
        print(row("  " + NAMES[step].replace("first audio delta out", "first audio to the caller"), values))


def serve_sessions(llm: str, work: Path, levels: list[int], spread: bool = False) -> None:
    """omni serve, and N concurrent headless `omni talk` processes over its WebSocket, each asking
    the questions in its own order (conversations of their own, as different users' are). The
    sessions speak together (their turns end within ~0.5 s of one another: the worst case), or
    with `spread` the k-th begins k/N of a turn later (turns end evenly apart, as independent
    users' would on average)."""
    import json

    wavs = [dialog(work, QUESTIONS[k:] + QUESTIONS[:k], name=f"dialog-from-{k}") for k in range(max(levels))]
    turn = sf.info(wavs[0]).duration / len(QUESTIONS)
    env = {**os.environ, "OMNI_LLM": llm}
    with omni_serve(llm) as url:
        print(f"\nserve, {llm}: N concurrent headless talk sessions over WebSockets, {len(QUESTIONS)} questions each, "
              + (f"the k-th begun k/N of a turn ({turn:.1f} s) later" if spread else "begun together"))
        print(f"{'sessions':<10}{'commit->audio p50':>19}{'p90':>7}{'speech end->sample p50':>24}{'p90':>7}{'answers/min':>13}"
              f"{'answers with a gap':>20}{'longest':>9}")
        lag_rows = []
        for n in levels:
            if spread:
                wavs = [dialog(work, QUESTIONS[k:] + QUESTIONS[:k], name=f"dialog-from-{k}-of-{n}", lead_in=k * turn / n)
                        for k in range(n)]
            before = loop_lag_buckets(url)
            started = time.monotonic()
            procs = []
            for k in range(n):
                log = work / f"events-{n}-{k}.jsonl"
                procs.append((log, subprocess.Popen(
                    [sys.executable, "-m", "omnicli", "talk", "--server", url, "--vad", "client", "--input-file", str(wavs[k]),
                     "--output-file", str(work / f"out-{n}-{k}.wav"), "--transcript", str(log)],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
            commit_to_audio, answers, gaps = [], 0, []
            for log, proc in procs:
                proc.wait()
                events = [json.loads(line) for line in open(log)]
                commit = None
                for e in events:
                    kind = e["event"].get("type")
                    if e["dir"] == "out" and kind == "input_audio_buffer.commit":
                        commit = e["t"]
                    elif e["dir"] == "in" and kind == "response.output_audio.delta" and commit is not None:
                        commit_to_audio.append(e["t"] - commit)
                        answers += 1
                        commit = None
                    elif kind == "omni.answer.played":  # the talk client's account of the answer played
                        gaps.append(e["event"]["longest_gap_ms"])
            minutes = (time.monotonic() - started) / 60
            speech_end = [c + 0.5 for c in commit_to_audio]  # client VAD commits after 500 ms of silence
            print(f"{n:<10}{quantile_ms(commit_to_audio, .5):>16} ms{quantile_ms(commit_to_audio, .9):>7}"
                  f"{quantile_ms(speech_end, .5):>21} ms{quantile_ms(speech_end, .9):>7}{answers / minutes:>13.1f}"
                  f"{sum(gap > 0 for gap in gaps):>13} of {len(gaps):<4}{max(gaps, default=0):>6} ms")
            after = loop_lag_buckets(url)
            lag_rows.append((n, {le: after[le] - before.get(le, 0) for le in after}))
        print("server event loop (omni_event_loop_lag_seconds): wakes of a 20 ms timer, how late")
        for n, counts in lag_rows:
            total = counts["+Inf"] or 1
            late = {le: (total - counts[le]) / total for le in ("0.02", "0.05", "0.1")}
            print(f"  {n} session(s): {total:.0f} wakes; later than 20 ms {late['0.02']:.2%}, 50 ms {late['0.05']:.2%}, "
                  f"100 ms {late['0.1']:.2%}")


def loop_lag_buckets(url: str) -> dict[str, float]:
    """The server's event-loop lag histogram: cumulative wakes per bucket (`le`) so far."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        if family.name == "omni_event_loop_lag_seconds":
            return {sample.labels["le"]: sample.value for sample in family.samples if sample.name.endswith("_bucket")}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="smollm2", help="thinker (default smollm2, the one issue 15 was measured on)")
    parser.add_argument("--parts", nargs="+", default=["talk", "chat", "serve"], choices=["talk", "chat", "serve"])
    parser.add_argument("--sessions", default="1,4,8", help="serve: concurrent sessions per level")
    parser.add_argument("--spread", action="store_true", help="serve: the k-th session begins k/N of a turn later")
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES), help="talk: the turn rules to run")
    parser.add_argument("--thinker-server", action="store_true",
                        help="talk: the thinker in llama-cpp-python's OpenAI server, so nothing is begun in the pause")
    parser.add_argument("--per-turn", action="store_true", help="talk: each turn's end of speech -> turn end / first sample (with --trace, each turn's timeline too)")
    parser.add_argument("--trace", action="store_true", help="talk: when each stage ran, in ms after the voice went quiet")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="omni-latency-"))
    if "talk" in args.parts:
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(thinker_server(args.llm, work)) if args.thinker_server else None
            for turns in args.rules:
                talk_timeline(args.llm, work, turns, url, args.per_turn, args.trace)
    if "chat" in args.parts:
        chat_timeline(args.llm)
    if "serve" in args.parts:
        serve_sessions(args.llm, work, [int(n) for n in args.sessions.split(",")], args.spread)


if __name__ == "__main__":
    main()
