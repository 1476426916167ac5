"""The llama.cpp cache of each conversation a thinker read, kept in memory while another is read.

A llama.cpp context holds one sequence: what it read last. Alone, a conversation's next turn reads
only its new words (llama.cpp reuses the longest cached prefix). With several conversations on one
model (`omni serve` with several sessions), each would push the others' history out of the cache,
and every turn would read its whole conversation again: a few hundred tokens, seconds on two cores.
So before the thinker reads a prompt, the cache it is about to overwrite is copied out (only what
sequence 0 holds: ~28 KB a token for the default thinker), and the copy that shares the most
messages with the prompt is copied back in, when it shares more than what the context holds. Kept
copies are forgotten oldest first past `keep_bytes`. The state is copied whole and exactly, so an
answer says what it would have said had its conversation been the only one.
"""

import ctypes
import logging
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("omni")

DEFAULT_KEEP_BYTES = 256 << 20
"""~9000 tokens of the default thinker's cache: a few conversations' history."""
_SEQUENCE = 0
"""llama-cpp-python reads every prompt into sequence 0."""


@dataclass
class CacheCopy:
    """What a llama.cpp context's cache holds (its sequence 0), copied out: the tokens and the bytes."""

    tokens: np.ndarray
    state: ctypes.Array

    @classmethod
    def take(cls, llm, limit: int | None = None) -> "CacheCopy | None":
        """Copy out what `llm`'s cache holds (None: nothing, more than `limit` bytes, or a failure)."""
        import llama_cpp

        tokens = np.array(llm.input_ids[: llm.n_tokens], copy=True)
        if not len(tokens):
            return None
        size = llama_cpp.llama_state_seq_get_size(llm.ctx, _SEQUENCE)
        if limit is not None and size > limit:
            return None
        state = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(llm.ctx, state, size, _SEQUENCE) != size:
            log.debug("thinker: the cache could not be copied out")
            return None
        return cls(tokens, state)

    @property
    def size(self) -> int:
        """Bytes."""
        return len(self.state)

    def put(self, llm) -> bool:
        """Make this what `llm`'s cache holds. On failure (False) it holds nothing: a prompt is read whole."""
        import llama_cpp

        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), _SEQUENCE, -1, -1)
        llm.n_tokens = 0
        if llama_cpp.llama_state_seq_set_data(llm.ctx, self.state, self.size, _SEQUENCE) != self.size:
            log.debug("thinker: a copy of the cache could not be put back")
            return False
        llm.input_ids[: len(self.tokens)] = self.tokens
        llm.n_tokens = len(self.tokens)
        llm._requires_eval = True  # noqa: SLF001 - its logits were not kept: llama-cpp-python reads the last token again
        return True


@dataclass
class _Kept:
    """A conversation's cache, copied out of the context, and the messages it covers."""

    messages: tuple[dict, ...]
    copy: CacheCopy


def shared_messages(a: tuple[dict, ...] | list[dict], b: tuple[dict, ...] | list[dict]) -> int:
    """How many leading messages `a` and `b` have in common."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


class KeptConversations:
    """Swaps conversations' llama.cpp caches in and out of one context (see the module's docstring).
    Call it only while holding the model, before each prompt is read and after each answer."""

    def __init__(self, keep_bytes: int = DEFAULT_KEEP_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self._kept: list[_Kept] = []
        """Oldest first."""
        self.holding: tuple[dict, ...] = ()
        """The messages the context's cache holds the reading of: the last prompt, and its answer once written."""
        self.swaps = 0
        """How many times a kept conversation was copied back in."""

    @property
    def kept_bytes(self) -> int:
        """What the kept copies take in memory."""
        return sum(kept.copy.size for kept in self._kept)

    def resume(self, llm, messages: list[dict], own: CacheCopy | None = None) -> bool:
        """Before `llm` reads `messages`: keep the conversation the reading would overwrite (more
        than its last message differs), and copy back `own` (the copy an answer set aside took of
        itself), else the kept one that shares most with them. False: `own` could not be put back."""
        held = shared_messages(self.holding, messages)
        if held < len(self.holding) - 1:
            self._keep(llm)
        self.holding = tuple(messages)
        if own is not None:
            return own.put(llm)
        best = max(self._kept, key=lambda kept: shared_messages(kept.messages, messages), default=None)
        if best is not None and shared_messages(best.messages, messages) > held:
            self._kept.remove(best)
            if best.copy.put(llm):
                self.swaps += 1
        return True

    def set_aside(self) -> None:
        """What the context holds was copied out by the answer it belongs to: nothing in it to keep."""
        self.holding = ()

    def answered(self, messages: list[dict], text: str) -> None:
        """`llm` wrote `text` as the answer to `messages`: its cache holds that reading now."""
        self.holding = (*messages, {"role": "assistant", "content": text})

    def _keep(self, llm) -> None:
        """Copy out what the context holds."""
        copy = CacheCopy.take(llm, self.keep_bytes)
        if copy is not None:
            self.keep(self.holding, copy)

    def keep(self, messages: tuple[dict, ...] | list[dict], copy: CacheCopy) -> None:
        """Keep `copy` as the reading of `messages`, replacing the older copies of the same conversation."""
        messages = tuple(messages)
        self._kept = [kept for kept in self._kept if shared_messages(kept.messages, messages) < len(kept.messages)]
        self._kept.append(_Kept(messages, copy))
        while self.kept_bytes > self.keep_bytes:
            self._kept.pop(0)
