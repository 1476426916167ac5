"""The `omni talk` loop: voice in, turns committed, the answer played, interruptions honoured.

    source (mic or file) -> [echo gate] -> turns (push-to-talk | client VAD | server VAD)
        -> input_audio_buffer.append / commit + response.create -> session
    session -> response.output_audio.delta -> speaker (jitter buffer, device rate)

Barge-in: when the user speaks over the answer, playback is flushed, the response is cancelled,
and the answer is truncated to `audio_end_ms` = what the speaker actually played.
"""

import asyncio
import base64
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from omnicli.audio.pcm import float_to_pcm16, pcm16_to_float, resample
from omnicli.audio.resampler import StreamResampler
from omnicli.realtime import dialects
from omnicli.realtime.sources import FRAME_MS, RATE

_ECHO_MARGIN = 2.0  # the user must be this much louder than the playback to get through
_PREROLL_FRAMES = 300 // FRAME_MS
_QUIET_SECONDS = 1.5  # headless: a busy server may still be reporting on audio it was sent


@dataclass(frozen=True)
class TalkOptions:
    turns: str = "client"  # "ptt", "client" or "server"
    echo_gate: bool = True
    instructions: str | None = None
    voice: str | None = None
    model: str | None = None


LEGACY_RATE = 16000
_GREETING_SECONDS = 1.5
"""A GA server greets with session.created at once; one that stays silent is vLLM-Omni's legacy
(<= 0.30) speech-to-text style path, which wants 16 kHz audio and `commit {final}`."""


class FileSpeaker:
    """The headless speaker: audio counts as heard the moment it arrives."""

    device_rate = RATE
    buffered_seconds = 0.0

    def __init__(self) -> None:
        self.played_frames = 0

    def write(self, samples: np.ndarray) -> None:
        self.played_frames += len(samples)

    def start(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


async def _quietly(work) -> None:
    try:
        await work
    except Exception:  # noqa: BLE001 - the connection may already be gone at the end
        pass


def _rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples**2))) if len(samples) else 0.0


class TalkClient:
    def __init__(self, transport, source, speaker, options: TalkOptions, view, log) -> None:
        self.transport = transport
        self.source = source
        self.speaker = speaker
        self.options = options
        self.view = view
        self.log = log
        self.said: list[np.ndarray] = []
        """Everything the assistant said (for --output-file)."""
        self.awaiting_answer = False
        self.responding = False
        self.answer_item: str | None = None
        self.muted_item: str | None = None
        self._answer_mark = 0
        self._answer_samples = 0
        self._first_audio_seen = False
        self._last_event_at = time.monotonic()
        self._playback_rms = 0.0
        self._commit_at: float | None = None
        self._speech_end_at: float | None = None
        self.turns: list[dict] = []
        """Per turn: seconds from end of speech and from commit to the first answer audio."""
        self.ptt_on = False
        self.legacy = False
        self._legacy_resampler = None
        self._greeted = asyncio.Event()
        self._detector = None
        self._speaking = False
        self._preroll: deque = deque(maxlen=_PREROLL_FRAMES)

    async def send(self, event: dict) -> None:
        self.log.write("out", event)
        await self.transport.send(event)

    # ---- setup and main loop -------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        await self.transport.open()
        tasks = [asyncio.create_task(self._receive())]
        try:
            await asyncio.wait_for(self._greeted.wait(), _GREETING_SECONDS)
        except asyncio.TimeoutError:
            self.legacy = True
            self._legacy_resampler = StreamResampler(RATE, LEGACY_RATE)
        await self._configure()
        if self.options.turns == "client":
            from omnicli.audio.vad import TurnDetector

            self._detector = TurnDetector(RATE, silence_ms=500)
        self.speaker.start()  # after the models loaded: a busy CPU makes the device underrun
        await self.source.start()
        tasks.append(asyncio.create_task(self._listen()))
        finished = getattr(self.source, "finished", None)
        if finished is not None:
            tasks.append(asyncio.create_task(self._end_after_file(finished, stop)))
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopper and task.exception():
                    raise task.exception()
        finally:
            if self.legacy:
                await _quietly(self.send({"type": "input_audio_buffer.commit", "final": True}))
            for task in (*tasks, stopper):
                task.cancel()
            await asyncio.gather(*tasks, stopper, return_exceptions=True)
            await self.source.stop()
            await self.transport.close()

    async def _configure(self) -> None:
        if self.legacy:
            await self.send({"type": "session.update", "model": self.options.model})
            return
        session: dict = {"type": "realtime", "output_modalities": ["audio"],
                         "audio": {"input": {"format": {"type": "audio/pcm", "rate": RATE},
                                             "turn_detection": {"type": "server_vad"} if self.options.turns == "server" else None},
                                   "output": {"format": {"type": "audio/pcm", "rate": RATE}}}}
        if self.options.instructions:
            session["instructions"] = self.options.instructions
        if self.options.voice:
            session["audio"]["output"]["voice"] = self.options.voice
        await self.send({"type": "session.update", "session": session})

    async def _end_after_file(self, finished: asyncio.Event, stop: asyncio.Event) -> None:
        """Headless: once the file has been spoken and the last answer heard, we are done."""
        await finished.wait()
        while (self.awaiting_answer or self.responding or self._speaking or self.speaker.buffered_seconds > 0
               or not self.source.frames.empty() or time.monotonic() - self._last_event_at < _QUIET_SECONDS):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # the device plays out its own buffer
        stop.set()

    # ---- the user's side -----------------------------------------------------------------

    def toggle_push_to_talk(self) -> None:
        asyncio.get_running_loop().create_task(self._toggle())

    async def _toggle(self) -> None:
        if not self.ptt_on:
            await self.barge_in()
            await self.send({"type": "input_audio_buffer.clear"})
            self.ptt_on = True
            self.view.set_state("listening (Enter to send)")
        else:
            self.ptt_on = False
            self._speech_end_at = time.monotonic()
            await self._commit_and_ask()

    async def _listen(self) -> None:
        while True:
            frame = await self.source.frames.get()
            if self._gated(frame):
                frame = np.zeros_like(frame)
            if self.options.turns == "server":
                await self._append(frame)
            elif self.options.turns == "ptt":
                if self.ptt_on:
                    await self._append(frame)
            else:
                await self._client_turns(frame)

    def _gated(self, frame: np.ndarray) -> bool:
        """Without headphones the mic hears the answer: let it through only when the user is
        clearly louder than what is playing."""
        if not self.options.echo_gate or self.speaker.buffered_seconds <= 0:
            return False
        return _rms(frame) < _ECHO_MARGIN * self._playback_rms

    async def _client_turns(self, frame: np.ndarray) -> None:
        events = await asyncio.to_thread(self._detector.feed, frame)
        for turn in events:
            if turn.kind == "started":
                self._speaking = True
                self.view.set_state("hearing you")
                await self.barge_in()
                for earlier in self._preroll:
                    await self._append(earlier)
                self._preroll.clear()
            else:
                self._speaking = False
                self._speech_end_at = time.monotonic() - self._detector.silence_ms / 1000
                await self._commit_and_ask()
        if self._speaking:
            await self._append(frame)
        else:
            self._preroll.append(frame)

    async def _append(self, frame: np.ndarray) -> None:
        if self._legacy_resampler is not None:
            frame = self._legacy_resampler.process(frame)
        await self.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(float_to_pcm16(frame)).decode()})

    async def _commit_and_ask(self) -> None:
        if self.legacy:  # the commit itself starts the generation there
            await self.send({"type": "input_audio_buffer.commit", "final": False})
            self.responding = True
        else:
            await self.send({"type": "input_audio_buffer.commit"})
            await self.send({"type": "response.create"})
        self._commit_at = time.monotonic()
        self.awaiting_answer = True
        self.view.set_state("thinking")

    async def barge_in(self) -> None:
        """The user speaks over the answer: stop it where the listener stopped hearing it."""
        audible = self.speaker.buffered_seconds > 0
        if not (audible or self.responding) or (self.answer_item is None and not self.legacy):
            return
        played = (self.speaker.played_frames - self._answer_mark) * RATE / self.speaker.device_rate
        played = int(min(max(played, 0), self._answer_samples))
        self.speaker.flush()
        if self.legacy:
            return  # no cancel or truncate on that path: flushing the speaker is all there is
        if self.responding and self.options.turns != "server":  # server VAD cancels by itself
            await self.send({"type": "response.cancel"})
        await self.send({"type": "conversation.item.truncate", "item_id": self.answer_item,
                         "content_index": 0, "audio_end_ms": played * 1000 // RATE})
        self.muted_item = self.answer_item
        self.view.set_state("interrupted")

    # ---- the server's side ---------------------------------------------------------------

    async def _receive(self) -> None:
        async for event in self.transport.events():
            self._last_event_at = time.monotonic()
            self.log.write("in", event)
            heard = dialects.read(event)
            match heard.kind:
                case "audio":
                    self._play(heard)
                case "answer_text" if heard.item_id is None or heard.item_id != self.muted_item:
                    self.view.answer_delta(heard.text)
                case "user_text":
                    self.view.heard(heard.text)
                case "response_started":
                    self.responding = True
                case "answer_item":
                    self.answer_item = heard.item_id
                    self._first_audio_seen = False
                    self.view.new_answer()
                case "response_done":
                    self._answer_finished(heard.status)
                case "audio_done" if self.legacy:  # that path has no response.done
                    self._answer_finished("completed")
                case "session":
                    self._greeted.set()
                case "speech_started":
                    self._speaking = True
                    await self.barge_in()
                case "speech_stopped":
                    self._speaking = False
                    self._speech_end_at = self._commit_at = time.monotonic()
                    self.awaiting_answer = True
                case "error":
                    self.view.problem(heard.text)
                    if "buffer is empty" in heard.text:
                        self.awaiting_answer = False

    def _answer_finished(self, status: str | None) -> None:
        self.responding = False
        self.awaiting_answer = False
        self._first_audio_seen = False
        self.view.answer_done(status)
        self.view.set_state("listening")

    def _play(self, heard: dialects.Heard) -> None:
        if heard.item_id is not None and heard.item_id == self.muted_item:
            return  # the rest of an interrupted answer
        samples = pcm16_to_float(heard.pcm)
        if heard.rate != RATE:
            samples = resample(samples, heard.rate, RATE)
        if not self._first_audio_seen:
            self._first_audio_seen = True
            now = time.monotonic()
            self._answer_mark = self.speaker.played_frames + int(self.speaker.buffered_seconds * self.speaker.device_rate)
            self._answer_samples = 0
            turn = {"from_commit": now - self._commit_at if self._commit_at else None,
                    "from_speech_end": now - self._speech_end_at if self._speech_end_at else None}
            self.turns.append(turn)
            if turn["from_speech_end"] is not None:
                self.view.turn_latency(turn["from_speech_end"])
            self.view.set_state("speaking")
        self._answer_samples += len(samples)
        self._playback_rms = 0.8 * self._playback_rms + 0.2 * _rms(samples)
        self.said.append(samples)
        self.speaker.write(samples)
