"""The staged engine and its cascade over scripted stages: exact deltas, order, and what each
stage was asked, with no model loaded."""

import asyncio

import numpy as np
import pytest

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.audio.formats import AudioFormat, encode
from omnicli.engine.base import (
    AudioDelta,
    AudioPart,
    ChatDone,
    ChatRequest,
    ImagePart,
    Message,
    SpeechRequest,
    TextDelta,
    TextPart,
    Transcript,
    TranscriptDelta,
)
from omnicli.engine.cores import PRIORITY, THREADS, CorePriority
from omnicli.engine.staged import StagedEngine
from omnicli.engine.stages import Stages
from omnicli.errors import UnsupportedError, UsageError


class Ears:
    def __init__(self, text: str = "what time is it") -> None:
        self.text = text
        self.heard: list[tuple[float, int, bool]] = []

    async def transcribe(self, samples, rate, *, language=None, quick=False) -> Transcript:
        self.heard.append((len(samples) / rate, rate, quick))
        return Transcript(self.text, "en", len(samples) / rate)

    async def preload(self) -> None: ...

    def source(self) -> str | None:
        return "ears"


class Mind:
    """Writes the given tokens; `fail_after` raises after that many; records what it was asked."""

    context = 4096

    def __init__(self, tokens: list[str], fail_after: int | None = None) -> None:
        self.tokens = tokens
        self.fail_after = fail_after
        self.asked: list[tuple[list[dict], int, float]] = []
        self.closed = False

    async def stream(self, messages, *, max_tokens, temperature):
        self.asked.append((messages, max_tokens, temperature))
        try:
            for n, token in enumerate(self.tokens[:max_tokens]):
                if self.fail_after is not None and n == self.fail_after:
                    raise UsageError("the thinker refused the prompt: too long")
                await asyncio.sleep(0)
                yield token
        finally:
            self.closed = True

    async def count_tokens(self, messages) -> int:
        return sum(len(m["content"].split()) for m in messages)

    async def preload(self) -> None: ...

    def source(self) -> str | None:
        return "mind"


class Mouth:
    def __init__(self, voices=("joe",), samples_per_char: int = 1600) -> None:
        """`samples_per_char`: how long each piece's audio is (1600: a voice's 15 characters a second)."""
        self.known = voices
        self.samples_per_char = samples_per_char
        self.said: list[tuple[str, str | None, float]] = []
        self.urgent: list[bool] = []
        """Whether the thinker was held back while each piece was spoken."""

    def check_voice(self, voice) -> None:
        if voice not in (None, *self.known):
            raise UsageError(f"unknown voice {voice!r}")

    async def say(self, text, *, voice, speed) -> AudioChunk:
        self.said.append((text, voice, speed))
        self.urgent.append(PRIORITY.urgent)
        return AudioChunk(np.full(len(text) * self.samples_per_char, 0.1, np.float32), SPEECH_RATE, text=text)

    async def voices(self):
        return []

    async def preload(self) -> None: ...

    def source(self) -> str | None:
        return None


def run(stream) -> list:
    async def collect():
        return [delta async for delta in stream]

    return asyncio.run(collect())


def engine(tokens, **kwargs) -> tuple[StagedEngine, Ears, Mind, Mouth]:
    ears, mind, mouth = Ears(), Mind(tokens, **kwargs), Mouth()
    return StagedEngine(Stages(asr=ears, thinker=mind, talker=mouth)), ears, mind, mouth


def ask(text: str, **kwargs) -> ChatRequest:
    return ChatRequest([Message("system", [TextPart("Be brief.")]), Message("user", [TextPart(text)])], **kwargs)


def test_a_text_answer_streams_each_token_then_one_done_with_usage():
    staged, _, mind, mouth = engine(["Four", " it", " is."])
    deltas = run(staged.chat(ask("two plus two?", max_tokens=50, temperature=0.2)))
    assert deltas[:3] == [TextDelta("Four"), TextDelta(" it"), TextDelta(" is.")]
    done = deltas[3]
    assert isinstance(done, ChatDone) and len(deltas) == 4
    assert done.text == "Four it is."
    assert done.finish_reason == "stop"
    assert done.usage == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    assert set(done.metrics) == {"thinker"}
    assert mind.asked == [([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "two plus two?"}], 50, 0.2)]
    assert mouth.said == []


def test_speech_follows_the_text_piece_by_piece_in_order():
    tokens = ["Certainly my friend,", " the sum", " is four, I think.", " It is, truly.", " Bye"]
    staged, _, _, mouth = engine(tokens)
    deltas = run(staged.chat(ask("two plus two?", modalities=("text", "audio"), voice="joe", speed=1.5)))
    spoken = [d.chunk.text for d in deltas if isinstance(d, AudioDelta)]
    # The first piece may end at a comma once it is a few words long; later ones are sentences.
    assert spoken == ["Certainly my friend,", "the sum is four, I think.", "It is, truly.", "Bye"]
    assert [s[0] for s in mouth.said] == spoken
    assert {(voice, speed) for _, voice, speed in mouth.said} == {("joe", 1.5)}
    assert isinstance(deltas[-1], ChatDone) and set(deltas[-1].metrics) == {"thinker", "talker"}


def test_with_little_audio_left_to_play_later_pieces_are_handed_over_after_a_few_words():
    """Audio that plays out before the thinker has finished the sentence (here, pieces a few ms
    long): the rest is spoken in pieces of three words, not held until the sentence ends."""
    tokens = ["Certainly my friend,", " the", " sum", " is", " four", " I", " think."]
    staged, _, _, mouth = engine(tokens)
    mouth.samples_per_char = 10
    deltas = run(staged.chat(ask("two plus two?", modalities=("text", "audio"))))
    assert [d.chunk.text for d in deltas if isinstance(d, AudioDelta)] == ["Certainly my friend,", "the sum is", "four I think."]


def test_done_carries_the_timeline_of_the_answer_in_order():
    staged, *_ = engine(["Certainly my friend,", " the sum is four."])
    done = run(staged.chat(ask("two plus two?", modalities=("text", "audio"))))[-1]
    marks = done.marks
    assert list(marks) == ["request", "heard", "first_token", "first_piece", "talker_start", "first_chunk"]
    assert list(marks.values()) == sorted(marks.values())
    text_only = run(staged.chat(ask("two plus two?")))[-1]
    assert list(text_only.marks) == ["request", "heard", "first_token"]


def test_only_the_first_piece_of_an_answer_holds_the_thinker_back():
    staged, _, _, mouth = engine(["Certainly my friend,", " the sum is four.", " Bye."])
    run(staged.chat(ask("two plus two?", modalities=("text", "audio"))))
    assert mouth.urgent == [True, False, False]
    assert not PRIORITY.urgent


def test_the_thinker_takes_every_core_unless_speech_is_being_made():
    cores = CorePriority()
    assert cores.thinker_threads() == THREADS.thinker_prompt == THREADS.cores
    with cores.speaking(), cores.speaking():
        assert cores.thinker_threads() == THREADS.thinker == THREADS.cores - 1
    assert cores.thinker_threads() == THREADS.cores


def test_the_thinker_waits_between_tokens_while_speech_is_urgent():
    import threading

    cores = CorePriority()
    passed = threading.Event()

    def thinker() -> None:
        cores.thinker_turn()
        passed.set()

    with cores.urgent_speech():
        worker = threading.Thread(target=thinker)
        worker.start()
        worker.join(0.2)
        assert worker.is_alive() and not passed.is_set()
    worker.join()
    assert passed.is_set()
    cores.thinker_turn()  # nothing urgent: no wait


def test_an_audio_part_is_heard_first_and_the_thinker_reads_the_transcript():
    staged, ears, mind, _ = engine(["Noon."])
    clip = encode(np.zeros(16000, np.float32), 16000, AudioFormat.WAV)
    req = ChatRequest([Message("user", [AudioPart(clip, "wav"), TextPart("answer this")])])
    deltas = run(staged.chat(req))
    assert deltas[0] == TranscriptDelta("what time is it")
    assert ears.heard == [(1.0, 16000, True)]
    assert mind.asked[0][0] == [{"role": "user", "content": "what time is it\nanswer this"}]
    assert set(deltas[-1].metrics) == {"asr", "thinker"}


def test_images_and_unknown_voices_are_refused_before_any_stage_works():
    staged, ears, mind, mouth = engine(["x"])
    with pytest.raises(UsageError, match="cannot see images"):
        run(staged.chat(ChatRequest([Message("user", [ImagePart(b"png", "image/png")])])))
    with pytest.raises(UsageError, match="unknown voice 'nobody'"):
        run(staged.chat(ask("hi", modalities=("text", "audio"), voice="nobody")))
    assert (ears.heard, mind.asked, mouth.said) == ([], [], [])


def test_a_thinker_failure_mid_answer_reaches_the_caller_and_stops_every_stage():
    staged, _, mind, _ = engine(["One.", " Two.", " Three."], fail_after=2)
    seen = []

    async def consume():
        async for delta in staged.chat(ask("count", modalities=("text", "audio"))):
            seen.append(delta)

    with pytest.raises(UsageError, match="refused the prompt"):
        asyncio.run(consume())
    assert TextDelta("One.") in seen and not any(isinstance(d, ChatDone) for d in seen)
    assert mind.closed


def test_leaving_early_closes_the_thinker_stream():
    staged, _, mind, _ = engine(["a"] * 100)

    async def first_only():
        stream = staged.chat(ask("talk"))
        first = await anext(stream)
        await stream.aclose()
        return first

    assert asyncio.run(first_only()) == TextDelta("a")
    assert mind.closed


def test_hitting_max_tokens_says_length():
    staged, _, _, _ = engine(["a"] * 10)
    assert run(staged.chat(ask("go", max_tokens=3)))[-1].finish_reason == "length"


def test_speech_is_spoken_in_bounded_pieces_and_refuses_what_it_cannot_do():
    staged, _, _, mouth = engine([])
    chunks = run(staged.speech(SpeechRequest("word " * 400 + "end. Next one.", voice="joe")))
    assert [c.text for c in chunks] == [s[0] for s in mouth.said]
    assert max(len(c.text) for c in chunks) <= 200 and chunks[-1].text == "Next one."
    with pytest.raises(UnsupportedError, match="cannot clone"):
        run(staged.speech(SpeechRequest("hi", ref_audio="data:audio/wav;base64,AAAA")))
    with pytest.raises(UsageError, match="unknown voice"):
        run(staged.speech(SpeechRequest("hi", voice="nobody")))


def test_the_staged_engine_reports_what_each_stage_loaded():
    staged, *_ = engine([])
    assert staged.loaded() == {"asr": "ears", "thinker": "mind"}


class WritingAhead(Mind):
    """A thinker that writes an answer's first tokens ahead (`prefill`), as the llama.cpp one does."""

    def __init__(self, tokens: list[str], whole: bool) -> None:
        super().__init__(tokens)
        self.whole = whole

    async def prefill(self, messages, *, temperature, max_tokens=None):
        from omnicli.engine.thinker import WrittenAhead

        return WrittenAhead(list(self.tokens), self.whole) if max_tokens else WrittenAhead()


class SayingAhead(Mouth):
    """A voice that records the pieces spoken ahead."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead: list[str] = []

    async def say_ahead(self, text, *, voice, speed) -> None:
        self.ahead.append(text)


@pytest.mark.parametrize("whole, spoken", [(True, ["Bees make honey."]), (False, [])])
def test_an_answer_begun_ahead_has_its_first_piece_spoken_ahead_once_that_piece_is_final(whole, spoken):
    """A short answer written whole in the pause is spoken ahead too, ready at the commit; its
    words cut off where more may follow ("honey." then " and wax") are not."""
    mouth = SayingAhead()
    staged = StagedEngine(Stages(asr=Ears(), thinker=WritingAhead(["Bees", " make", " honey", "."], whole), talker=mouth))
    asyncio.run(staged.prepare(ask("What do bees make?", modalities=("text", "audio")), begin_answer=True))
    assert mouth.ahead == spoken
    asyncio.run(staged.prepare(ask("What do bees make?", modalities=("text", "audio"))))  # only reading the prompt: nothing spoken
    assert mouth.ahead == spoken
