"""How `omni talk` decides that the user's turn is over: three small strategies behind one
`hear(frame)`. Each hands audio to the client, tells it when a turn begins, and at the end of a
turn asks for the answer; when the user starts speaking over an answer each calls the client's
one `barge_in(BargeIn.SPEECH)`."""

import asyncio
from collections import deque
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.turns.modes import SILENCE_RULE_MS, Detection

if TYPE_CHECKING:
    from omnicli.turns.models import TurnModels

PREROLL_MS = 300
"""Client VAD: audio kept from before speech was detected, so the first syllable is not cut."""
MIN_SPEECH_MS = 96
"""Push-to-talk: a turn with less speech than this (Silero's judgement) is not sent."""


class BargeIn(StrEnum):
    """What stopped an answer early: the server is told to cancel it unless it stopped it itself."""

    KEY = "key"
    """Esc, or a push-to-talk turn begun over the answer."""
    SPEECH = "speech"
    """The user's voice over the answer, heard in this process."""
    SERVER = "server"
    """The server stopped it (its VAD heard the user, or its overlap policy barged in)."""


class TalkHooks(Protocol):
    """What a turn strategy may ask of the talk client."""

    user_speaking: bool

    async def append(self, frame: np.ndarray) -> None:
        """Send a frame of microphone audio to the session."""
        ...

    async def ask(self, speech_end_at: float, *, by_key: bool = False) -> None:
        """The user's turn is over: commit it and ask for the answer."""
        ...

    async def barge_in(self, cause: BargeIn) -> None:
        """Stop the answer where the listener is (the user speaks over it, or pressed a key)."""
        ...

    async def send(self, event: dict) -> None:
        """Send one client event to the session."""
        ...

    def begin_turn(self) -> None:
        """The user's turn began: a key, or speech heard."""
        ...

    def skip_turn(self) -> None:
        """A turn with no speech in it is dropped: nothing is asked."""
        ...

    def recorded_at(self, heard_ms: float) -> float:
        """When the microphone recorded the audio `heard_ms` into what this strategy heard."""
        ...


class ServerVAD:
    """Stream everything; the server hears turns, answers them, and cancels what the user talks over.
    Its turns end after a silence (server_vad) or, `semantic`, by meaning (semantic_vad)."""

    server_vad = True
    silence_ms = SILENCE_RULE_MS
    """What the server waits after speech by default."""

    def __init__(self, client: TalkHooks, *, semantic: bool = False) -> None:
        self.client = client
        self.semantic = semantic
        self.detection = {"type": Detection.SEMANTIC_VAD if semantic else Detection.SERVER_VAD}

    async def hear(self, frame: np.ndarray) -> None:
        """Send the frame; the server decides where turns end."""
        await self.client.append(frame)


class SpeechCheck:
    """Whether a recorded turn held speech: Silero's probability over its frames."""

    def __init__(self, models: "TurnModels") -> None:
        from omnicli.turns.silero import CHUNK, VAD_RATE, SileroVAD

        self._vad = SileroVAD(SPEECH_RATE, models.silero)
        self._chunk_ms = CHUNK * 1000 // VAD_RATE
        self._voiced = 0

    def feed(self, frame: np.ndarray) -> None:
        """CPU work: for a worker thread."""
        self._voiced += sum(p >= 0.5 for p in self._vad.probabilities(frame))

    @property
    def heard(self) -> bool:
        """Whether enough speech was heard for the turn to be worth sending."""
        return self._voiced * self._chunk_ms >= MIN_SPEECH_MS


class PushToTalk:
    """Space starts a turn (interrupting the answer) and Space again sends it. A turn in which
    Silero heard no speech is dropped, not sent: a silent or empty commit would be answered from
    nothing (or refused as an empty buffer)."""

    server_vad = False
    detection = None

    def __init__(self, client: TalkHooks, models: "TurnModels") -> None:
        self.client = client
        self.models = models
        self.on = False
        self._speech = SpeechCheck(models)

    async def toggle(self, pressed_at: float) -> None:
        """Space pressed: start a turn, or end it and send it if it held speech."""
        if not self.on:
            await self.client.barge_in(BargeIn.KEY)
            await self.client.send({"type": "input_audio_buffer.clear"})
            self.on = True
            self._speech = SpeechCheck(self.models)
            self.client.begin_turn()
        else:
            self.on = False
            if self._speech.heard:
                await self.client.ask(pressed_at, by_key=True)
            else:
                await self.client.send({"type": "input_audio_buffer.clear"})
                self.client.skip_turn()

    async def hear(self, frame: np.ndarray) -> None:
        """Send the frame while a turn is open, checking it for speech."""
        if self.on:
            check = self._speech
            await self.client.append(frame)
            await asyncio.to_thread(check.feed, frame)


class ClientVAD:
    """Silero in this process: speech starts a turn (and interrupts), `silence_ms` of quiet ends
    it; with `semantic`, a short pause ends it when Smart Turn calls the turn complete."""

    server_vad = False
    detection = None

    def __init__(self, client: TalkHooks, models: "TurnModels", *, silence_ms: int = SILENCE_RULE_MS, frame_ms: int = 40,
                 semantic: bool = False) -> None:
        from omnicli.turns.vad import TurnDetector

        self.client = client
        self.silence_ms = silence_ms
        self.semantic = semantic
        self._detector = TurnDetector(SPEECH_RATE, models, silence_ms=silence_ms, semantic=semantic)
        self._preroll: deque[np.ndarray] = deque(maxlen=max(1, PREROLL_MS // frame_ms))

    async def hear(self, frame: np.ndarray) -> None:
        """Run Silero on the frame: begin a turn, send its audio, or ask for the answer when it ends."""
        for turn in await asyncio.to_thread(self._detector.feed, frame):
            if turn.kind == "started":
                self.client.begin_turn()
                await self.client.barge_in(BargeIn.SPEECH)
                for earlier in self._preroll:
                    await self.client.append(earlier)
                self._preroll.clear()
            else:
                # The wait began when the speech ended, not `silence_ms` before now: deciding took
                # time too (Smart Turn runs a model), and frames may have queued meanwhile.
                await self.client.ask(self.client.recorded_at(turn.ms))
        if self.client.user_speaking:
            await self.client.append(frame)
        else:
            self._preroll.append(frame)


Turns = ServerVAD | PushToTalk | ClientVAD
