"""Which embedded thinker answers best on two cores: correctness, English, length, and the
first audio of a spoken answer, for each model of the catalogue (`--llm NAME`), side by side.

    python benchmarks/thinker.py                       # every catalogue model
    python benchmarks/thinker.py --models smollm2 qwen-1.5b

Each question has the words any right answer must contain (one of each group). An answer is
"not English" when it holds more French/Spanish/German/Italian function words than English ones.
First audio: the staged cascade (thinker -> Piper) from the request to the first audio chunk,
temperature 0, the realtime session's instructions. Words -> audio: from the first text the
thinker wrote to the first audio chunk, over the questions and three prompts that ask for one long
first sentence (the chunker must not wait for its end). Goals for the default: >= 23 of 25 right,
never another language, first audio p50 <= 1.2 s; words -> audio <= 1.0 s whatever the length.
"""

import argparse
import asyncio
import re
import statistics
import time

QUESTIONS: list[tuple[str, list[list[str]]]] = [
    # facts
    ("What is the capital of France?", [["paris"]]),
    ("What is the capital of Japan?", [["tokyo"]]),
    ("Which planet is known as the Red Planet?", [["mars"]]),
    ("What is the largest ocean on Earth?", [["pacific"]]),
    ("Who wrote the play Romeo and Juliet?", [["shakespeare"]]),
    ("What gas do plants take in from the air to make food?", [["carbon dioxide", "co2"]]),
    ("How many continents are there?", [["seven", "7"]]),
    ("What is the chemical symbol for gold?", [["au"]]),
    ("At what temperature in Celsius does water boil at sea level?", [["100", "hundred"]]),
    ("What is the tallest mountain in the world?", [["everest"]]),
    # arithmetic
    ("What is 7 plus 5?", [["12", "twelve"]]),
    ("What is 9 times 8?", [["72", "seventy-two", "seventy two"]]),
    ("What is 100 minus 37?", [["63", "sixty-three", "sixty three"]]),
    ("What is half of 50?", [["25", "twenty-five", "twenty five"]]),
    ("How many minutes are in two hours?", [["120", "hundred and twenty", "hundred twenty"]]),
    ("What is 15 divided by 3?", [["5", "five"]]),
    ("How many days are in a week?", [["7", "seven"]]),
    ("What is 12 squared?", [["144"]]),
    # how-to and everyday knowledge
    ("How do I boil an egg?", [["water"], ["boil"]]),
    ("How can I make a cup of tea?", [["water"], ["tea"]]),
    ("What should I do if I cut my finger slightly?", [["wash", "clean", "rinse"], ["bandage", "plaster", "pressure", "band-aid"]]),
    ("How do I keep my phone battery lasting longer?", [["brightness", "screen", "apps", "background", "charge", "battery saver", "low power"]]),
    ("How do you convert kilometres to miles?", [["0.62", "0.621", "1.6", "1.609", "divide", "multiply"]]),
    ("What is a good way to fall asleep faster?", [["bed", "sleep", "screen", "routine", "relax", "caffeine", "dark", "read",
                                                    "breath*", "music", "meditat*"]]),
    ("How many legs does a spider have?", [["8", "eight"]]),
]

LONG_FIRST_SENTENCE = [
    "In one single long sentence of at least forty words and without any commas, describe a walk along a river.",
    "Without using any commas, explain in one long sentence how a bicycle works.",
    "Tell me in a single sentence of about fifty words without commas why people enjoy travelling.",
]

FOREIGN = {"le", "la", "les", "est", "une", "des", "du", "et", "el", "los", "las", "es", "y", "der", "die", "das",
           "und", "ist", "il", "di", "che", "pour", "avec", "sont", "por", "con", "para", "nicht"}
ENGLISH = {"the", "is", "of", "and", "to", "a", "in", "it", "you", "are", "that", "for", "with", "on", "your", "can"}


def right(answer: str, groups: list[list[str]]) -> bool:
    """Each group has a word in the answer: whole words and numbers ("7" is not "7,981"), while a
    decimal may go on ("0.62" matches "0.6214") and a stem marked with * may too ("meditat*")."""
    text = answer.lower()

    def said(word: str) -> bool:
        stem = word.rstrip("*")
        ending = "" if "." in word or word.endswith("*") else r"(?![a-z0-9]|[.,]\d)"
        return re.search(rf"(?<![a-z0-9]){re.escape(stem)}{ending}", text) is not None

    return all(any(said(word) for word in group) for group in groups)


def english(answer: str) -> bool:
    words = re.findall(r"[a-zà-ÿ']+", answer.lower())
    return sum(w in ENGLISH for w in words) >= sum(w in FOREIGN for w in words)


async def measure(name: str) -> dict:
    from omnicli.engine.base import AudioDelta, ChatDone, ChatRequest, Message, TextDelta, TextPart
    from omnicli.engine.staged import embedded_engine
    from omnicli.session.settings import DEFAULT_INSTRUCTIONS

    engine = embedded_engine(llm=name)
    started = time.perf_counter()
    await engine.preload()
    load = time.perf_counter() - started
    rows: list[dict] = []
    long_answers: list[str] = []
    words_to_audio = []
    asks = [("Say hi.", None)] + QUESTIONS + [(prompt, None) for prompt in LONG_FIRST_SENTENCE]
    for n, (question, groups) in enumerate(asks):
        request = ChatRequest([Message("system", [TextPart(DEFAULT_INSTRUCTIONS)]), Message("user", [TextPart(question)])],
                              modalities=("text", "audio"), max_tokens=120, temperature=0.0)
        start, first_text, first_audio, answer, tokens = time.perf_counter(), None, None, "", 0
        async for delta in engine.chat(request):
            if isinstance(delta, TextDelta) and first_text is None and delta.text.strip():
                first_text = time.perf_counter() - start
            elif isinstance(delta, AudioDelta) and first_audio is None:
                first_audio = time.perf_counter() - start
            elif isinstance(delta, ChatDone):
                answer, tokens = delta.text, delta.usage.get("completion_tokens", 0)
        elapsed = time.perf_counter() - start
        if n and first_text is not None and first_audio is not None:  # the first one warms up
            words_to_audio.append(first_audio - first_text)
        if groups:
            rows.append({"question": question, "answer": answer, "right": right(answer, groups), "english": english(answer),
                         "words": len(answer.split()), "first_audio": first_audio, "tokens_per_second": tokens / elapsed})
        elif n:
            long_answers.append(answer)
    await engine.aclose()
    return {"model": name, "load": load, "rows": rows, "words_to_audio": words_to_audio, "long": long_answers}


def report(results: list[dict], verbose: bool) -> None:
    print(f"\n{'model':<12}{'right':>8}{'not English':>13}{'words p50':>11}{'first audio p50':>17}{'p90':>7}"
          f"{'tok/s':>7}{'load s':>8}{'words->audio p50':>18}{'max':>7}")
    for result in results:
        rows = result["rows"]
        audio = sorted(r["first_audio"] for r in rows if r["first_audio"] is not None)
        p90 = audio[min(len(audio) - 1, int(0.9 * len(audio)))] if audio else float("nan")
        print(f"{result['model']:<12}{sum(r['right'] for r in rows):>5}/{len(rows):<2}{sum(not r['english'] for r in rows):>13}"
              f"{statistics.median(r['words'] for r in rows):>11.0f}{statistics.median(audio) if audio else float('nan'):>16.2f}s"
              f"{p90:>6.2f}s{statistics.median(r['tokens_per_second'] for r in rows):>7.1f}{result['load']:>8.2f}"
              f"{statistics.median(result['words_to_audio']):>17.2f}s{max(result['words_to_audio']):>6.2f}s")
    print(f"{'goal (default)':<12}{'>= 23/25':>8}{'0':>13}{'':>11}{'<= 1.20s':>17}{'':>7}{'':>7}{'':>8}{'':>18}{'<= 1.00s':>7}")
    if verbose:
        for result in results:
            for r in result["rows"]:
                mark = "ok " if r["right"] else "NO "
                print(f"{result['model']:<10} {mark} {r['question']!r} -> {r['answer'][:110]!r}")
            for answer in result["long"]:
                print(f"{result['model']:<10} long -> {answer[:110]!r}")


def main() -> None:
    from omnicli.engine.packaged import THINKERS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(THINKERS), choices=list(THINKERS))
    parser.add_argument("--verbose", action="store_true", help="Print every answer.")
    args = parser.parse_args()
    from omnicli.engine.packaged import thinker_gguf
    from omnicli.errors import OmniError

    results = []
    for name in args.models:
        try:
            thinker_gguf(name)
        except OmniError as exc:  # an optional model not installed here: said, and the others measured
            print(f"{name}: skipped, {exc}", flush=True)
            continue
        results.append(asyncio.run(measure(name)))
    report(results, args.verbose)


if __name__ == "__main__":
    main()
