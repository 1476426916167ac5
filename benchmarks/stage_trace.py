"""When each stage of a spoken turn ran, measured in the process that runs the engine: the early
transcript, the answer begun ahead (the thinker reading the prompt, its first token and its first
speakable piece, the talker speaking that piece ahead), the answer's own first piece spoken, and the
turn end's judges (Smart Turn, the words check); what ran inside a reading of the words heard
while the user still spoke is named as such. Each stage is wrapped where it is looked up;
`report` prints, per stage, the p50 of its first run after each turn's quiet (from 0.4 s before it)
up to the turn's first audio, in ms after the voice went quiet, beside that stage's own time called
alone (`floors`) where the benchmark measured it."""

import contextvars
import time

from omnicli.bench.scoring import percentile

PROMPT = "  thinker: prompt read, first token"
PARTIAL = "words so far: heard and read"
_READING_PARTIAL: contextvars.ContextVar[bool] = contextvars.ContextVar("reading_partial", default=False)
"""Set inside a reading of the words so far (tasks and worker threads started there inherit it)."""


class StageTrace:
    """Spans (name, start, end) in monotonic time, of the engine's calls and the turn end's judges."""

    def __init__(self, engine) -> None:
        import llama_cpp

        from omnicli.turns.early_transcript import EarlyTranscriber
        from omnicli.turns.smart_turn import SmartTurn
        from omnicli.turns.text_turn import WordsCheck

        self.spans: list[tuple[str, float, float]] = []
        for owner, attr, name in [(engine, "transcribe", "transcript (ASR)"), (engine, "prepare", "answer begun ahead"),
                                  (engine.stages.thinker, "prefill", "  thinker: prompt and first piece"),
                                  (engine.stages.talker, "say_ahead", "  talker: first piece spoken ahead"),
                                  (engine.stages.talker, "say", "talker: a piece of the answer")]:
            if getattr(owner, attr, None) is not None:
                setattr(owner, attr, self._timed_async(getattr(owner, attr), name))
        EarlyTranscriber._read_partial = self._timed_async(_marked(EarlyTranscriber._read_partial), PARTIAL)  # type: ignore[method-assign]
        SmartTurn.completion_probability = self._timed(SmartTurn.completion_probability, "Smart Turn")  # type: ignore[method-assign]
        WordsCheck.reading = self._timed(WordsCheck.reading, "the words check")  # type: ignore[method-assign]
        self.read: list[tuple[float, int]] = []
        """When each prompt was read, and its tokens (what the model's cache did not hold already)."""
        evaluate = llama_cpp.Llama.eval
        thinker = engine.stages.thinker

        def traced_eval(llm, tokens):  # a prompt is read in one call (its end: the first token), then a token a call
            start = time.monotonic()
            try:
                return evaluate(llm, tokens)
            finally:
                if len(tokens) > 1 and llm is thinker.load():  # the thinker's, not the words check's
                    self.read.append((start, len(tokens)))
                    self.spans.append((PROMPT, start, time.monotonic()))

        llama_cpp.Llama.eval = traced_eval  # type: ignore[method-assign]

    def _timed_async(self, call, name: str):
        async def timed(*args, **kwargs):
            start, label = time.monotonic(), _partial_name(name) if _READING_PARTIAL.get() else name
            try:
                return await call(*args, **kwargs)
            finally:
                self.spans.append((label, start, time.monotonic()))
        return timed

    def _timed(self, call, name: str):
        def timed(*args, **kwargs):
            start = time.monotonic()
            try:
                return call(*args, **kwargs)
            finally:
                self.spans.append((name, start, time.monotonic()))
        return timed

    def report(self, turns: list[tuple[float, float]], floors: dict[str, list[float]] | None = None,
               each_turn: bool = False) -> None:
        """Per stage, its first run from 0.4 s before each turn's quiet to its first audio, start ->
        end in ms after the voice went quiet, p50 over the turns. `turns`: (when the voice went
        quiet, when the turn's first audio came), monotonic; `floors`: seconds per stage name;
        `each_turn`: each turn's own timeline first (p50s of separate stages need not add up)."""
        rows: dict[str, list[tuple[float, float]]] = {}
        prefills = [(start, end) for name, start, end in self.spans if name == _partial_name("  thinker: prompt and first piece")]

        def named(name: str, start: float) -> str:
            """A prompt read inside a reading of the words so far (the thinker reads one prompt at a time)."""
            inside = name == PROMPT and any(a <= start <= b for a, b in prefills)
            return _partial_name(name) if inside else name

        spans = [(named(name, start), start, end) for name, start, end in self.spans]
        for quiet, until in turns:
            first: dict[str, tuple[float, float]] = {}
            for name, start, end in sorted(spans, key=lambda span: span[1]):
                if quiet - 0.4 <= start <= until and name not in first:
                    first[name] = (start - quiet, end - quiet)
            for name, span in first.items():
                rows.setdefault(name, []).append(span)
            if each_turn:
                print("  turn: " + ", ".join(f"{name.strip()} {a * 1000:.0f}-{b * 1000:.0f}"
                                             for name, (a, b) in sorted(first.items(), key=lambda item: item[1])))
        print("  when each stage ran, ms after the voice went quiet (p50 of its start -> of its end; turns),"
              " and the stage called alone (p50 ms):")
        for name, runs in rows.items():
            starts, ends = [a for a, _ in runs], [b for _, b in runs]
            alone = percentile((floors or {}).get(name.strip()) or [], .5)
            beside = f"   alone {alone * 1000:.0f}" if alone is not None else ""
            p50_start, p50_end = percentile(starts, .5), percentile(ends, .5)
            assert p50_start is not None and p50_end is not None  # a row holds at least one turn's run
            print(f"    {name:<40}{p50_start * 1000:>6.0f} -> {p50_end * 1000:>5.0f}"
                  f"   ({len(runs)}){beside}")
        for label, reads in (("the turn's prompt", [n for start, n in self.read if named(PROMPT, start) == PROMPT]),
                             ("the words so far", [n for start, n in self.read if named(PROMPT, start) != PROMPT])):
            if reads:
                print(f"    tokens read per prompt, {label}: p50 {percentile([float(n) for n in reads], .5):.0f}, max {max(reads)}")


def _partial_name(name: str) -> str:
    return f"  words so far: {name.strip()}"


def _marked(call):
    """`call`, run with `_READING_PARTIAL` set."""
    async def marked(*args, **kwargs):
        token = _READING_PARTIAL.set(True)
        try:
            return await call(*args, **kwargs)
        finally:
            _READING_PARTIAL.reset(token)
    return marked
