"""The one place commands get what they drive: an engine (in process or a server), the realtime
transport to a session for talk, and the judge that hears bench-wer's audio.

Commands take an `Engines` from Typer's context (`ctx.obj`); `main()` passes none, so the
defaults below apply. A test hands the CLI another engine with
`CliRunner().invoke(app, args, obj=MyEngines())`, never by patching globals.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from omnicli.config import Connection
from omnicli.engine.base import Engine

if TYPE_CHECKING:
    from omnicli.bench.runner import Judge


@dataclass(frozen=True)
class EngineChoice:
    """What the command line chose: a server, or the in-process models to load."""

    connection: Connection
    llm: str | None = None
    asr_model: str | None = None
    voice: str | None = None
    speech_stream: str | None = None
    """To a server: None (one whole answer), "sse" or "audio" (streamed speech)."""
    chat_stream: bool = True


class Engines:
    """Builds engines for the commands; subclass it to hand them something else."""

    def engine(self, choice: EngineChoice) -> Engine:
        connection = choice.connection
        if connection.server:
            from omnicli.client.remote import RemoteEngine

            return RemoteEngine(connection.server, connection.api_key, stream=choice.speech_stream,
                                chat_stream=choice.chat_stream, timeout=connection.timeout)
        from omnicli.engine.staged import embedded_engine

        return embedded_engine(llm=choice.llm, asr_model=choice.asr_model, voice=choice.voice)

    def transport(self, choice: EngineChoice, model: str | None):
        """A realtime session: over a WebSocket to the server, or in this process on the engine."""
        if choice.connection.server:
            from omnicli.realtime.transport import WebSocketTransport

            return WebSocketTransport(choice.connection.server, choice.connection.api_key, model)
        from omnicli.realtime.transport import LocalTransport

        return LocalTransport(self.engine(choice))

    def judge(self, asr_model: str | None, device: str) -> "Judge":
        """What hears bench-wer's audio: Whisper in this process, standard decoding."""
        from omnicli.engine.asr import LocalASR

        return LocalASR(asr_model, device=device)


def engines(ctx: typer.Context) -> Engines:
    """The factory this invocation uses: the one a caller passed as `obj`, else the default."""
    return ctx.obj if isinstance(ctx.obj, Engines) else Engines()


def open_engine(choice: EngineChoice) -> Engine:
    """The default engine, for callers outside a command (benchmarks, scripts)."""
    return Engines().engine(choice)
