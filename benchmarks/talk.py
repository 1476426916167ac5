"""Voice-to-voice latency of `omni talk`, headless, on the embedded engine (in process).

Ten spoken questions, each followed by silence; turns found by client VAD. Per turn: end of the
user's speech -> first answer sample, and commit -> first audio delta, with each stage's share
(ASR, thinker's first text, talker's first audio), beside the same three stages called directly.
Goal on a 2-core machine: commit-to-first-audio p50 <= 700 ms.
Usage: python benchmarks/talk.py
Turns ended by meaning against 500 ms-silence turns, side by side in one run (end of speech -> first
answer sample, with and without a thinker that can begin answers in the pause):
`python benchmarks/latency.py --parts talk [--thinker-server]`; how often they cut a sentence:
`python benchmarks/turns.py`; duplex against turn-based: `python benchmarks/duplex.py`.
"""

import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from omnicli.bench.scoring import percentile

QUESTIONS = [
    "How many days are there in a week?", "What do cats like to eat?", "What color is the sky?",
    "Is it cold in winter?", "What is two plus two?", "Where do fish live?", "What do bees make?",
    "How many legs does a spider have?", "What is the opposite of hot?", "Can birds fly?",
]


def direct_stages(engine, clips) -> list[dict]:
    """ASR, thinker first token and the first spoken chunk (the engine's own voice), each called
    directly, summed."""
    from omnicli.audio.pcm import resample
    from omnicli.engine import voice_models
    from omnicli.engine.sentences import SentenceChunker
    from omnicli.session.settings import DEFAULT_INSTRUCTIONS

    model = voice_models.resolve_voice(engine.stages.talker.default_voice)
    voice = voice_models.load(model)
    rows = []
    for clip in clips:
        start = time.perf_counter()
        heard = engine.stages.asr.whisper.transcribe(resample(clip, 24000, 16000), "en", quick=True).text
        asr = time.perf_counter() - start
        start = time.perf_counter()
        chunker, first_text, sentence = SentenceChunker(), None, None
        messages = [{"role": "system", "content": DEFAULT_INSTRUCTIONS}, {"role": "user", "content": heard}]
        for piece in engine.stages.thinker.generate(messages, max_tokens=200, temperature=0.0, stop=threading.Event()):
            first_text = first_text or time.perf_counter() - start
            ready = chunker.feed(piece)
            if ready:
                sentence = ready[0]
                break
        sentence = sentence or (chunker.flush() or ["Okay."])[0]
        think = time.perf_counter() - start
        start = time.perf_counter()
        voice_models.synthesize(model, voice, sentence, 1.0)
        talk = time.perf_counter() - start
        rows.append({"asr": asr, "first_text": first_text, "first_sentence": think, "tts": talk, "sum": asr + think + talk})
    return rows


def quantile_ms(values: list[float], q: float) -> str:
    """The q-th quantile of `values` (seconds) in whole ms, or "-" for no values."""
    value = percentile(values, q)
    return "-" if value is None else f"{value * 1000:.0f}"


def main() -> None:
    from omnicli.engine.base import SpeechRequest
    from omnicli.engine.staged import embedded_engine
    from omnicli.talk.client import TalkClient, TalkOptions
    from omnicli.talk.sources import FileVoice
    from omnicli.talk.speakers import FileSpeaker
    from omnicli.talk.transport import LocalTransport
    from omnicli.talk.view import EventLog
    from omnicli.turns.modes import TurnMode

    engine = embedded_engine()

    async def speak(text):
        return np.concatenate([c.samples async for c in engine.speech(SpeechRequest(text=text))])

    clips = [asyncio.run(speak(q)) for q in QUESTIONS]
    gap = np.zeros(24000 * 4, dtype=np.float32)
    audio = np.concatenate([x for clip in clips for x in (clip, gap)])
    work = Path(tempfile.mkdtemp())
    sf.write(work / "dialog.wav", audio, 24000)

    class Quiet:
        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    log = EventLog(str(work / "events.jsonl"))
    client = TalkClient(LocalTransport(engine), FileVoice(str(work / "dialog.wav")), FileSpeaker(),
                        TalkOptions(turns=TurnMode.CLIENT), Quiet(), log)
    asyncio.run(client.run(asyncio.Event()))
    log.close()

    events = [json.loads(line) for line in open(work / "events.jsonl")]
    turns, current = [], None
    for e in events:
        kind = e["event"]["type"]
        if kind == "input_audio_buffer.commit":
            current = {"commit": e["t"]}
            turns.append(current)
        elif current is None:
            continue
        elif kind == "conversation.item.input_audio_transcription.completed":
            current.setdefault("asr", e["t"])
        elif kind == "response.output_audio_transcript.delta":
            current.setdefault("text", e["t"])
        elif kind == "response.output_audio.delta":
            current.setdefault("audio", e["t"])
    complete = [t for t in turns if {"asr", "text", "audio"} <= set(t)]
    commit_to_audio = [t["audio"] - t["commit"] for t in complete]
    speech_to_audio = [t.waited for t in client.state.timings if t.waited is not None]  # headless: heard on arrival
    share = {
        "ASR": [t["asr"] - t["commit"] for t in complete],
        "thinker, to first text": [t["text"] - t["asr"] for t in complete],
        "talker, to first audio": [t["audio"] - t["text"] for t in complete],
    }
    direct = direct_stages(engine, clips)

    print(f"{len(complete)} of {len(QUESTIONS)} turns answered, in process, client VAD (500 ms of silence ends a turn)")
    print(f"{'measure, ms':<40}{'p50':>8}{'p90':>8}")
    print(f"{'end of speech -> first answer sample':<40}{quantile_ms(speech_to_audio, .5):>8}{quantile_ms(speech_to_audio, .9):>8}")
    print(f"{'commit -> first audio delta':<40}{quantile_ms(commit_to_audio, .5):>8}{quantile_ms(commit_to_audio, .9):>8}   goal p50 <= 700")
    for name, values in share.items():
        print(f"{'  ' + name:<40}{quantile_ms(values, .5):>8}{quantile_ms(values, .9):>8}")
    print("stages called directly (same clips):")
    for key, name in [("asr", "ASR"), ("first_sentence", "thinker, to first speakable text"), ("tts", "talker, first chunk"), ("sum", "sum")]:
        values = [r[key] for r in direct]
        print(f"{'  ' + name:<40}{quantile_ms(values, .5):>8}{quantile_ms(values, .9):>8}")


if __name__ == "__main__":
    main()
