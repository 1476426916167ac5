"""`omni speak`: text to speech, to a file, stdout or the speaker."""

import base64
import contextlib
import mimetypes
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from omnicli.cli.console import note, stderr
from omnicli.cli.options import ApiKeyOption, ModelOption, ServerOption, TimeoutOption, VoiceOption
from omnicli.errors import UsageError

if TYPE_CHECKING:
    from omnicli.cli.progress import Bar

_PROGRESS_MIN_SENTENCES = 4
DEFAULT_MAX_CHARS = 4096
"""OpenAI's limit on one speech request's input, and omni serve's."""
MIN_RATE, MAX_RATE = 8000, 192000
"""Rates a written file may have: telephone to studio; a format may allow fewer (opus, mp3)."""


def speak(
    ctx: typer.Context,
    text: Annotated[
        list[str] | None, typer.Argument(help="Text to speak; '-' or piped input reads stdin.", show_default=False)
    ] = None,
    file: Annotated[
        str | None, typer.Option("--file", "-f", help="Read the text from a file ('-' for stdin).", show_default=False)
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o",
            help="Write audio here ('-' for stdout). Default: play on a terminal, stdout when piped.",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        str | None,
        typer.Option("--format", help="wav, mp3, flac, opus or pcm (PCM16 mono); default: from -o's suffix, else wav.", show_default=False),
    ] = None,
    voice: VoiceOption = None,
    list_voices: Annotated[bool, typer.Option("--list-voices", help="List the voices and exit.")] = False,
    speed: Annotated[float, typer.Option("--speed", min=0.25, max=4.0, help="Tempo, 0.25 to 4.0; pitch stays.")] = 1.0,
    instructions: Annotated[str | None, typer.Option("--instructions", help="Style instructions, for models that take them.", show_default=False)] = None,
    language: Annotated[str | None, typer.Option("--language", help="Language of the text, for models that take it.", show_default=False)] = None,
    ref_audio: Annotated[str | None, typer.Option("--ref-audio", help="Reference clip to clone a voice from (server models that can).", show_default=False)] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="Transcript of --ref-audio.", show_default=False)] = None,
    model: ModelOption = None,
    sample_rate: Annotated[int, typer.Option("--sample-rate", min=MIN_RATE, max=MAX_RATE, help="Sample rate of the written audio.")] = 24000,
    play: Annotated[bool, typer.Option("--play", help="Play through the default output device as it is made.")] = False,
    stream: Annotated[bool, typer.Option("--stream", help="Use the server's streaming response.")] = False,
    stream_format: Annotated[
        str, typer.Option("--stream-format", help="Streaming kind: 'sse' (speech.audio.delta events) or 'audio' (raw bytes).")
    ] = "sse",
    max_chars: Annotated[
        int, typer.Option("--max-chars", min=1, help="Longest text one request to a server carries (OpenAI's limit by default); longer text goes as several, cut between paragraphs or sentences.")
    ] = DEFAULT_MAX_CHARS,
    server: ServerOption = None,
    api_key: ApiKeyOption = None,
    timeout: TimeoutOption = None,
) -> None:
    """Speak text: omni speak "Hello" -o hello.mp3"""
    import asyncio

    from omnicli.audio.formats import check_rate, choose_format
    from omnicli.cli.engines import EngineChoice, engines
    from omnicli.cli.files import check_writable
    from omnicli.config import resolve_connection
    from omnicli.engine.base import SpeechRequest

    connection = resolve_connection(server, api_key, timeout)
    factory = engines(ctx)
    if list_voices:
        asyncio.run(_print_voices(factory.engine(EngineChoice(connection))))
        return
    if stream_format not in ("sse", "audio"):
        raise UsageError(f"--stream-format must be 'sse' or 'audio', got {stream_format!r}")
    if output is None and not play and not sys.stdout.isatty():
        output = "-"
    fmt = choose_format(format, output)
    check_rate(fmt, sample_rate)
    if ref_text and not ref_audio:
        raise UsageError("--ref-text needs --ref-audio")
    if output not in (None, "-"):
        check_writable(output, "-o")
    request = SpeechRequest(
        text=_read_text(text, file),
        voice=voice,
        speed=speed,
        instructions=instructions,
        language=language,
        model=model,
        ref_audio=_data_uri(ref_audio) if ref_audio else None,
        ref_text=ref_text,
    )
    play = play or output is None
    from omnicli.audio.sink import SpeechOutput

    sink = SpeechOutput(output=output, fmt=fmt, rate=sample_rate, play=play)
    if connection.server:  # a server caps each request; in process, the engine cuts sentences itself
        from omnicli.client.long_text import requests_for

        requests = requests_for(request, max_chars)
    else:
        requests = [request]
    engine = factory.engine(EngineChoice(connection, speech_stream=stream_format if stream else None))
    seconds = asyncio.run(_synthesize(engine, requests, sink, per_piece=bool(connection.server)))
    if output not in (None, "-"):
        note(f"wrote {output} ({seconds:.1f} s, {fmt.value}, {sample_rate} Hz)")


async def _synthesize(engine, requests, sink, *, per_piece: bool) -> float:
    """Speak every request in order into `sink`. The progress bar moves per piece for a server
    (`per_piece`: one request each) and per sentence in process (chunks carry their text); when
    the sink plays, it follows playback to its end and a line says what was played."""
    from omnicli.client.long_text import speak_ahead

    try:
        await sink.open()
        player = sink.player
        with _progress(requests, player) as bar:
            finished = (lambda request: bar.spoken(len(request.text))) if per_piece else (lambda request: None)
            chunks = speak_ahead(engine, requests, finished=finished)
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    await sink.write(chunk)
                    bar.made(len(chunk.samples) / chunk.rate)
                    if not per_piece:
                        bar.spoken(len(chunk.text or ""))
            bar.synthesized()
            seconds = await sink.finish()
        if player is not None:
            note(_played_line(seconds, requests, player.underruns))
        return seconds
    finally:
        sink.abort()
        await engine.aclose()


def _played_line(seconds: float, requests, underruns: int) -> str:
    """`played 61.2 s of audio (12 sentences)`, and the dropouts when there were any."""
    from omnicli.engine.sentences import split_sentences

    sentences = len(split_sentences(" ".join(r.text for r in requests)))
    line = f"played {seconds:.1f} s of audio ({_count(sentences, 'sentence')})"
    if underruns:
        line += f", with {_count(underruns, 'dropout')} where the machine fell behind"
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


@contextlib.contextmanager
def _progress(requests, player) -> Iterator["Bar"]:
    """A bar on a terminal: playback when `player` plays, else synthesis of a long text."""
    from omnicli.cli.progress import Bar, playback_bar, synthesis_bar
    from omnicli.engine.sentences import split_sentences

    characters = sum(len(r.text) for r in requests)
    if not sys.stderr.isatty():
        yield Bar()
    elif player is not None:
        with playback_bar(stderr(), player, characters) as bar:
            yield bar
    elif len(requests) == 1 and len(split_sentences(requests[0].text)) < _PROGRESS_MIN_SENTENCES:
        yield Bar()
    else:
        with synthesis_bar(stderr(), characters) as bar:
            yield bar


async def _print_voices(engine) -> None:
    """One line per voice: name, language, gender, quality, description, and OpenAI's names it speaks."""
    from omnicli.engine.voices import openai_names_for

    try:
        voices = await engine.voices()
    finally:
        await engine.aclose()
    for voice in voices:
        openai = ", ".join(openai_names_for(voice, voices))
        fields = (voice.name, voice.language or "-", voice.gender or "-", voice.quality or "-", voice.description,
                  f"OpenAI: {openai}" if openai else "")
        print("\t".join(fields).rstrip())


def _read_text(words: list[str] | None, file: str | None) -> str:
    if words and file:
        raise UsageError("give the text as arguments or with --file, not both")
    if file == "-" or words == ["-"] or (not words and not file and not sys.stdin.isatty()):
        from omnicli.cli.files import read_stdin_text

        text = read_stdin_text()
    elif file:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from exc
    else:
        text = " ".join(words or [])
    if not text.strip():
        raise UsageError("no text to speak (give it as arguments, with --file, or on stdin)")
    return text.strip()


def _data_uri(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read --ref-audio {path}: {exc.strerror or exc}") from exc
    mime = mimetypes.guess_type(path)[0] or "audio/wav"
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"
