"""Watching the real llama.cpp thinker in acceptance tests: how many tokens each read takes, and
an answer streamed with the arrival of each piece logged."""

from omnicli.engine.thinker import LlamaThinker


def counted_reads(thinker: LlamaThinker, *, prompts_only: bool = False) -> list[int]:
    """Records how many tokens each llama.cpp eval of `thinker`'s model reads from now on; with
    `prompts_only`, only reads of more than one token (a token at a time is writing)."""
    llm = thinker.load()
    counts: list[int] = []
    original = llm.eval

    def counted(tokens):
        if len(tokens) > 1 or not prompts_only:
            counts.append(len(tokens))
        return original(tokens)

    llm.eval = counted
    return counts


async def streamed(thinker: LlamaThinker, messages: list[dict], log: list[str], name: str, max_tokens: int) -> str:
    """`thinker`'s greedy answer to `messages`, `name` logged as each piece arrives."""
    pieces = []
    async for piece in thinker.stream(messages, max_tokens=max_tokens, temperature=0.0):
        pieces.append(piece)
        log.append(name)
    return "".join(pieces)
