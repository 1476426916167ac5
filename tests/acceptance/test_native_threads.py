"""The real models compute on one thread per native library (engine/native_threads.py): llama.cpp's
and CTranslate2's OpenMP teams slow every step twice to threefold once two calling threads keep
one each, and omni's stages are asked from whichever worker thread is free."""

import asyncio
import threading

import llama_cpp.llama_cpp as bindings

from omnicli.audio.pcm import resample
from omnicli.engine.asr import WhisperASR
from omnicli.engine.thinker import LlamaThinker
from omnicli.turns import text_turn
from tests.acceptance.test_embedded_voice import synthesize
from tests.acceptance.test_thinker_prefill import BEFORE, _answer


def _from_two_threads(work) -> set[int]:
    """`work` run by two threads alive together (so theirs are two idents), one after the other;
    their idents."""
    together, first_done, asked = threading.Barrier(2), threading.Event(), set()

    def first() -> None:
        together.wait()
        asked.add(threading.get_ident())
        work()
        first_done.set()

    def second() -> None:
        together.wait()
        asked.add(threading.get_ident())
        first_done.wait()
        work()

    askers = [threading.Thread(target=first), threading.Thread(target=second)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    return asked


def test_every_token_of_every_answer_and_the_words_check_decode_on_one_thread(monkeypatch):
    """Answers asked from two threads, a turn read ahead and the words check."""
    decoded_on: list[int] = []
    decode = bindings.llama_decode

    def spied(ctx, batch):
        decoded_on.append(threading.get_ident())
        return decode(ctx, batch)

    monkeypatch.setattr(bindings, "llama_decode", spied)
    thinker = LlamaThinker("smollm2")
    answers: list[str] = []
    asked = _from_two_threads(lambda: answers.append(_answer(thinker, BEFORE)))
    asyncio.run(thinker.prefill([*BEFORE, {"role": "assistant", "content": answers[0]},
                                 {"role": "user", "content": "And dogs?"}], temperature=0.0))
    assert text_turn.WordsCheck().sentence_end_probability("The children built a small") < text_turn.SENTENCE_END_AT
    assert answers[0] == answers[1] and answers[0].strip()
    assert len(decoded_on) > 20 and len(set(decoded_on)) == 1
    assert not asked & set(decoded_on) and threading.get_ident() not in decoded_on


class _Spied:
    """Whisper's CTranslate2 model, noting the thread of each call it computes."""

    def __init__(self, model, threads: list[int]) -> None:
        self._model, self._threads = model, threads

    def __getattr__(self, name):
        attribute = getattr(self._model, name)
        if name not in ("encode", "generate", "detect_language", "align"):
            return attribute

        def called(*args, **kwargs):
            self._threads.append(threading.get_ident())
            return attribute(*args, **kwargs)
        return called


def test_every_transcript_is_computed_on_one_thread():
    """A turn's quick transcript and a file's full one, asked from two threads each."""
    speech = resample(synthesize("The quick brown fox jumps over the lazy dog."), 24000, 16000)
    asr = WhisperASR()
    whisper = asr.load()
    computed_on: list[int] = []
    whisper.model = _Spied(whisper.model, computed_on)
    heard: list[str] = []
    asked = _from_two_threads(lambda: heard.append(asr.transcribe(speech, "en", quick=True).text))
    asked |= _from_two_threads(lambda: heard.append(asr.transcribe(speech, "en").text))
    assert len(set(heard)) <= 2 and all("quick brown fox" in text.lower() for text in heard)
    assert len(computed_on) >= 4 and len(set(computed_on)) == 1
    assert not asked & set(computed_on) and threading.get_ident() not in computed_on
