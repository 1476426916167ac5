"""`omni talk`: a spoken conversation, microphone to speaker, over the OpenAI Realtime protocol."""

import sys
from typing import Annotated

import typer

from omnicli.cli.console import note
from omnicli.cli.files import check_writable
from omnicli.cli.options import (
    ApiKeyOption,
    AsrModelOption,
    AsrServerOption,
    LlmModelOption,
    LlmOption,
    LlmServerOption,
    ModelOption,
    ServerOption,
    TtsModelOption,
    TtsServerOption,
    VoiceOption,
)
from omnicli.errors import UsageError


def talk(
    ctx: typer.Context,
    vad: Annotated[
        str | None, typer.Option("--vad", help="Turns by 'client' VAD or 'server' VAD; default: push-to-talk (Enter) on a terminal, client VAD otherwise.", show_default=False)
    ] = None,
    instructions: Annotated[str | None, typer.Option("--instructions", help="System instructions for the assistant.", show_default=False)] = None,
    voice: VoiceOption = None,
    input_device: Annotated[str | None, typer.Option("--input-device", help="Microphone (name or index).", show_default=False)] = None,
    output_device: Annotated[str | None, typer.Option("--output-device", help="Speaker (name or index).", show_default=False)] = None,
    list_devices: Annotated[bool, typer.Option("--list-devices", help="List the audio devices and exit.")] = False,
    echo_gate: Annotated[bool, typer.Option("--echo-gate/--no-echo-gate", help="Mute the mic while the answer plays unless you are clearly louder (off with headphones).")] = True,
    input_file: Annotated[str | None, typer.Option("--input-file", help="Headless: speak this WAV into the session in real time.", show_default=False)] = None,
    output_file: Annotated[str | None, typer.Option("--output-file", help="Headless: write everything the assistant said to this WAV.", show_default=False)] = None,
    transcript: Annotated[str | None, typer.Option("--transcript", help="Write every event as JSON lines here.", show_default=False)] = None,
    llm: LlmOption = None,
    asr_model: AsrModelOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    api_key: ApiKeyOption = None,
    asr_server: AsrServerOption = None,
    llm_server: LlmServerOption = None,
    llm_model: LlmModelOption = None,
    tts_server: TtsServerOption = None,
    tts_model: TtsModelOption = None,
) -> None:
    """Talk: omni talk (Enter starts and ends a turn; speak over the answer to interrupt it)."""
    import asyncio

    from omnicli.config import resolve_connection

    if list_devices:
        from omnicli.audio.devices import device_table, sounddevice

        print(device_table(sounddevice().query_devices()))
        return
    if vad not in (None, "client", "server"):
        raise UsageError(f"--vad must be 'client' or 'server', got {vad!r}")
    turns = vad or ("ptt" if sys.stdin.isatty() and not input_file else "client")
    connection = resolve_connection(server, api_key)
    from omnicli.realtime.talk import TalkOptions

    options = TalkOptions(turns=turns, echo_gate=echo_gate, instructions=instructions, voice=voice, model=model,
                          answer_timeout=connection.timeout if connection.server else None)
    from omnicli.cli.engines import engines, stage_servers

    servers = stage_servers(asr_server, llm_server, tts_server, llm_model=llm_model, tts_model=tts_model)
    code = asyncio.run(_talk(engines(ctx), connection, options, input_file, output_file, transcript,
                             _device(input_device), _device(output_device), llm, asr_model, model, servers))
    raise typer.Exit(code)


def _device(value: str | None):
    return int(value) if value is not None and value.isdigit() else value


async def _talk(factory, connection, options, input_file, output_file, transcript, input_device, output_device,
                llm, asr_model, model, servers) -> int:
    """Everything opened here is closed by one exit stack, also when setup fails half-way."""
    import asyncio
    import contextlib
    import signal

    import numpy as np

    from omnicli.realtime.sources import FileVoice, Microphone
    from omnicli.realtime.speakers import FileSpeaker, Speaker
    from omnicli.realtime.talk import TalkClient
    from omnicli.realtime.view import EventLog, TalkView

    if output_file:
        check_writable(output_file, "--output-file")
    if transcript:
        check_writable(transcript, "--transcript")
    stop = asyncio.Event()
    interrupted = False

    def on_interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        stop.set()

    async with contextlib.AsyncExitStack() as stack:
        log = EventLog(transcript)
        stack.callback(log.close)
        source = FileVoice(input_file) if input_file else Microphone(input_device)
        stack.push_async_callback(source.stop)
        speaker: Speaker
        if output_file:
            speaker = FileSpeaker()
        else:
            from omnicli.audio.player import Player

            speaker = Player(output_device, continuous=True)
        stack.callback(speaker.close)
        from omnicli.cli.engines import EngineChoice

        transport = factory.transport(EngineChoice(connection, llm=llm, asr_model=asr_model, stages=servers), model)
        stack.push_async_callback(transport.close)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
        stack.callback(loop.remove_signal_handler, signal.SIGINT)
        view = stack.enter_context(TalkView())
        client = TalkClient(transport, source, speaker, options, view, log)
        if options.turns == "ptt":
            _read_enter_keys(loop, client, stop)
            note("omni talk: press Enter to start speaking, Enter again to send; q + Enter quits")
        await client.run(stop)
    if output_file:
        from omnicli.audio.atomic import atomic_write
        from omnicli.audio.chunk import SPEECH_RATE
        from omnicli.audio.formats import AudioFormat, encode

        audio = np.concatenate(client.said) if client.said else np.zeros(0, np.float32)
        atomic_write(output_file, encode(audio, SPEECH_RATE, AudioFormat.WAV))
    measured = [t["from_speech_end"] for t in client.turns if t["from_speech_end"] is not None]
    if measured:
        note(f"omni talk: {len(measured)} turns, median {np.median(measured) * 1000:.0f} ms from end of speech to first audio")
    return 130 if interrupted else 0


def _read_enter_keys(loop, client, stop) -> None:
    """Push-to-talk: each Enter toggles a turn; 'q' or end of input quits."""
    import threading

    def read() -> None:
        for line in sys.stdin:
            if line.strip().lower() in ("q", "quit", "exit"):
                break
            loop.call_soon_threadsafe(client.toggle_push_to_talk)
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=read, daemon=True).start()
