"""`/v1/audio/transcriptions` answers, written and read the same way on both sides.

Formats (OpenAI's): `json` {text}, `text`, `verbose_json` {task, language, duration, text,
segments, words}, `srt` and `vtt` subtitles built from the segments.
"""

TRANSCRIPTION_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")


def verbose_json(text: str, language: str | None, duration: float, segments: list[dict], words: list[dict]) -> dict:
    """The `verbose_json` answer: the text with its language, duration, segments and words."""
    body = {
        "task": "transcribe", "language": language, "duration": round(duration, 3), "text": text,
        "segments": [{"id": n, "start": s["start"], "end": s["end"], "text": s["text"]} for n, s in enumerate(segments)],
    }
    if words:
        body["words"] = [{"word": w["word"], "start": w["start"], "end": w["end"]} for w in words]
    return body


def subtitles(segments: list[dict], fmt: str) -> str:
    """SubRip (`srt`) or WebVTT (`vtt`) cues, one per segment."""
    separator = "," if fmt == "srt" else "."
    cues = []
    for n, segment in enumerate(segments, start=1):
        span = f"{_timestamp(segment['start'], separator)} --> {_timestamp(segment['end'], separator)}"
        text = segment["text"].strip()
        cues.append(f"{n}\n{span}\n{text}\n" if fmt == "srt" else f"{span}\n{text}\n")
    body = "\n".join(cues)
    return body if fmt == "srt" else "WEBVTT\n\n" + body


def _timestamp(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"
