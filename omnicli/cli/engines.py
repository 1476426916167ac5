"""Pick the engine a command drives: the in-process one, or a server."""

from omnicli.config import Connection
from omnicli.engine.base import Engine


def open_engine(
    connection: Connection,
    *,
    stream: str | None = None,
    chat_stream: bool = True,
    llm: str | None = None,
    asr_model: str | None = None,
) -> Engine:
    """`stream`/`chat_stream` shape requests to a server; `llm`/`asr_model` pick in-process models."""
    if connection.server:
        from omnicli.client.remote import RemoteEngine

        return RemoteEngine(connection.server, connection.api_key, stream=stream, chat_stream=chat_stream)
    from omnicli.engine.embedded import EmbeddedEngine

    return EmbeddedEngine(llm=llm, asr_model=asr_model)
