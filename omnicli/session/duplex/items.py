"""The duplex lane's item and playback events: items created, retrieved, deleted and truncated,
and `playback.ack` (what the client played), which keeps the conversation to what was heard."""

import copy
from collections.abc import Awaitable, Callable

from omnicli.errors import EventError
from omnicli.protocol.duplex import ClientEvent, ErrorCode, ServerEvent
from omnicli.session.core import ConversationCore
from omnicli.session.duplex.playback import Ledgers, keep_played


class ItemEvents:
    """Carries out a duplex session's item and playback events on its conversation and ledgers."""

    def __init__(self, core: ConversationCore, ledgers: Ledgers, emit: Callable[..., Awaitable[None]],
                 meta: Callable[[], dict]) -> None:
        self.core = core
        self.ledgers = ledgers
        self.emit = emit
        self.meta = meta
        """Session fields for event metadata (session_id, epoch), read when each event goes out."""

    async def playback_ack(self, event: dict) -> None:
        """`playback.ack`: how much of an answer the client played, and whether it stopped there."""
        played = event.get("played_ms")
        if isinstance(played, bool) or not isinstance(played, (int, float)) or played < 0:
            raise EventError("played_ms must be a non-negative number", ErrorCode.INVALID_EVENT, param="played_ms")
        ledger = self.ledgers.acknowledged(event)
        truncate = bool(event.get("truncate"))
        ledger.ack(int(played), truncate)
        if truncate:
            keep_played(ledger)
        await self.emit(ServerEvent.PLAYBACK_ACKNOWLEDGED, event={
            "type": ServerEvent.PLAYBACK_ACKNOWLEDGED.value, **self.meta(), "response_id": ledger.response_id,
            "item_id": ledger.item.id, "played_ms": ledger.played_ms, "committed_ms": ledger.committed_ms,
            "truncate": truncate, "playback": ledger.snapshot(), "history_committed": ledger.history_committed})

    async def handle(self, kind: str, event: dict) -> None:
        """`conversation.item.create`, `.retrieve`, `.delete` or `.truncate`."""
        item_id = event.get("item_id")
        if kind == ClientEvent.ITEM_CREATE:
            await self._create_item(event)
            return
        item = self.core.item(item_id)
        if kind == ClientEvent.ITEM_RETRIEVE:
            await self.emit(ServerEvent.ITEM_RETRIEVED, item=copy.deepcopy(item.wire))
        elif kind == ClientEvent.ITEM_DELETE:
            self.core.conversation.delete(item.id)
            await self.emit(ServerEvent.ITEM_DELETED, item_id=item.id, event=event)
        else:
            ledger = self.ledgers.get(item.id)
            end_ms = event.get("audio_end_ms")
            if ledger is None or isinstance(end_ms, bool) or not isinstance(end_ms, int) or not 0 <= end_ms <= ledger.generated_ms:
                raise EventError("truncate needs an assistant item with audio and audio_end_ms within it", "invalid_value",
                                 param="audio_end_ms")
            ledger.ack(end_ms, True)
            keep_played(ledger)
            await self.emit(ServerEvent.ITEM_TRUNCATED, item_id=item.id, content_index=event.get("content_index", 0),
                            audio_end_ms=end_ms, event=event)

    async def _create_item(self, event: dict) -> None:
        wire = copy.deepcopy(event.get("item"))
        if not isinstance(wire, dict) or wire.get("type") != "message" or wire.get("role") not in ("user", "assistant", "system"):
            raise EventError("only message items (user, assistant, system) are supported", "unsupported_item_type", param="item")
        parts = wire.get("content") or []
        if not isinstance(parts, list) or any(not isinstance(p, dict) or p.get("type") not in ("input_text", "text", "output_text")
                                               for p in parts):
            raise EventError("item content must be text parts here", "unsupported_item_type", param="item.content")
        previous = self.core.insert_created(wire, event.get("previous_item_id"))
        for kind in (ServerEvent.ITEM_ADDED, ServerEvent.ITEM_CREATED, ServerEvent.ITEM_DONE):
            await self.emit(kind, previous_item_id=previous, item=copy.deepcopy(wire), event={"type": event["type"]})
