"""A TCP proxy that cuts every connection through it on demand, as a network would: both sides
aborted, no close frame. For resume tests against a real server socket."""

import asyncio
import contextlib


class CuttingProxy:
    """TCP between the client and the server, cut on demand (both sides aborted, no close frame)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.writers: list[asyncio.StreamWriter] = []
        self.connections = 0

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader, writer) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [writer, up_writer]

        async def pipe(source, sink) -> None:
            with contextlib.suppress(Exception):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            with contextlib.suppress(Exception):
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.server.close()
        self.cut()
