"""The server-kept conversation of a realtime session: items, their audio, and what was heard.

Items are stored as their wire dicts (OpenAI Realtime GA shapes) plus what the engine needs:
the user's audio and its transcript once heard; for the assistant, where each spoken sentence
ended, so a truncate can keep exactly the text the listener heard.
"""

import secrets
from dataclasses import dataclass, field

import numpy as np

from omnicli.audio.chunk import SPEECH_RATE
from omnicli.engine.base import AudioPart, Message, Part, TextPart


def new_id(prefix: str) -> str:
    """A fresh, unguessable id in OpenAI's style, e.g. `item_…` for prefix 'item'."""
    return f"{prefix}_{secrets.token_hex(10)}"


@dataclass
class Item:
    """One conversation item: its wire dict, plus the audio and words the engine needs."""

    wire: dict
    audio: np.ndarray | None = None
    """A user item's speech (float32, 24 kHz), until the engine has heard it."""
    transcript: str | None = None
    spoken: list[tuple[int, str]] = field(default_factory=list)
    """Assistant audio: (end sample, sentence) for each sentence spoken, in order."""
    audio_samples: int = 0

    @property
    def id(self) -> str:
        """The item's id, as the client knows it."""
        return self.wire["id"]

    @property
    def role(self) -> str:
        """'user', 'assistant' or 'system'; empty for items without a role."""
        return self.wire.get("role", "")

    @property
    def audio_ms(self) -> int:
        """The length of the assistant's audio kept for this item, in milliseconds."""
        return self.audio_samples * 1000 // SPEECH_RATE

    def truncate(self, content_index: int, audio_end_ms: int) -> None:
        """Keep what the listener heard: the audio up to `audio_end_ms` and its words."""
        self.wire["content"][content_index]["transcript"] = heard_text(self, audio_end_ms)
        self.audio_samples = audio_end_ms * SPEECH_RATE // 1000
        self.spoken = [(end, text) for end, text in self.spoken if end <= self.audio_samples]

    def message(self) -> Message | None:
        """This item as a chat message for the engine; None for items that say nothing."""
        role = self.role
        if role not in ("user", "assistant", "system"):
            return None
        parts: list[Part] = []
        for part in self.wire.get("content", []):
            kind = part.get("type")
            if kind in ("input_text", "output_text", "text"):
                parts.append(TextPart(part.get("text") or ""))
            elif kind in ("output_audio", "audio") and part.get("transcript"):
                parts.append(TextPart(part["transcript"]))
            elif kind == "input_audio":
                if self.transcript is not None:
                    parts.append(TextPart(self.transcript))
                elif self.audio is not None and len(self.audio):
                    parts.append(AudioPart(wav_bytes(self.audio), "wav"))
        parts = [p for p in parts if not (isinstance(p, TextPart) and not p.text.strip())]
        return Message(role, parts)  # type: ignore[arg-type]  # role checked above if parts else None


def wav_bytes(samples: np.ndarray) -> bytes:
    """24 kHz samples as a WAV file, for an audio part the engine reads."""
    from omnicli.audio.formats import AudioFormat, encode

    return encode(samples, SPEECH_RATE, AudioFormat.WAV)


def heard_text(item: Item, audio_end_ms: int) -> str:
    """The transcript up to `audio_end_ms`: whole sentences already finished, and the share of
    the sentence being spoken, cut at a word boundary."""
    end_sample = audio_end_ms * SPEECH_RATE // 1000
    heard, start = [], 0
    for end, sentence in item.spoken:
        if end <= end_sample:
            heard.append(sentence)
        else:
            fraction = (end_sample - start) / max(1, end - start)
            words = sentence.split()
            keep = int(len(words) * fraction)
            if keep:
                heard.append(" ".join(words[:keep]))
            break
        start = end
    return " ".join(heard)


class Conversation:
    """The items in order. Items `forget`ten stay in the conversation (a client can still
    retrieve them) but are no longer sent to the engine: the context window is finite."""

    def __init__(self) -> None:
        self.id = new_id("conv")
        self.items: list[Item] = []
        self._forgotten: set[str] = set()

    def find(self, item_id: str) -> Item | None:
        """The item with this id, or None."""
        return next((item for item in self.items if item.id == item_id), None)

    def insert(self, item: Item, previous_item_id: str | None = None) -> str | None:
        """Add after `previous_item_id` (or at the end); returns the id of the item before it."""
        if previous_item_id is None:
            self.items.append(item)
        elif previous_item_id == "root":
            self.items.insert(0, item)
        else:
            index = next((i for i, it in enumerate(self.items) if it.id == previous_item_id), None)
            if index is None:
                raise KeyError(previous_item_id)
            self.items.insert(index + 1, item)
        position = self.items.index(item)
        return self.items[position - 1].id if position else None

    def delete(self, item_id: str) -> bool:
        """Remove the item with this id; False when there is none."""
        item = self.find(item_id)
        if item is None:
            return False
        self.items.remove(item)
        return True

    def remembered(self) -> list[Item]:
        """What the engine is sent, oldest first."""
        return [item for item in self.items if item.id not in self._forgotten]

    def forget_oldest(self, count: int, *, answering: Item | None = None) -> bool:
        """Stop sending the oldest `count` turns (system items and the answer being written stay);
        False when only the newest turn is left."""
        turns = [item for item in self.remembered() if item.role != "system" and item is not answering]
        if len(turns) <= 1:
            return False
        self._forgotten.update(item.id for item in turns[: min(count, len(turns) - 1)])
        return True


def messages(instructions: str | None, items: list[Item]) -> list[Message]:
    """The prompt for these items; CPU work (unheard audio becomes WAV), for a worker thread."""
    history = [Message("system", [TextPart(instructions)])] if instructions else []
    history += [m for item in items if (m := item.message()) is not None]
    return history
