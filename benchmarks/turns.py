"""When does a turn end? Semantic turns (Silero pause + Smart Turn v3.2) beside 500 ms of silence.

Speech from the embedded Piper voice (no sampling noise), fed to `TurnDetector` 40 ms at a time as
a microphone would. Printed side by side for 500 ms of silence, each semantic eagerness, and what
omni serve's semantic_vad does (auto, and a turn end Smart Turn calls must also read finished: the
early Whisper transcript judged by turns/text_turn.py; fed through its input buffer in real time,
with the answer begun in the pause, which such a turn end waits for unless the voice comes back;
and the same with nothing begun, as where the thinker is a server omni cannot read ahead into):
- end of speech -> turn end decision, p50/p90, on finished sentences (the 20 dev sentences and
  benchmarks/talk.py's 10 questions read whole): the silence heard before the decision plus the
  time the deciding call took; how many never ended, and how many ended twice (split) on the way.
  Goal (issues 11, 15): semantic at least 300 ms sooner.
- turns cut in the middle of a sentence: the dev sentences with a 400 ms pause at the word
  boundary nearest their middle, read two ways: whole, the pause put in between two words
  (found with Whisper tiny.en's word times; beside whatever quiet Piper leaves there, ~375 ms
  more after a comma, so the 500 ms of silence row may cut one too), and as two halves read
  apart. Goal: at most 1 in 20, and none that 500 ms of silence does not cut.
- Smart Turn's time per call (features + model, one thread), p50/p90.
- with --grid, the trade-off behind the eagerness settings: for each moment Smart Turn is first
  asked (ms of silence) and each cut-off, how many of the 20 sentences read whole are cut at their
  pause, and how many of the 30 finished ones end at that first ask (the rest wait 400 ms more at
  least). The speed goal needs more than half ending there; the cut goal at most one cut.
- with --cuts, each sentence a rule cut at its pause: the words heard before it, Smart Turn's
  verdict, and how the words read (turns/text_turn.py).
Usage: python benchmarks/turns.py [--grid] [--cuts] [--llm NAME] [--served-only]
"""

import argparse
import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from talk import QUESTIONS  # benchmarks/talk.py: the same ten spoken questions

from omnicli.bench.scoring import percentile

if TYPE_CHECKING:
    from omnicli.turns.vad import TurnEvent

DEV = Path(__file__).resolve().parents[1] / "tests" / "data" / "sentences_dev.txt"
RATE = 24000
FRAME = 960  # 40 ms
PAUSE_S = 0.4
RULES: list[tuple[str, dict[str, object]]] = [
    ("500 ms of silence", {"silence_ms": 500}), ("semantic, eagerness high", {"semantic": True, "eagerness": "high"}),
    ("semantic, eagerness auto", {"semantic": True, "eagerness": "auto"}),
    ("semantic, eagerness low", {"semantic": True, "eagerness": "low"})]
SERVED = "semantic auto + words"
SERVED_ALONE = "the same, nothing begun"


def voice():
    from piper import SynthesisConfig

    from omnicli.audio.pcm import resample
    from omnicli.engine import piper_voice

    piper = piper_voice.load_piper(piper_voice.joe_path())
    still = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)

    def say(text: str) -> np.ndarray:
        samples = np.concatenate([c.audio_float_array for c in piper.synthesize(text, syn_config=still)])
        return resample(samples, piper.config.sample_rate, RATE)
    return say


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def _loud(samples: np.ndarray) -> np.ndarray:
    """Indices of the 10 ms frames with sound in them."""
    frames = samples[: len(samples) // 240 * 240].reshape(-1, 240)
    return np.flatnonzero(np.sqrt((frames ** 2).mean(axis=1)) > 0.005)


def speech_end_ms(samples: np.ndarray) -> int:
    loud = _loud(samples)
    return int((loud[-1] + 1) * 10) if len(loud) else 0


def trimmed(samples: np.ndarray) -> np.ndarray:
    """Without the silence Piper puts before and after an utterance, so a pause is what it says."""
    loud = _loud(samples)
    return samples[loud[0] * 240:(loud[-1] + 1) * 240]


def pause_between_words(whole: np.ndarray, asr) -> tuple[np.ndarray, np.ndarray]:
    """`whole` cut at the quietest 10 ms around the word boundary nearest its middle."""
    from omnicli.audio.pcm import resample

    words = asr.transcribe(resample(whole, RATE, 16000), "en", words=True).words
    k = len(words) // 2
    lo, hi = int((words[k - 1]["end"] - 0.06) * 100), int((words[k]["start"] + 0.06) * 100)
    energy = [np.sqrt(np.mean(whole[i * 240:(i + 1) * 240] ** 2)) for i in range(lo, hi + 1)]
    cut = (lo + int(np.argmin(energy))) * 240 + 120
    return whole[:cut], whole[cut:]


def detected(audio: np.ndarray, models, **rule) -> list[tuple["TurnEvent", float]]:
    """The detector's stops in `audio`, each with the wall time of the feed call that decided it."""
    from omnicli.turns.vad import TurnDetector

    detector = TurnDetector(RATE, models, **rule)
    stops = []
    for start in range(0, len(audio), FRAME):
        began = time.perf_counter()
        events = detector.feed(audio[start:start + FRAME])
        took = time.perf_counter() - began
        stops += [(e, took) for e in events if e.kind == "stopped"]
    return stops


def served(audio: np.ndarray, engine, models, begin_answers: bool = True,
           heard: list[str] | None = None) -> list[tuple["TurnEvent", float]]:
    """The same as `run`, but through omni serve's input buffer with semantic_vad (auto), in real
    time, as a session uses it: each early transcript is offered to the engine, which begins its
    answer (one talker); the first ask of a pause has Smart Turn asked beside Whisper if it is still
    hearing the pause (else after the answer), waits for that answer unless the voice comes back
    first, and the words must read finished too (Whisper's early transcript, then
    turns/text_turn.py); each stop commits. The time it took to decide counts. Without
    `begin_answers` no answer is begun, so the decision waits for none. `heard` gets, for each stop,
    the early transcript last heard before it (the words the session read)."""
    import asyncio
    import base64

    from omnicli.audio.pcm import float_to_pcm16
    from omnicli.session.conversation import Conversation
    from omnicli.session.responses import read_ahead
    from omnicli.session.settings import SessionSettings
    from omnicli.turns.input_buffer import InputBuffer
    from omnicli.turns.scheduler import AnswerScheduler

    async def feed() -> list[tuple["TurnEvent", float]]:
        lock, settings, scheduler = asyncio.Lock(), SessionSettings("omni-embedded"), AnswerScheduler()
        stops, began, transcripts = [], time.perf_counter(), [""]

        async def turns(events) -> None:
            for event in events:
                if event.kind == "stopped":
                    decided = time.perf_counter() - began - (event.ms + event.silence_ms) / 1000
                    stops.append((event, decided))
                    if heard is not None:
                        heard.append(transcripts[-1])
                    await buffer.commit()

        async def tell(transcript: str, *, begin: bool) -> None:
            if begin:  # (not the words heard while the user still speaks)
                transcripts.append(transcript)
            if begin_answers:
                await read_ahead(engine, Conversation(), settings, transcript, begin_answer=begin)

        buffer = InputBuffer(engine, lock, turns, scheduler, models)
        buffer.turn_end.on_heard(tell)
        buffer.turn_end.detect_turns({"type": "semantic_vad", "eagerness": "auto"})
        for index, start in enumerate(range(0, len(audio), FRAME)):
            await asyncio.sleep(max(0.0, began + index * FRAME / RATE - time.perf_counter()))
            async with lock:
                await turns(await buffer.append(base64.b64encode(float_to_pcm16(audio[start:start + FRAME])).decode()))
        buffer.close()
        return stops
    return asyncio.run(feed())


def stops_of(audio: np.ndarray, rule: dict, engine, models, heard: list[str] | None = None) -> list[tuple["TurnEvent", float]]:
    return served(audio, engine, models, rule.get("begin", True), heard) if rule.get("served") else detected(audio, models, **rule)


def cut_line(sentence: str, stop, words: str | None, models) -> str:
    """A sentence cut at its pause: Smart Turn's verdict, the words the session read and how they read."""
    sentence_end_probability = models.words.sentence_end_probability
    smart = "not asked" if stop.probability is None else f"{stop.probability:.3f}"
    read = "no words read" if words is None else f"{words!r} read {sentence_end_probability(words):.3f}"
    return f"    cut {sentence!r}: Smart Turn {smart}; {read}"


def asks(audio: np.ndarray, pause_ms: int, models) -> list[tuple[int, float]]:
    """Every time Smart Turn was asked about `audio` (first after `pause_ms` of silence), as
    (ms of audio heard, its probability); the detector never ends a turn here."""
    from omnicli.turns.vad import TurnDetector

    detector = TurnDetector(RATE, models, semantic=True)
    detector.pause_ms, detector.complete_at, detector.max_silence_ms = pause_ms, 2.0, 10**6
    found = []
    for start in range(0, len(audio), FRAME):
        calls = detector.calls
        detector.feed(audio[start:start + FRAME])
        if detector.calls > calls:
            found.append((detector.heard_ms, detector.last_probability or 0.0))
    return found


def grid(finished: list[np.ndarray], between_words: list[tuple[np.ndarray, np.ndarray]], models) -> None:
    cutoffs = (0.5, 0.9, 0.93, 0.95, 0.97, 0.98)
    print("\nfirst ask after (ms of silence) x cut-off: sentences cut at the pause (of 20) / finished ones ended at the first ask (of 30)")
    print(f"{'first ask':<12}" + "".join(f"{c:>12}" for c in cutoffs))
    for pause_ms in (32, 64, 96, 128, 192):
        cut = []  # the surest verdict before the second half began
        for first, second in between_words:
            resumed_ms = 500 + len(first) * 1000 / RATE + PAUSE_S * 1000
            cut.append(max([p for ms, p in asks(np.concatenate([quiet(0.5), first, quiet(PAUSE_S), second, quiet(1.0)]),
                                                pause_ms, models) if ms < resumed_ms], default=0.0))
        ended = []  # the verdict at the first ask after the sentence's end
        for clip in finished:
            end_ms = 500 + speech_end_ms(clip)
            ended.append(next((p for ms, p in asks(np.concatenate([quiet(0.5), clip, quiet(1.0)]), pause_ms, models) if ms > end_ms), 0.0))
        cells = [f"{sum(p >= c for p in cut)} / {sum(p >= c for p in ended)}" for c in cutoffs]
        print(f"{pause_ms:<12}" + "".join(f"{cell:>12}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="smollm2", help="the thinker that begins answers in omni serve's pauses "
                        "(default smollm2, as benchmarks/latency.py)")
    parser.add_argument("--served-only", action="store_true", help=f"only the {SERVED!r} rows")
    parser.add_argument("--grid", action="store_true", help="the trade-off behind the eagerness settings")
    parser.add_argument("--cuts", action="store_true", help="each sentence cut at its pause, and why")
    args = parser.parse_args()
    from omnicli.audio.pcm import resample
    from omnicli.engine.asr import WhisperASR
    from omnicli.engine.staged import embedded_engine
    from omnicli.turns import smart_turn
    from omnicli.turns.models import TurnModels

    say = voice()
    dev = [line.strip() for line in DEV.read_text().splitlines() if line.strip()]
    finished = [say(text) for text in dev + QUESTIONS]
    asr = WhisperASR()
    between_words = [pause_between_words(clip, asr) for clip in finished[:len(dev)]]
    halves = []
    for text in dev:
        words = text.split()
        halves.append((trimmed(say(" ".join(words[:len(words) // 2]))), trimmed(say(" ".join(words[len(words) // 2:])))))
    models = TurnModels()
    models.smart_turn.load()

    print(f"{len(finished)} finished sentences; {len(dev)} dev sentences with a {PAUSE_S * 1000:.0f} ms pause inside;"
          f" omni serve begins answers with {args.llm}")
    print(f"{'rule':<26}{'end of speech -> turn end, ms':>31}{'unended':>9}{'split':>7}{'cut at the pause (of 20)':>27}")
    print(f"{'':<26}{'p50':>15}{'p90':>8}{'':>8}{'':>9}{'':>7}{'read whole':>13}{'two halves':>14}")
    p50s: dict[str, float] = {}
    engine = embedded_engine(llm=args.llm)
    asyncio.run(engine.preload())  # loaded before the clock runs
    rules = ([] if args.served_only else RULES) + [(SERVED, {"served": True}), (SERVED_ALONE, {"served": True, "begin": False})]
    for name, rule in rules:
        delays, unended, split = [], 0, 0
        for clip in finished:
            stops = stops_of(np.concatenate([quiet(0.5), clip, quiet(3.5)]), rule, engine, models)
            split += len(stops) > 1
            if not stops:
                unended += 1
                continue
            event, took = stops[-1]
            decided_ms = event.ms + event.silence_ms + took * 1000
            delays.append(decided_ms - (500 + speech_end_ms(clip)))
        cuts, why = [], []
        for pairs in (between_words, halves):
            cut = 0
            for text, (first, second) in zip(dev, pairs, strict=True):
                heard: list[str] = []
                stops = stops_of(np.concatenate([quiet(0.5), first, quiet(PAUSE_S), second, quiet(3.5)]), rule, engine, models, heard)
                resumed_ms = 500 + len(first) * 1000 // RATE + PAUSE_S * 1000
                early = [index for index, (e, _) in enumerate(stops) if e.ms < resumed_ms]
                cut += bool(early)
                if early and args.cuts and pairs is between_words:
                    why.append(cut_line(text, stops[early[0]][0], heard[early[0]] if heard else None, models))
            cuts.append(cut)
        p50, p90 = percentile(delays, .5), percentile(delays, .9)
        if p50 is not None:
            p50s[name] = p50
        figures = f"{'-':>15}{'-':>8}" if p50 is None or p90 is None else f"{p50:>15.0f}{p90:>8.0f}"
        print(f"{name:<26}{figures}{'':>8}{unended:>9}{split:>7}{cuts[0]:>13}{cuts[1]:>14}")
        for line in why:
            print(line)
    print(f"({SERVED}: a turn end waits for the answer begun on its words, which could not play sooner;"
          " benchmarks/latency.py --parts talk compares end of speech -> first answer sample)")
    for name in [name for name in ("semantic, eagerness auto", SERVED, SERVED_ALONE) if name in p50s and "500 ms of silence" in p50s]:
        sooner = p50s["500 ms of silence"] - p50s[name]
        print(f"goal: {name} >= 300 ms sooner than 500 ms of silence: {sooner:.0f} ms sooner; cuts <= 1 of 20")

    inputs = [resample(np.concatenate([clip, quiet(0.2)]), RATE, smart_turn.RATE) for clip in finished]
    calls, features = [], []
    for audio in inputs:
        began = time.perf_counter()
        models.smart_turn.features(audio)
        features.append(time.perf_counter() - began)
        began = time.perf_counter()
        models.smart_turn.completion_probability(audio)
        calls.append(time.perf_counter() - began)
    call_p50, call_p90, features_p50 = percentile(calls, .5), percentile(calls, .9), percentile(features, .5)
    assert call_p50 is not None and call_p90 is not None and features_p50 is not None  # one of each per clip
    print(f"Smart Turn per call, ms (one thread): p50 {call_p50 * 1000:.0f}, p90 {call_p90 * 1000:.0f}"
          f" (features alone p50 {features_p50 * 1000:.1f}); issue 11 expects 10-65")
    if args.grid:
        grid(finished, between_words, models)


if __name__ == "__main__":
    main()
