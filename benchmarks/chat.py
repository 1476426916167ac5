"""The staged embedded engine against the same three components called one after another.

Input: a spoken question (made with the Piper voice). omni streams: ASR -> thinker -> talker, the
talker speaking each sentence as soon as the thinker has written it. The sequential cascade
transcribes, then generates the whole answer, then synthesizes all of it.
Goal: omni's first audio at least 2x sooner than the sequential cascade's.
Usage: python benchmarks/chat.py [--runs N]
"""

import argparse
import asyncio
import io
import statistics
import time

import numpy as np
import soundfile as sf

QUESTION = "Can you tell me three interesting facts about the moon?"
SYSTEM = "You are a helpful assistant. Answer briefly and clearly."
MAX_TOKENS = 120


def spoken_question() -> bytes:
    from omnicli.engine import piper_voice

    voice = piper_voice.load_piper(piper_voice.joe_path())
    samples, rate = piper_voice.synthesize_piper(voice, QUESTION, 1.0)
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV")
    return buffer.getvalue()


def staged(engine, wav: bytes) -> dict:
    from omnicli.engine.base import AudioDelta, AudioPart, ChatDone, ChatRequest, Message, TextPart

    request = ChatRequest(
        [Message("system", [TextPart(SYSTEM)]), Message("user", [AudioPart(wav, "wav")])],
        modalities=("text", "audio"), temperature=0.0, max_tokens=MAX_TOKENS,
    )

    async def run():
        start = time.perf_counter()
        first, seconds, done = None, 0.0, None
        async for delta in engine.chat(request):
            if isinstance(delta, AudioDelta):
                first = first or time.perf_counter() - start
                seconds += delta.chunk.seconds
            elif isinstance(delta, ChatDone):
                done = delta
        total = time.perf_counter() - start
        if done is None:
            raise RuntimeError("the engine ended its answer without a ChatDone")
        thinker = done.metrics["thinker"]
        return {"first": first, "tps": thinker["tokens"] / (thinker["finished"] - thinker["first_output"]),
                "rtf": total / seconds}

    return asyncio.run(run())


def sequential(engine, wav: bytes) -> dict:
    from omnicli.audio.formats import decode
    from omnicli.audio.pcm import resample
    from omnicli.engine import piper_voice

    start = time.perf_counter()
    samples, rate = decode(wav)
    heard = engine.stages.asr.whisper.transcribe(resample(samples, rate, 16000), quick=True).text  # as the cascade hears turns
    llm = engine.stages.thinker.load()
    generated = time.perf_counter()
    answer = llm.create_chat_completion(
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": heard}],
        max_tokens=MAX_TOKENS, temperature=0.0, repeat_penalty=1.15,
    )
    tokens = answer["usage"]["completion_tokens"]
    tps = tokens / (time.perf_counter() - generated)
    voice = piper_voice.load_piper(piper_voice.joe_path())
    audio = np.concatenate([c.audio_float_array for c in voice.synthesize(answer["choices"][0]["message"]["content"])])
    total = time.perf_counter() - start
    return {"first": total, "tps": tps, "rtf": total / (len(audio) / voice.config.sample_rate)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs

    from omnicli.engine.staged import embedded_engine

    engine = embedded_engine()
    wav = spoken_question()
    staged(engine, wav), sequential(engine, wav)  # load every model once, outside the timings
    a, b = [], []
    for _ in range(runs):
        a.append(staged(engine, wav))
        b.append(sequential(engine, wav))
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    print(f"{'measure':<30}{'staged':>10}{'sequential':>12}{'ratio':>8}  goal")
    print(f"{'first audio, s':<30}{med(a, 'first'):>10.3f}{med(b, 'first'):>12.3f}{med(b, 'first') / med(a, 'first'):>7.2f}x  >= 2x sooner")
    print(f"{'thinker, tokens/s':<30}{med(a, 'tps'):>10.1f}{med(b, 'tps'):>12.1f}{med(a, 'tps') / med(b, 'tps'):>8.2f}")
    print(f"{'total RTF (time / audio s)':<30}{med(a, 'rtf'):>10.3f}{med(b, 'rtf'):>12.3f}{med(a, 'rtf') / med(b, 'rtf'):>8.2f}")
    print(f"median of {runs} interleaved runs, spoken question, temperature 0, max {MAX_TOKENS} tokens, models warm")


if __name__ == "__main__":
    main()
