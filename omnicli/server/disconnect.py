"""A client that hangs up on a non-streamed request cancels the generation behind it.

Streamed responses need no such watch: Starlette cancels them itself when the client goes.
"""

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

T = TypeVar("T")
HUNG_UP = 499
"""nginx's status for a client that closed the connection first; nobody reads it but the log."""


class ClientHungUp(Exception):
    """The client went before its answer was ready; answered with HUNG_UP (errors.py)."""


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Run `work`; if the client hangs up first, cancel it and raise ClientHungUp.

    The request's body has been read by then, so the next message the server sends is
    `http.disconnect`, and it comes only when the client goes.
    """
    task = asyncio.ensure_future(work)
    hangup = asyncio.ensure_future(_hangup(request))
    try:
        await asyncio.wait({task, hangup}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        hangup.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, hangup, return_exceptions=True)
    if task.cancelled():
        raise ClientHungUp
    return task.result()


async def _hangup(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
