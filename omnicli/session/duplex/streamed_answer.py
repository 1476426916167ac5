"""One answer in the duplex lane: the turn-based `Response` (same engine call, same closing
events, same error policy), with the duplex audio stream: `response.speak` before the first
audio delta, `response.output_audio.delta` with its format, rate and playback metadata, and exactly one
`response.output_audio_transcript.delta` (the words that audio speaks) after each audio delta.
"""

import asyncio
import base64
from collections.abc import Callable

from omnicli.audio.chunk import SPEECH_RATE, AudioChunk
from omnicli.audio.pcm import float_to_pcm16
from omnicli.protocol.duplex import OUTPUT_RATE, ServerEvent
from omnicli.session.duplex.playback import Ledger
from omnicli.session.responses import Response


class DuplexResponse(Response):
    """A turn-based answer whose audio and words go out as the duplex lane's events."""

    def __init__(self, *args, ledger: Callable[["DuplexResponse"], Ledger], meta: Callable[[], dict], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ledger = ledger(self)
        self._meta = meta
        """Session fields for event metadata (session_id, epoch), read when each event goes out."""

    async def _text_piece(self, piece: str) -> None:
        if not self.speaks:  # spoken answers send their words after the audio that speaks them
            self._spoke = True
            await self.emit(ServerEvent.TEXT_DELTA.value, **self._ids, content_index=0, delta=piece)

    async def _audio_piece(self, chunk: AudioChunk) -> None:
        ids, item = {**self._ids, "content_index": 0}, self.item
        if not self._spoke:
            await self.emit(ServerEvent.RESPONSE_SPEAK.value, **ids,
                            metadata={**self._meta(), "model_speak": False, "signal_source": "server_policy"})
        self._spoke = True
        words = chunk.text or ""
        item.audio_samples += len(chunk.samples)
        item.spoken.append((item.audio_samples, words))
        self.ledger.audio(len(chunk.samples), words)
        pcm = await asyncio.to_thread(float_to_pcm16, chunk.samples)
        metadata = {**self._meta(), "model_speak": False, "end_of_turn": False,
                    "audio_duration_ms": len(chunk.samples) * 1000 // SPEECH_RATE,
                    "audio_text_marks": [{"text_chars": len(words), "audio_end_ms": self.ledger.generated_ms}],
                    "playback": self.ledger.snapshot()}
        await self.emit(ServerEvent.AUDIO_DELTA.value, **ids, delta=base64.b64encode(pcm).decode(),
                        format="pcm16", sample_rate_hz=OUTPUT_RATE, metadata=metadata)
        await self.emit(ServerEvent.AUDIO_TRANSCRIPT_DELTA.value, **ids, delta=words)
