"""The thinker stage in this process: a GGUF chat model through llama-cpp-python, streaming tokens.

Default: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), joined once from its packages (see `packaged`); the
only catalogue model that met the bar for a default in benchmarks/thinker.py. The chat template
comes from the GGUF. One generation runs at a time per model, its tokens computed on the process's
one llama.cpp thread (engine/native_threads.py); concurrent requests queue in arrival order, but an
answer past its first speakable piece steps aside between two tokens for the answers waiting: at
once for one not yet begun, every `SLICE_TOKENS` for one that stepped aside itself. Its cache is
copied out meanwhile and back in as it was (`CacheCopy`), so it goes on with the same words, and a
new answer's first words need not wait for a whole answer before them. Closing the stream stops
the generation between two tokens.

A turn heard before its commit may be answered ahead (`prefill` with `max_tokens`): the model reads
the prompt and writes the answer's first words, up to its first speakable piece, and the
generation waits, parked, for the answer to be asked for. An answer to the same messages (greedy
decoding says the same words) takes it over. Other work on the model sets it aside (its cache
copied out, as an answer stepping aside) for its answer to take up later; the next turn answered
ahead ends it, and what it read is kept as its conversation's. Writing ahead gives way, at its next token, to an answer asked for meanwhile; and
an answer past its first speakable piece steps aside for a turn to be written ahead as for an
answer, so with several sessions one's pause is used while another's answer is being spoken.

Several conversations on one model (a server's sessions) each keep their llama.cpp cache between
turns (`engine/kept_conversations.py`): a turn reads its new words, not its conversation again.
"""

import asyncio
import itertools
import json
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from omnicli.config import thinker_setting
from omnicli.engine import packaged
from omnicli.engine.cores import PRIORITY, THREADS
from omnicli.engine.kept_conversations import CacheCopy, KeptConversations
from omnicli.engine.llama_load import load_llama
from omnicli.engine.native_threads import LLAMA
from omnicli.engine.sentences import SentenceChunker
from omnicli.engine.workers import ModelQueue
from omnicli.errors import ContextWindowError, OmniError, UsageError

log = logging.getLogger("omni")

DEFAULT_CONTEXT = 4096
_AHEAD_PIECES = 32
"""An answer written ahead stops at its first speakable piece, or after this many tokens."""
SLICE_TOKENS = 8
"""An answer past its first speakable piece lets answers waiting for the model have it after this
many tokens (~0.3 s), and at once for one not yet begun."""
_STEP_ASIDE = object()
"""Put in an answer's hand-off queue by its generation: let the others waiting have the model."""


def chosen_llm(name: str | None) -> str:
    """`--llm` where given, else the one `OMNI_LLM` or the config file names, else the default."""
    return name or thinker_setting() or packaged.DEFAULT_THINKER


def resolve_llm(name: str | None) -> Path:
    """A catalogue name (smollm2, qwen-0.5b, qwen-1.5b) or the path of any GGUF file."""
    name = chosen_llm(name)
    if name in packaged.THINKERS:
        return packaged.thinker_gguf(name)
    model = Path(name).expanduser()
    if not model.is_file():
        known = ", ".join(packaged.THINKERS)
        raise UsageError(f"unknown LLM {name!r}: name one of {known}, or the path of a GGUF file")
    return model


@dataclass
class _SetAside:
    """A generation's state copied out of the context while other work uses the model."""

    cache: CacheCopy
    sampler: object
    """llama-cpp-python's sampler of the generation: its penalties' history."""


@dataclass
class _Ahead:
    """The first words of an answer nobody has asked for yet, and its generation, parked."""

    key: str
    messages: list[dict]
    chunks: Generator[dict, None, None]
    pieces: list[str] = field(default_factory=list)
    ended: bool = False
    aside: _SetAside | None = None
    """Its state, when other work has used the model since (else the context holds it)."""


@dataclass(frozen=True)
class WrittenAhead:
    """What `prefill` wrote of an answer: its first words, token by token, and whether they are all of it."""

    pieces: list[str] = field(default_factory=list)
    whole: bool = False
    """The answer ended within them (a short answer): its last piece is as final as any."""


def _key(messages: list[dict], max_tokens: int, temperature: float) -> str:
    return json.dumps([messages, max_tokens, temperature], sort_keys=True)


class LlamaThinker:
    """A `ThinkerStage` over a GGUF model in llama-cpp-python, in this process."""

    def __init__(self, model: str | None = None, *, context: int = DEFAULT_CONTEXT) -> None:
        self.model_name = model
        self.context = context
        self._source: Path | None = None
        self._llm = None
        self._load_lock = threading.Lock()
        self._queue = ModelQueue("thinker")
        self._ahead: _Ahead | None = None
        """Touched only by the job holding the model (`_queue`)."""
        self.conversations = KeptConversations()
        """Each conversation's cache, kept while another is read (the same: touched by the job holding the model)."""
        self._speaking: threading.Event | None = None
        """The `stop` of the answer holding the model while it is past its first speakable piece
        (it steps aside for newcomers, a turn answered ahead among them); else None."""

    def load(self):
        """The llama.cpp model, loaded on the llama.cpp thread on first use."""
        with self._load_lock:
            if self._llm is None:
                try:
                    import llama_cpp  # noqa: F401
                except ImportError as exc:
                    raise OmniError(
                        "the embedded thinker needs llama-cpp-python (pip install llama-cpp-python)"
                    ) from exc
                self._source = resolve_llm(self.model_name)
                try:
                    self._llm = LLAMA.run(
                        load_llama,
                        self._source,
                        n_ctx=self.context,
                        n_threads=THREADS.thinker,
                        n_threads_batch=THREADS.thinker_prompt,
                        use_mmap=False,  # read into memory, not mapped: a smaller resident set
                        verbose=False,
                    )
                except (ValueError, RuntimeError) as exc:
                    raise OmniError(f"cannot load the LLM {self._source}: {exc}") from exc
            return self._llm

    async def preload(self) -> None:
        """Load the model now, off the event loop."""
        await asyncio.to_thread(self.load)

    def source(self) -> str | None:
        """The GGUF file loaded, once loaded."""
        return str(self._source) if self._source else None

    async def count_tokens(self, messages: list[dict]) -> int:
        """How many tokens the messages' text takes (without the chat template), off the event loop."""
        return await asyncio.to_thread(self._count_tokens, messages)

    def _count_tokens(self, messages: list[dict]) -> int:
        llm = self.load()
        text = "\n".join(str(m.get("content", "")) for m in messages)
        return len(llm.tokenize(text.encode("utf-8", "replace"), add_bos=False))

    async def stream(self, messages: list[dict], *, max_tokens: int, temperature: float) -> AsyncGenerator[str, None]:
        """Answer `messages` token by token once the model is free; closing the stream stops it."""
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue = asyncio.Queue()  # thread -> loop hand-off; the LLM never waits on it
        stop = threading.Event()
        failed: list[BaseException] = []

        back = threading.Event()
        """Set once the model is this answer's again after it stepped aside (or the answer ends)."""

        def step_aside() -> None:
            """On the generation's thread: hand the model over, and return once it is this answer's again."""
            loop.call_soon_threadsafe(pieces.put_nowait, _STEP_ASIDE)
            back.wait()
            back.clear()

        def generate() -> None:
            """On a worker thread: the answer's pieces into `pieces`, then None."""
            try:
                for piece in self.generate(messages, max_tokens=max_tokens, temperature=temperature, stop=stop,
                                           step_aside=step_aside):
                    loop.call_soon_threadsafe(pieces.put_nowait, piece)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the loop's side
                failed.append(exc)
            finally:
                if not loop.is_closed():
                    loop.call_soon_threadsafe(pieces.put_nowait, None)

        async with self._queue.turn() as turn:
            producer = loop.run_in_executor(None, generate)
            try:
                while (piece := await pieces.get()) is not None:
                    if piece is _STEP_ASIDE:
                        await turn.step_aside()
                        back.set()
                    else:
                        yield piece
            finally:
                stop.set()
                back.set()
                await asyncio.shield(producer)
        if failed:
            raise _translated(failed[0])

    async def prefill(self, messages: list[dict], *, temperature: float, max_tokens: int | None = None) -> WrittenAhead:
        """Read `messages` into the model's cache now (a turn heard before it ended), so an answer
        to them reads nothing new instead of the whole new turn: llama.cpp reuses the longest cached
        prefix. With `max_tokens` (the answer's own), write the answer's first words too, for the
        answer to take over (see the module's docstring); they are returned, token by token.
        Skipped while answers wait for the model, or while it is busy with anything but an answer
        past its first speakable piece (whose rest may wait: its first piece is being spoken): no
        answer's first words are delayed for a guess. Cancelled (the user went on speaking), the
        writing stops at the next token and nothing is kept."""
        if self._queue.waiting or (self._queue.busy and self._speaking is None):
            return WrittenAhead()
        stop = threading.Event()
        async with self._queue.turn():
            job = asyncio.get_running_loop().run_in_executor(None, self._prefill, messages, temperature, max_tokens, stop)
            try:
                return await asyncio.shield(job)
            except asyncio.CancelledError:
                stop.set()
                await asyncio.wait([job])  # the model stays held until llama.cpp is done with it
                raise

    def _prefill(self, messages: list[dict], temperature: float, max_tokens: int | None,
                 stop: threading.Event) -> WrittenAhead:
        llm = self.load()
        if max_tokens is None:
            self._drop_ahead()
            self._use_threads(llm, THREADS.thinker_prompt, None)
            LLAMA.run(self.conversations.resume, llm, messages)
            LLAMA.run(lambda: [*llm.create_chat_completion(messages=messages, stream=True, max_tokens=1,
                                                           temperature=temperature, repeat_penalty=1.15)])
            return WrittenAhead()
        key = _key(messages, max_tokens, temperature)
        if self._ahead is not None and self._ahead.key == key:
            return WrittenAhead(list(self._ahead.pieces), self._ahead.ended)  # written ahead already
        self._drop_ahead()
        self._use_threads(llm, THREADS.thinker_prompt, None)
        ahead = self._ahead = _Ahead(key, messages, self._completion(llm, messages, max_tokens, temperature))
        try:
            chunker = SentenceChunker(clock=lambda: 0.0)  # no clock: stop at a piece, not after a wait
            for piece in self._pieces(llm, ahead.chunks, stop):
                ahead.pieces.append(piece)
                if chunker.feed(piece) or len(ahead.pieces) >= _AHEAD_PIECES or self._queue.newcomers:
                    break  # an answer asked for meanwhile goes first: this one is set aside as it stands
            else:
                ahead.ended = True
        except BaseException:
            self._drop_ahead()
            raise
        if stop.is_set():
            self._drop_ahead()
            return WrittenAhead()
        return WrittenAhead(list(ahead.pieces), ahead.ended)

    def _drop_ahead(self) -> None:
        """End an answer written ahead that nobody took (the model is about to do something else).
        One set aside leaves its copy to the kept conversations: its reading of the conversation."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            LLAMA.run(ahead.chunks.close)
            if ahead.aside is not None:
                self.conversations.keep(ahead.messages, ahead.aside.cache)

    def _park_ahead(self, llm) -> None:
        """Before other work on the model: set the answer written ahead aside (a few MB copied, in
        a few ms) for its own answer to take up later."""
        ahead = self._ahead
        if ahead is None or ahead.aside is not None:
            return
        ahead.aside = self._set_aside(llm)
        if ahead.aside is None:
            self._drop_ahead()

    def _set_aside(self, llm) -> _SetAside | None:
        """Copy out the generation the context holds (None: it could not be)."""
        cache = LLAMA.run(CacheCopy.take, llm)
        self.conversations.set_aside()
        return None if cache is None else _SetAside(cache, llm._sampler)  # noqa: SLF001 - the generation's own

    def _take_up(self, llm, messages: list[dict], aside: _SetAside) -> None:
        """Put a generation set aside back in the context as it was (what the context held is kept)."""
        if not LLAMA.run(self.conversations.resume, llm, messages, aside.cache):
            raise OmniError("the thinker could not take up an answer it had set aside")
        llm._sampler = aside.sampler  # noqa: SLF001

    def _completion(self, llm, messages: list[dict], max_tokens: int, temperature: float) -> Generator[dict, None, None]:
        """The answer's chunks, once the conversation's kept cache (if any) is back in the context."""
        LLAMA.run(self.conversations.resume, llm, messages)
        return LLAMA.run(llm.create_chat_completion, messages=messages, stream=True, max_tokens=max_tokens,
                         temperature=temperature, repeat_penalty=1.15)

    def generate(self, messages: list[dict], *, max_tokens: int, temperature: float,
                 stop: threading.Event, step_aside: Callable[[], None] | None = None) -> Iterator[str]:
        """Each token is computed on the llama.cpp thread (engine/native_threads.py); waiting for the
        talker, and `stop`, are seen here between two tokens. An answer to these messages written
        ahead is taken over: its words first, then its generation goes on. Past its first speakable
        piece, while other answers wait for the model, `step_aside()` (returning once the model is
        this answer's again) is called between two tokens, the cache copied out around it."""
        llm = self.load()
        ahead = self._ahead
        if ahead is not None and ahead.key == _key(messages, max_tokens, temperature):
            log.debug("thinker: the answer written ahead is taken over (%d tokens)", len(ahead.pieces))
            self._ahead = None
            if ahead.aside is not None:
                self._take_up(llm, messages, ahead.aside)
        else:
            self._park_ahead(llm)
            self._use_threads(llm, PRIORITY.thinker_threads(), None)
            ahead = _Ahead("", messages, self._completion(llm, messages, max_tokens, temperature))
        written: list[str] = []
        first_piece: SentenceChunker | None = SentenceChunker(clock=lambda: 0.0)
        """Until the answer's first speakable piece is written; then None, and it may step aside."""
        since = 0
        """Tokens written since then, or since it last stepped aside."""
        try:
            for piece in itertools.chain(ahead.pieces, () if ahead.ended else self._pieces(llm, ahead.chunks, stop)):
                written.append(piece)
                yield piece
                if step_aside is None or (first_piece is not None and not first_piece.feed(piece)):
                    continue
                first_piece, since, self._speaking = None, since + 1, stop
                if self._queue.newcomers or (self._queue.waiting and since >= SLICE_TOKENS):
                    self._speaking = None
                    if not self._step_aside(llm, messages, step_aside, stop):
                        break  # stopped meanwhile: the model is another answer's now, not to be touched
                    since = 0
            if not stop.is_set():
                self.conversations.answered(messages, "".join(written))
        finally:
            if self._speaking is stop:
                self._speaking = None
            LLAMA.run(ahead.chunks.close)

    def _step_aside(self, llm, messages: list[dict], step_aside: Callable[[], None], stop: threading.Event) -> bool:
        """Copy this answer out, let the others have the model, and put it back in as it was.
        False: the answer was stopped meanwhile (the model may be another's)."""
        aside = self._set_aside(llm)
        step_aside()
        if stop.is_set():
            return False
        self._park_ahead(llm)  # an answer begun ahead meanwhile waits for its own answer
        if aside is None:
            raise OmniError("the thinker could not take up an answer it had set aside")
        self._take_up(llm, messages, aside)
        return True

    def _pieces(self, llm, chunks: Iterator[dict], stop: threading.Event | None) -> Iterator[str]:
        """The text of each next token; `chunks` is left open (whoever opened it closes it)."""
        threads = None
        while (chunk := LLAMA.run(next, chunks, None)) is not None:
            if stop is not None and stop.is_set():
                break
            PRIORITY.thinker_turn()
            threads = self._use_threads(llm, PRIORITY.thinker_threads(), threads)
            piece = chunk["choices"][0]["delta"].get("content")
            if piece:
                yield piece

    @staticmethod
    def _use_threads(llm, wanted: int, current: int | None) -> int:
        """Generate with `wanted` threads from the next token on (llama.cpp takes the change at once)."""
        if wanted != current:
            import llama_cpp

            llama_cpp.llama_set_n_threads(llm.ctx, wanted, THREADS.thinker_prompt)
        return wanted


def _translated(exc: BaseException) -> BaseException:
    """llama.cpp says ValueError for a prompt over the context window; that is the caller's input."""
    if isinstance(exc, ValueError):
        refused = ContextWindowError if "context window" in str(exc) else UsageError
        return refused(f"the thinker refused the prompt: {exc}")
    if isinstance(exc, (RuntimeError, UnicodeError)):
        return OmniError(f"the thinker failed: {exc}")
    return exc
