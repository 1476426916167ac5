"""The duplex lane's wire, inbound: a client event's JSON (with vLLM-Omni's aliases for event
types) and audio appended as 32-bit float, read as the PCM16 the listener takes."""

import asyncio
import base64
import json

import numpy as np

from omnicli.audio.pcm import float_to_pcm16
from omnicli.errors import EventError
from omnicli.protocol.duplex import CLIENT_ALIASES, ErrorCode

_PARSE_INLINE_CHARS = 64 * 1024
"""Events up to this size are parsed on the loop; larger ones (audio) in a worker thread."""


def f32le_as_pcm16(audio: str) -> str:
    """An append in 32-bit float (`format: pcm_f32le`) as the PCM16 the listener reads."""
    try:
        raw = base64.b64decode(audio, validate=True)
    except ValueError:
        raise EventError("'audio' is not valid base64", ErrorCode.INVALID_EVENT, param="audio") from None
    if len(raw) % 4:
        raise EventError("pcm_f32le audio must be whole 4-byte samples", ErrorCode.INVALID_EVENT, param="audio")
    return base64.b64encode(float_to_pcm16(np.frombuffer(raw, "<f4"))).decode()


async def parse_event(text: str) -> dict:
    """A client event as a dict with a string `type`, aliases mapped to the contract's names."""
    try:
        raw = json.loads(text) if len(text) <= _PARSE_INLINE_CHARS else await asyncio.to_thread(json.loads, text)
    except (ValueError, RecursionError):
        raise EventError("the event is not valid JSON", "invalid_json") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise EventError("an event is a JSON object with a string 'type'", ErrorCode.INVALID_EVENT)
    alias = CLIENT_ALIASES.get(raw["type"])
    if alias is not None:
        raw["type"] = alias.value
    return raw
