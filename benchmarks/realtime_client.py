"""Conversation speed as a client meets it: spoken questions streamed in real time to `omni serve`'s
/v1/realtime in 40 ms appends, the server's own turn detection ending each turn (server_vad with
its default 500 ms of silence, or semantic_vad), timed from the last loud sample sent to the first
audio delta received, and each answer checked for the word it must hold. Per thinker and turn
mode: p50 / p90 and answers right, beside the floor (the transcript, the thinker's first speakable
piece and the talker's first chunk, each called alone in this process, summed) and the ratio;
each wrong answer with what the server heard (a wrong transcript or a wrong thought); then issue
34's goals, met or not: server_vad within 800 / 1000 ms p50 / p90, semantic_vad no slower.
With --trace the server runs in this process (uvicorn on a thread), so each turn's timeline can be
measured where the engine runs: when the early transcript, the prompt read, the first token, the
first speakable piece and the first piece spoken ran after the voice went quiet, beside each
stage's own time called alone.

    python benchmarks/realtime_client.py                                 # the default thinker, both modes
    python benchmarks/realtime_client.py --llm qwen-1.5b smollm2         # several thinkers
    python benchmarks/realtime_client.py --modes server_vad --questions 10
    python benchmarks/realtime_client.py --no-floor                      # skip the stages called alone
    python benchmarks/realtime_client.py --modes server_vad --trace      # each stage's timeline too
    python benchmarks/realtime_client.py --trace --each-turn             # and each turn's own
"""

import argparse
import asyncio
import base64
import json
import math
import re
import statistics
import time
from dataclasses import dataclass

import numpy as np
from local_serve import omni_serve, serve_here  # benchmarks/local_serve.py
from turns import voice  # benchmarks/turns.py: the embedded voice without sampling noise

from omnicli.bench.scoring import percentile

QUESTIONS = [
    ("How many days are there in a week?", ["seven", "7"]), ("What color is the sky on a clear day?", ["blue"]),
    ("What do bees make?", ["honey"]), ("How many legs does a spider have?", ["eight", "8"]),
    ("What is the opposite of hot?", ["cold"]), ("What is two plus two?", ["four", "4"]),
    ("What is the capital of France?", ["paris"]), ("How many hours are in a day?", ["24", "twenty-four", "twenty four"]),
    ("What color are ripe bananas?", ["yellow"]), ("Where does the sun rise?", ["east"]),
    ("What do cows drink?", ["water"]), ("How many wheels does a bicycle have?", ["two", "2"]),
    ("What is frozen water called?", ["ice"]), ("Which planet do we live on?", ["earth"]),
    ("What is the largest ocean on Earth?", ["pacific"]), ("How many months are in a year?", ["twelve", "12"]),
    ("What gas do plants take in from the air?", ["carbon dioxide", "co2"]),
    ("What is the capital of Japan?", ["tokyo"]), ("How many sides does a triangle have?", ["three", "3"]),
    ("What animal says moo?", ["cow"]),
]
"""Short factual questions, each with the words a right answer holds (any one of them)."""
FRAME_S = 0.04
RATE = 24000
LOUD = 0.02
"""A sample this loud is speech; the last one sent is where the user stopped talking."""
_TAIL_S = 8.0
"""Silence streamed after a question while waiting for its answer, at most."""


def right(answer: str, words: list[str]) -> bool:
    """The answer holds one of `words` (case and punctuation aside)."""
    text = re.sub(r"[^a-z0-9 -]", " ", answer.lower())
    return any(re.search(rf"\b{re.escape(word)}\b", text) for word in words)


@dataclass
class Turn:
    """One question asked: when its last loud sample was sent and its first audio came (monotonic), and the answer."""

    quiet_at: float | None
    first_audio_at: float | None
    text: str
    heard: str = ""
    """What the server heard the question as (its transcript of the turn)."""

    @property
    def waited(self) -> float | None:
        """Seconds from the last loud sample sent to the first audio delta."""
        return None if self.quiet_at is None or self.first_audio_at is None else self.first_audio_at - self.quiet_at


async def one_turn(ws, clip: np.ndarray) -> Turn:
    """Stream `clip` then silence in real time until the answer is done."""
    loud = np.flatnonzero(np.abs(clip) > LOUD)
    frame = int(FRAME_S * RATE)
    last_loud_frame = int(loud[-1]) // frame if len(loud) else 0
    audio = np.concatenate([clip, np.zeros(int(_TAIL_S * RATE), np.float32)])
    marks: dict[str, float] = {}
    text: list[str] = []
    heard: list[str] = []
    done = asyncio.Event()

    async def send() -> None:
        start = time.monotonic()
        for n, at in enumerate(range(0, len(audio) - frame + 1, frame)):
            if done.is_set():
                return
            await asyncio.sleep(max(0.0, start + n * FRAME_S - time.monotonic()))
            pcm = (np.clip(audio[at:at + frame], -1, 1) * 32767).astype("<i2").tobytes()
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}))
            if n == last_loud_frame:
                marks["last_loud"] = time.monotonic() - FRAME_S + (int(loud[-1]) % frame) / RATE if len(loud) else 0.0

    async def receive() -> None:
        async for message in ws:
            event = json.loads(message)
            kind = event.get("type", "")
            if kind in ("response.output_audio.delta", "response.audio.delta"):
                marks.setdefault("first_audio", time.monotonic())
            elif kind in ("response.output_audio_transcript.delta", "response.audio_transcript.delta", "response.output_text.delta"):
                text.append(event.get("delta") or "")
            elif kind == "conversation.item.input_audio_transcription.completed":
                heard.append(event.get("transcript") or "")
            elif kind == "response.done":
                done.set()
                return

    sender = asyncio.create_task(send())
    try:
        await asyncio.wait_for(receive(), _TAIL_S + len(clip) / RATE + 5)
    except TimeoutError:
        pass
    done.set()
    await sender
    await asyncio.sleep(0.5)  # a breath between questions
    return Turn(marks.get("last_loud"), marks.get("first_audio"), "".join(text), " ".join(heard))


async def ask_all(url: str, mode: str, clips: list[np.ndarray]) -> list[Turn]:
    """One realtime session, turns detected by the server (`mode`), every clip asked in turn."""
    import websockets

    async with websockets.connect(url.replace("http", "ws", 1) + "/v1/realtime", max_size=None) as ws:
        pcm = {"type": "audio/pcm", "rate": RATE}
        await ws.send(json.dumps({"type": "session.update", "session": {
            "type": "realtime", "output_modalities": ["audio"],
            "audio": {"input": {"format": pcm, "turn_detection": {"type": mode}}, "output": {"format": pcm}}}}))
        async for message in ws:
            if json.loads(message).get("type") == "session.updated":
                break
        return [await one_turn(ws, clip) for clip in clips]


def engine_of(llm: str):
    """The embedded engine on thinker `llm`, its models loaded."""
    from omnicli.cli.engines import EngineChoice, Engines
    from omnicli.config import Connection

    engine = Engines().engine(EngineChoice(Connection(None, None), llm=llm))
    asyncio.run(engine.preload())
    return engine


def stage_floors(engine, clips: list[np.ndarray]) -> dict[str, list[float]]:
    """Each stage called alone per clip (seconds): ASR, the thinker's first token and first
    speakable piece, the talker's first chunk, and their sum."""
    from talk import direct_stages  # benchmarks/talk.py

    rows = direct_stages(engine, clips)
    return {"transcript (ASR)": [r["asr"] for r in rows], "thinker: prompt read, first token": [r["first_text"] for r in rows],
            "thinker: prompt and first piece": [r["first_sentence"] for r in rows],
            "talker: first piece spoken ahead": [r["tts"] for r in rows], "sum": [r["sum"] for r in rows]}


def main() -> None:
    """Run every thinker and turn mode asked for; print one row each."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm", nargs="+", default=["qwen-1.5b"])
    parser.add_argument("--modes", nargs="+", default=["server_vad", "semantic_vad"])
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--trace", action="store_true", help="the server in this process: each stage's timeline")
    parser.add_argument("--each-turn", action="store_true", help="with --trace: each turn's own timeline too")
    args = parser.parse_args()
    asked = QUESTIONS[:args.questions]
    say = voice()
    clips = [np.concatenate([np.zeros(int(0.3 * RATE), np.float32), say(q)]) for q, _ in asked]
    print(f"{len(asked)} spoken questions over /v1/realtime, 40 ms appends in real time; last loud sample sent -> first audio delta")
    print(f"{'thinker':<12}{'turns':<14}{'p50':>8}{'p90':>8}{'right':>8}{'floor':>8}{'p50/floor':>11}")
    for llm in args.llm:
        engine = engine_of(llm) if args.trace or not args.no_floor else None
        floors = {} if args.no_floor else stage_floors(engine, clips)
        floor = statistics.median(floors["sum"]) if floors else None
        if args.trace:
            from stage_trace import StageTrace  # benchmarks/stage_trace.py

            trace = StageTrace(engine)
        figures: dict[str, tuple[float, float]] = {}
        with serve_here(engine) if args.trace else omni_serve(llm) as url:
            for mode in args.modes:
                turns = asyncio.run(ask_all(url, mode, clips))
                figures[mode] = report(llm, mode, turns, asked, floor)
                if args.trace:
                    trace.report([(t.quiet_at, t.first_audio_at) for t in turns
                                  if t.quiet_at is not None and t.first_audio_at is not None], floors, each_turn=args.each_turn)
        goals(llm, figures)


def goals(llm: str, figures: dict[str, tuple[float, float]]) -> None:
    """Issue 34's goals, as far as the modes run can tell: server_vad within 800 / 1000 ms p50 / p90,
    and semantic_vad no slower than server_vad."""
    if "server_vad" in figures:
        p50, p90 = figures["server_vad"]
        met = "met" if p50 <= 0.8 and p90 <= 1.0 else "not met"
        print(f"  goal ({llm}): server_vad p50 <= 800 ms and p90 <= 1000 ms: {p50 * 1000:.0f} / {p90 * 1000:.0f} ms, {met}")
        if "semantic_vad" in figures:
            later = figures["semantic_vad"][0] - p50
            verdict = "met" if later <= 0 else "not met"
            print(f"  goal ({llm}): semantic_vad no slower than server_vad: p50 {later * 1000:+.0f} ms, {verdict}")


def report(llm: str, mode: str, turns: list[Turn], asked: list[tuple[str, list[str]]],
           floor: float | None) -> tuple[float, float]:
    """One row: p50 / p90, answers right, the floor and the ratio; then each turn without a right
    answer, with what the server heard. Returns p50 and p90 (seconds; infinite without answer audio)."""
    waits = [t.waited for t in turns if t.waited is not None]
    if not waits:
        print(f"{llm:<12}{mode:<14}no answer audio")
        return math.inf, math.inf
    correct = sum(right(t.text, words) for t, (_, words) in zip(turns, asked, strict=True))
    p50, p90 = statistics.median(waits), percentile(waits, .9) or 0.0
    ratio = f"{p50 / floor:>10.2f}x" if floor else f"{'-':>11}"
    print(f"{llm:<12}{mode:<14}{p50 * 1000:>6.0f}ms{p90 * 1000:>6.0f}ms{correct:>5}/{len(asked):<2}"
          f"{(floor or 0) * 1000:>6.0f}ms{ratio}", flush=True)
    for turn, (question, words) in zip(turns, asked, strict=True):
        if turn.waited is None or not right(turn.text, words):
            print(f"    {question!r} (heard {turn.heard.strip()!r}): {'no audio' if turn.waited is None else 'wrong'}:"
                  f" {turn.text.strip()[:80]!r}")
    return p50, p90


if __name__ == "__main__":
    main()
