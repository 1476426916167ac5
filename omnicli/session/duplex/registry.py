"""The duplex sessions of one server (`app.state.duplex`): admission under `--max-duplex-sessions`,
the opening handshake of a socket (a new session, or `session.resume` of a live one), and the
capabilities the lane advertises.

Sessions live here, not in a route coroutine, so a session survives its socket for the detach grace.
"""

import asyncio
import logging

from omnicli.engine.base import Engine
from omnicli.errors import EventError, OmniError
from omnicli.protocol.duplex import (
    DISCONNECT_GRACE_S,
    ClientEvent,
    ErrorCode,
    ImplementationLevel,
    error_code_and_message,
    handshake_error,
    realtime_error,
)
from omnicli.session.conversation import new_id
from omnicli.session.duplex.lane import DuplexSession
from omnicli.session.duplex.lifeline import Attachment, Lifeline
from omnicli.session.duplex.wire import parse_event
from omnicli.turns.models import TurnModels
from omnicli.turns.scheduler import AnswerScheduler
from omnicli.turns.silero import CHUNK, VAD_RATE

log = logging.getLogger("omni")

MAX_SESSIONS = 4
"""vLLM-Omni's `duplex_session.max_sessions` in its MiniCPM-o deploy configuration."""
BUSY_CLOSE = 1013  # "try again later"
REFUSED_CLOSE = 1008


def capabilities(max_sessions: int, *, resumable: bool = True) -> dict:
    """What this lane does, truthfully: a turn-taking policy around a chat model (not a model that
    decides by itself), appended audio heard per Silero chunk, barge-in, resume (not in process:
    there is no socket to lose), truncation."""
    return {
        "implementation_level": ImplementationLevel.CHAT_FALLBACK.value,
        "chunk_period_ms": CHUNK * 1000 // VAD_RATE,
        "supports_input_append": True,
        "supports_barge_in": True,
        "supports_session_resume": resumable,
        "supports_session_lease": True,
        "supports_audio_truncate": True,
        "supports_multi_session": max_sessions > 1,
        "input_modes": ["append_audio_chunk", "turn_commit_only"],
        "signal_sources": ["client_event", "server_policy"],
        "target_barge_in_latency_ms": None,
    }


class DuplexRegistry:
    """The server's duplex sessions: admission, the opening handshake, resume and shutdown."""

    def __init__(self, engine: Engine, *, model_id: str, max_sessions: int = MAX_SESSIONS,
                 scheduler: AnswerScheduler, models: TurnModels, grace_s: float = DISCONNECT_GRACE_S, served: bool = True,
                 resumable: bool = True) -> None:
        self.engine = engine
        self.scheduler = scheduler
        self.models = models
        self.model_id = model_id
        self.max_sessions = max_sessions
        self.grace_s = grace_s
        self.served = served
        self.resumable = resumable
        self.sessions: dict[str, DuplexSession] = {}
        self._semantic: bool | None = None

    async def _semantic_turns(self) -> bool:
        """Smart Turn when it loads (once per process); silence-based turns otherwise."""
        if self._semantic is None:
            try:
                await asyncio.to_thread(self.models.smart_turn.load)
                self._semantic = True
            except OmniError as exc:
                log.warning("duplex: Smart Turn is not available (%s); turns end on silence", exc)
                self._semantic = False
        return self._semantic

    async def connect(self, attachment: Attachment, first: str, query: dict[str, str]) -> DuplexSession | None:
        """Carry out a socket's first event; the session it is attached to, or None (refused, closed)."""
        try:
            event = await parse_event(first)
        except EventError as exc:
            return await self._refuse(attachment, handshake_error(exc.code, str(exc)))
        kind = event["type"]
        if kind == ClientEvent.SESSION_RESUME:
            if not self.resumable:
                return await self._refuse(attachment, handshake_error(
                    ErrorCode.RESUME_UNSUPPORTED, "this duplex session runs in process: there is no session to resume"))
            return await self._resume(attachment, event)
        if query.get("autostart") == "0" and kind != ClientEvent.SESSION_UPDATE:
            # vLLM-Omni's own client (vllm_omni/clients/duplex.py) always connects with autostart=0 and opens
            # a new session with session.update; what autostart=0 rules out is a session opened implicitly.
            return await self._refuse(attachment, handshake_error(
                ErrorCode.SESSION_NOT_OPEN, "autostart=0: open the session with session.update or resume it with session.resume"))
        if len(self.sessions) >= self.max_sessions:
            error = realtime_error(ErrorCode.SESSION_BUSY, f"duplex session capacity reached (max_sessions={self.max_sessions})")
            return await self._refuse(attachment, error, BUSY_CLOSE)
        update = event.get("session") if kind == ClientEvent.SESSION_UPDATE else {}
        named = (update.get("session_id") if isinstance(update, dict) else None) or query.get("session_id")
        session_id = named if isinstance(named, str) and named else new_id("sess")
        if session_id in self.sessions:
            return await self._refuse(attachment, handshake_error(
                ErrorCode.INVALID_EVENT, f"duplex session {session_id} is open; resume it with session.resume"))
        session = DuplexSession(self.engine, session_id=session_id, model_id=self.model_id, served=self.served,
                                capabilities=capabilities(self.max_sessions, resumable=self.resumable), grace_s=self.grace_s,
                                semantic=await self._semantic_turns(), on_end=self._ended, scheduler=self.scheduler,
                                models=self.models)
        self.sessions[session_id] = session  # the slot is taken before the first await on the session
        try:
            await session.open(attachment, update)
        except EventError as exc:
            self.sessions.pop(session_id, None)
            return await self._refuse(attachment, handshake_error(exc.code, str(exc)))
        if kind != ClientEvent.SESSION_UPDATE:
            await session.handle(first, attachment)
        return session

    async def _resume(self, attachment: Attachment, event: dict) -> DuplexSession | None:
        session_id = event.get("session_id")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            return await self._refuse(attachment, handshake_error(
                ErrorCode.RESUME_EXPIRED, f"Unknown or expired duplex session: {session_id}"))
        if not await session.resume(attachment, event):
            await attachment.close(REFUSED_CLOSE, "session.resume refused")
            return None
        return session

    @staticmethod
    async def _refuse(attachment: Attachment, error: dict, code: int = REFUSED_CLOSE) -> DuplexSession | None:
        try:
            await attachment.send(error)
        except Exception as exc:  # noqa: BLE001 - gone already
            log.debug("duplex: cannot refuse: %s", exc)
        await attachment.close(code, error_code_and_message(error)[0] or "")
        return None

    def _ended(self, session: Lifeline) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]

    async def aclose(self) -> None:
        """Shut every session down (the server is stopping)."""
        for session in list(self.sessions.values()):
            await session.shutdown()
