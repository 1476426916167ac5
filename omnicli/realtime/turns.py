"""How `omni talk` decides that the user's turn is over: three small strategies behind one
`hear(frame)`. Each hands audio to the client and, at the end of a turn, asks for the answer;
when the user starts speaking over an answer each calls the client's one `interrupt()`."""

import asyncio
import time
from collections import deque
from typing import Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE

PREROLL_MS = 300
"""Client VAD: audio kept from before speech was detected, so the first syllable is not cut."""


class TalkHooks(Protocol):
    """What a turn strategy may ask of the talk client."""

    user_speaking: bool

    async def append(self, frame: np.ndarray) -> None: ...
    async def ask(self, speech_end_at: float) -> None: ...
    async def interrupt(self) -> None: ...
    async def send(self, event: dict) -> None: ...
    def show(self, state: str) -> None: ...


class ServerVAD:
    """Stream everything; the server hears turns, answers them, and cancels what the user talks over."""

    server_vad = True
    silence_ms = 500

    def __init__(self, client: TalkHooks) -> None:
        self.client = client

    async def hear(self, frame: np.ndarray) -> None:
        await self.client.append(frame)


class PushToTalk:
    """Enter starts a turn (interrupting the answer) and Enter again sends it."""

    server_vad = False

    def __init__(self, client: TalkHooks) -> None:
        self.client = client
        self.on = False

    async def toggle(self) -> None:
        if not self.on:
            await self.client.interrupt()
            await self.client.send({"type": "input_audio_buffer.clear"})
            self.on = self.client.user_speaking = True
            self.client.show("listening (Enter to send)")
        else:
            self.on = self.client.user_speaking = False
            await self.client.ask(time.monotonic())

    async def hear(self, frame: np.ndarray) -> None:
        if self.on:
            await self.client.append(frame)


class ClientVAD:
    """Silero in this process: speech starts a turn (and interrupts), `silence_ms` of quiet ends it."""

    server_vad = False

    def __init__(self, client: TalkHooks, *, silence_ms: int = 500, frame_ms: int = 40) -> None:
        from omnicli.audio.vad import TurnDetector

        self.client = client
        self.silence_ms = silence_ms
        self._detector = TurnDetector(SPEECH_RATE, silence_ms=silence_ms)
        self._preroll: deque[np.ndarray] = deque(maxlen=max(1, PREROLL_MS // frame_ms))

    async def hear(self, frame: np.ndarray) -> None:
        for turn in await asyncio.to_thread(self._detector.feed, frame):
            if turn.kind == "started":
                self.client.user_speaking = True
                self.client.show("hearing you")
                await self.client.interrupt()
                for earlier in self._preroll:
                    await self.client.append(earlier)
                self._preroll.clear()
            else:
                self.client.user_speaking = False
                await self.client.ask(time.monotonic() - self.silence_ms / 1000)
        if self.client.user_speaking:
            await self.client.append(frame)
        else:
            self._preroll.append(frame)


Turns = ServerVAD | PushToTalk | ClientVAD
