"""`omni transcribe`: audio files in, text out (plain, JSON, or SRT/VTT subtitles).

In process with faster-whisper, or through any `/v1/audio/transcriptions` with --server. omni
writes every format itself from the transcript's segments, so a server that only answers JSON
(faster-whisper-server) still gives subtitles. Every file is read and decoded before any work,
and nothing is written until every file is transcribed.
"""

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from omnicli.cli.console import note
from omnicli.cli.options import ApiKeyOption, AsrModelOption, ModelOption, ServerOption, TimeoutOption
from omnicli.errors import UsageError

FORMATS = ("text", "json", "verbose_json", "srt", "vtt")
SUBTITLES = ("srt", "vtt")


def transcribe(
    ctx: typer.Context,
    files: Annotated[list[str], typer.Argument(help="Audio files (wav, mp3, flac, ogg); '-' reads stdin.", show_default=False)],
    format: Annotated[str, typer.Option("--format", "-f", help="text, json, verbose_json, srt or vtt.")] = "text",
    language: Annotated[str | None, typer.Option("--language", "-l", help="Language code (en, de, ...); default: detected.", show_default=False)] = None,
    words: Annotated[bool, typer.Option("--words", help="Word timestamps too (json formats).")] = False,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Write here instead of stdout (one input file).", show_default=False)] = None,
    output_dir: Annotated[str | None, typer.Option("--output-dir", help="Write <name>.<format> per input here.", show_default=False)] = None,
    asr_model: AsrModelOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    api_key: ApiKeyOption = None,
    timeout: TimeoutOption = None,
) -> None:
    """Transcribe: omni transcribe meeting.wav -f srt -o meeting.srt"""
    import asyncio

    from omnicli.cli.engines import EngineChoice, engines
    from omnicli.cli.files import check_writable, make_folder
    from omnicli.config import resolve_connection

    if format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if words and format not in ("json", "verbose_json"):
        raise UsageError("--words goes with --format json or verbose_json")
    if output and output_dir:
        raise UsageError("give --output or --output-dir, not both")
    if output and len(files) > 1:
        raise UsageError("--output takes one input file; use --output-dir for several")
    if format in SUBTITLES and len(files) > 1 and not output_dir:
        raise UsageError(f"{format} subtitles for several files need --output-dir")
    if files.count("-") > 1:
        raise UsageError("stdin ('-') can be read once")
    if output_dir and len({_stem(path) for path in files}) < len(files):
        raise UsageError("two inputs share a name; --output-dir would write one over the other")
    if output and output != "-":
        check_writable(output, "--output")
    connection = resolve_connection(server, api_key, timeout)
    clips = [_decoded(path, data) for path, data in (_read(path) for path in files)]
    folder = make_folder(output_dir, "--output-dir") if output_dir else None

    engine = engines(ctx).engine(EngineChoice(connection, asr_model=asr_model, model=model))
    transcripts = asyncio.run(_transcribe_all(engine, clips, language, words, at_once=max(1, len(connection.servers))))
    if words and not any(t.words for t in transcripts):
        note("omni: the recogniser gave no word timestamps; writing segments only")
    many = len(files) > 1
    for path, transcript in zip(files, transcripts, strict=True):
        text = render(transcript, format, path if many and not folder else None)
        if folder is not None:
            _write(folder / f"{_stem(path)}.{_suffix(format)}", text)
        elif output and output != "-":
            _write(Path(output), text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()


async def _transcribe_all(engine, clips, language, words, *, at_once: int = 1) -> list:
    """Every clip's transcript, in order; `at_once` clips are heard together (one per server
    when there are several), and the first failure ends it all."""
    import asyncio

    slots = asyncio.Semaphore(at_once)

    async def hear(samples, rate):
        async with slots:
            return await engine.transcribe(samples, rate, language=language, words=words)

    tasks: list = []
    try:
        await engine.check()
        tasks = [asyncio.create_task(hear(samples, rate)) for samples, rate in clips]
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.aclose()


def render(transcript, fmt: str, name: str | None = None) -> str:
    """One transcript in `fmt`; `name` labels it when several files share stdout."""
    from omnicli.protocol.transcription import subtitles, verbose_json

    if fmt == "text":
        return f"{name}: {transcript.text}\n" if name else f"{transcript.text}\n"
    segments = transcript.segments
    if not segments and transcript.text:  # a server that answered text only: one cue, the whole clip
        segments = [{"start": 0.0, "end": transcript.seconds, "text": transcript.text}]
    if fmt in SUBTITLES:
        return subtitles(segments, fmt)
    body: dict = {"text": transcript.text}
    if fmt == "verbose_json" or transcript.words:
        body = verbose_json(transcript.text, transcript.language, transcript.seconds, segments, transcript.words)
    if name:
        body = {"file": name, **body}
    return json.dumps(body, ensure_ascii=False) + "\n"


def _read(path: str) -> tuple[str, bytes]:
    if path == "-":
        return "-", sys.stdin.buffer.read()
    try:
        return path, Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _decoded(path: str, data: bytes):
    from omnicli.audio.formats import decode

    name = "stdin" if path == "-" else path
    try:
        samples, rate = decode(data)
    except ValueError as exc:
        raise UsageError(f"{name} is not a readable audio file") from exc
    if len(samples) == 0:
        raise UsageError(f"{name} holds no audio")
    return samples, rate


def _stem(path: str) -> str:
    return "stdin" if path == "-" else Path(path).stem


def _suffix(fmt: str) -> str:
    return {"text": "txt", "verbose_json": "json"}.get(fmt, fmt)


def _write(path: Path, text: str) -> None:
    from omnicli.audio.atomic import atomic_write

    atomic_write(path, text.encode("utf-8"))
    note(f"wrote {path}")
