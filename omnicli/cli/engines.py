"""Pick the engine a command drives: the in-process one, or a server."""

from omnicli.config import Connection
from omnicli.engine.base import Engine


def open_engine(connection: Connection, *, stream: str | None = None) -> Engine:
    if connection.server:
        from omnicli.client.remote import RemoteEngine

        return RemoteEngine(connection.server, connection.api_key, stream=stream)
    from omnicli.engine.embedded import EmbeddedEngine

    return EmbeddedEngine()


def open_chat_engine(
    connection: Connection, *, stream: bool, llm: str | None, asr_model: str | None
) -> Engine:
    if connection.server:
        from omnicli.client.remote import RemoteEngine

        return RemoteEngine(connection.server, connection.api_key, chat_stream=stream)
    from omnicli.engine.embedded import EmbeddedEngine

    return EmbeddedEngine(llm=llm, asr_model=asr_model)
