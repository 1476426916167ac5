"""What a realtime session is, whichever wire it speaks: the conversation, the user turns put
into it, the one answer running, and the policy that turns any failure of one client event into
an `error` event while the session lives on. The turn-based session (`turn_based.py`) and the
duplex lane (`duplex/lane.py`) each own a `ConversationCore` and adapt it to their events."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.engine.base import Engine
from omnicli.errors import EventError
from omnicli.session.conversation import Conversation, Item, new_id
from omnicli.session.responses import Response, read_ahead
from omnicli.session.settings import SessionSettings
from omnicli.turns.input_buffer import InputBuffer
from omnicli.turns.scheduler import AnswerScheduler

log = logging.getLogger("omni")

ErrorSink = Callable[..., Awaitable[None]]
"""`error(message, code, *, event_id=None, param=None)`: one `error` event in the session's shape."""


async def carry_out(text: str, parse: Callable[[str], Awaitable[Any]], dispatch: Callable[[Any], Awaitable[None]],
                    event_id: Callable[[Any], str | None], error: ErrorSink) -> None:
    """One client event, parsed and dispatched: what the client got wrong (`EventError`) and any
    other failure each become one `error` event, and the session goes on."""
    event = None
    try:
        event = await parse(text)
        await dispatch(event)
    except EventError as exc:
        await error(str(exc), exc.code, event_id=event_id(event) if event is not None else None, param=exc.param)
    except Exception as exc:  # noqa: BLE001 - the session must outlive any one event
        log.exception("realtime: event failed")
        await error(f"internal error: {exc}", "server_error", event_id=event_id(event) if event is not None else None)


class ConversationCore:
    """The conversation of one realtime session and its one running answer, shared by both session kinds."""

    def __init__(self, engine: Engine, settings: SessionSettings, scheduler: AnswerScheduler,
                 closed: Callable[[], bool]) -> None:
        self.engine = engine
        self.settings = settings
        self.scheduler = scheduler
        self.conversation = Conversation()
        self._closed = closed
        self.task: asyncio.Task | None = None
        """The running answer's task (None once it ended or was cancelled)."""
        self.current: Response | None = None
        """The running answer."""

    # ---- items ---------------------------------------------------------------------------

    def item(self, item_id: Any) -> Item:
        """The item named `item_id`; a client naming none gets `item_not_found`."""
        item = self.conversation.find(item_id) if isinstance(item_id, str) else None
        if item is None:
            raise EventError(f"no item with id '{item_id}'", "item_not_found", param="item_id")
        return item

    def insert_created(self, wire: dict, previous_item_id: str | None, audio=None) -> str | None:
        """Put a client-created item (`conversation.item.create`) into the conversation, completed,
        after `previous_item_id`; the id of the item before it."""
        wire.setdefault("id", new_id("item"))
        wire["object"], wire["status"] = "realtime.item", "completed"
        if self.conversation.find(wire["id"]):
            raise EventError(f"an item with id '{wire['id']}' already exists", "item_exists", param="item.id")
        try:
            return self.conversation.insert(Item(wire, audio=audio), previous_item_id)
        except KeyError:
            raise EventError(f"previous_item_id '{previous_item_id}' is not in the conversation", "item_not_found",
                             param="previous_item_id") from None

    async def commit_turn(self, buffer: InputBuffer, item_id: str, extra: list[dict] | None = None) -> tuple[Item, Any]:
        """The input buffer's audio as a user item, its words if heard early (else its audio, for the
        engine to hear), and `extra` content after it; (the item, its samples). Not yet inserted."""
        committed = await buffer.commit()
        wire = {"id": item_id, "type": "message", "object": "realtime.item", "role": "user", "status": "completed",
                "content": [{"type": "input_audio", "transcript": committed.transcript}, *(extra or [])]}
        heard = committed.transcript
        return Item(wire, audio=committed.samples if heard is None else None, transcript=heard), committed.samples

    @staticmethod
    def heard(item: Item, transcript: str) -> float:
        """The engine heard a user item's audio: keep the words, drop the audio; its seconds."""
        seconds = len(item.audio) / SPEECH_RATE if item.audio is not None else 0.0
        item.transcript = transcript
        item.wire["content"][0]["transcript"] = transcript
        item.audio = None
        return seconds

    async def read_ahead(self, transcript: str, *, begin: bool = True) -> None:
        """A turn heard before its commit: the engine reads the prompt its answer would have while
        the user is quiet, and with `begin` (not for words heard while the user still speaks)
        begins that answer where it delays no other answer's first words (the engine knows)."""
        if self.task is None and not self._closed():
            await read_ahead(self.engine, self.conversation, self.settings, transcript, begin_answer=begin)

    # ---- the answer ----------------------------------------------------------------------

    async def start(self, response: Response, after: Callable[[], None] | None = None) -> None:
        """Announce `response` and run it; `after` is called once it ended by itself."""
        self.current = response
        await response.begin()
        if self._closed():
            self.current = None
            return
        self.task = asyncio.create_task(self._run(response, after))

    async def _run(self, response: Response, after: Callable[[], None] | None) -> None:
        try:
            await response.run()
        finally:
            if self.task is asyncio.current_task():
                self.task, self.current = None, None
                if after is not None:
                    after()

    async def cancel(self, reason: str) -> str | None:
        """Cancel the running answer; its `response.done` says `cancelled` and why. Closing events
        already under way are waited for, not cut short. The id of the answer cancelled, if any."""
        task, response = self.task, self.current
        self.task, self.current = None, None
        if task is None or response is None:
            return None
        if not response.finishing:
            task.cancel(reason)
        await asyncio.gather(task, return_exceptions=True)
        await response.finish("cancelled", reason)  # only if it was cancelled before it began to run
        return response.id

