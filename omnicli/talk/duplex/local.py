"""`omni talk --duplex` without `--server`: the duplex session runs in this process on the
embedded engine, and `DuplexLink` speaks to it through `LocalDuplexSocket` instead of a WebSocket.

Everything above the socket is the same as against `omni serve` (the handshake, heartbeats,
event acks, playback acks). Resume is not: there is no connection to lose, so the session says
`supports_session_resume: false` and a `session.resume` is refused.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Callable

from omnicli.engine.base import Engine
from omnicli.errors import ServerError
from omnicli.session.duplex.lane import DuplexSession
from omnicli.session.duplex.lifeline import Attachment
from omnicli.session.duplex.registry import DuplexRegistry
from omnicli.talk.duplex.link import DuplexLink
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler

MODEL_ID = "omni-embedded"


class LocalDuplexSocket:
    """One in-process "connection" to a registry of one session: the first event sent opens the
    session (as a socket's first event does), the rest go to it; events come back through a queue,
    as JSON would carry them."""

    def __init__(self, registry: DuplexRegistry) -> None:
        self.registry = registry
        self._events: asyncio.Queue[dict | None] = asyncio.Queue()
        self._attachment = Attachment(self._deliver, self._ended)
        self._session: DuplexSession | None = None

    async def open(self) -> None:
        """Load the engine's models; there is nothing to connect to."""
        await self.registry.engine.preload()

    async def _deliver(self, event: dict) -> None:
        await self._events.put(json.loads(json.dumps(event)))  # a copy, as the wire would make: the journal keeps its own

    async def _ended(self, code: int, reason: str) -> None:
        await self._events.put(None)

    async def send(self, event: dict) -> None:
        """Hand an event to the session as JSON text; the first one opens the session."""
        if self._attachment.closed:
            raise ServerError("the in-process duplex session has ended")
        text = json.dumps(event)
        if self._session is None:
            self._session = await self.registry.connect(self._attachment, text, {})
        else:
            await self._session.handle(text, self._attachment)

    async def events(self) -> AsyncIterator[dict]:
        """The session's events in order, until the attachment ends."""
        while (event := await self._events.get()) is not None:
            yield event

    async def close(self) -> None:
        """Close the registry (and a session still in it) and the attachment."""
        await self.registry.aclose()  # a session not closed by session.close ends here, without a word
        await self._attachment.close()


def local_link(engine: Engine, model: str | None, log: Callable[[str, dict], None],
               models: TurnModels | None = None) -> DuplexLink:
    """A link to a one-session duplex lane over `engine`, in this process (with the talk's turn-taking `models`)."""
    registry = DuplexRegistry(engine, model_id=model or MODEL_ID, max_sessions=1, scheduler=AnswerScheduler(),
                              models=models or TurnModels(), served=False, resumable=False)
    return DuplexLink("in-process", None, model, log=log, socket=lambda: LocalDuplexSocket(registry))
