"""`omni talk`: a spoken conversation, microphone to speaker, over the OpenAI Realtime protocol.

`_talk` opens what the conversation needs (event log, microphone or file, speaker, session);
`converse` runs it on this terminal: the view, the keys, Ctrl-C, and the summary at the end."""

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
    ThinkerOption,
    TtsModelOption,
    TtsServerOption,
    VoiceOption,
)
from omnicli.errors import UsageError
from omnicli.turns.modes import TurnMode


def talk(
    ctx: typer.Context,
    vad: Annotated[
        str | None, typer.Option("--vad", help="Turns by 'client' VAD, 'smart' (client VAD + Smart Turn: a short pause ends a finished sentence), 'server' VAD (silence) or 'semantic' (the server's semantic_vad: omni serve adds a check that the words read finished); default: push-to-talk (Space) on a terminal, client VAD otherwise.", show_default=False)
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
    thinker: ThinkerOption = None,
    asr_model: AsrModelOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    api_key: ApiKeyOption = None,
    asr_server: AsrServerOption = None,
    llm_server: LlmServerOption = None,
    llm_model: LlmModelOption = None,
    tts_server: TtsServerOption = None,
    tts_model: TtsModelOption = None,
    duplex: Annotated[bool, typer.Option("--duplex", help="Full duplex (vLLM-Omni's /v1/realtime?duplex=1 with --server, else omni's duplex lane in this process): the mic streams all along and the model decides when to speak.")] = False,
    preset: Annotated[str | None, typer.Option("--preset", help="--duplex session shape: 'minicpmo' (16 kHz, needs --ref-audio), 'personaplex' (24 kHz float) or 'default'.", show_default=False)] = None,
    ref_audio: Annotated[str | None, typer.Option("--ref-audio", help="--duplex: a clip of the voice the model speaks in (--preset minicpmo).", show_default=False)] = None,
    image: Annotated[str | None, typer.Option("--image", help="--duplex: a JPEG or PNG the model sees as a still camera, a frame a second (MiniCPM-o reads video; others ignore it).", show_default=False)] = None,
) -> None:
    """Talk: omni talk (Space starts and sends a turn, Esc stops the answer, m mutes, q quits; speak over the answer to interrupt it)."""
    import asyncio

    from omnicli.config import resolve_connection

    if list_devices:
        from omnicli.audio.devices import device_table, sounddevice

        print(device_table(sounddevice().query_devices()))
        return
    turns = TurnMode.chosen(vad) or (TurnMode.PUSH_TO_TALK if sys.stdin.isatty() and not input_file else TurnMode.CLIENT)
    connection = resolve_connection(server, api_key)
    from omnicli.talk.client import TalkOptions

    options: object = TalkOptions(turns=turns, echo_gate=echo_gate, instructions=instructions, voice=voice, model=model,
                                  answer_timeout=connection.timeout if connection.server else None)
    if duplex or preset or ref_audio or image:
        from omnicli.talk.duplex.options import duplex_options

        if image and not connection.server:
            raise UsageError("--image needs --server: the embedded engine cannot see pictures "
                             "(a model that reads video can, e.g. MiniCPM-o 4.5 on vLLM-Omni)")
        options = duplex_options(preset, ref_audio, vad=vad, echo_gate=echo_gate,
                                 instructions=instructions, voice=voice, model=model, image=image)
    from omnicli.cli.engines import engines, stage_servers

    servers = stage_servers(asr_server, llm_server, tts_server, llm_model=llm_model, tts_model=tts_model)
    code = asyncio.run(_talk(engines(ctx), connection, options, input_file, output_file, transcript,
                             _device(input_device), _device(output_device), llm, asr_model, model, servers,
                             thinker=thinker))
    raise typer.Exit(code)


def _device(value: str | None):
    return int(value) if value is not None and value.isdigit() else value


async def _talk(factory, connection, options, input_file, output_file, transcript, input_device, output_device,
                llm, asr_model, model, servers, thinker=None) -> int:
    """Everything opened here is closed by one exit stack, also when setup fails half-way."""
    import contextlib

    import numpy as np

    from omnicli.talk.sources import FileVoice, Microphone
    from omnicli.talk.speakers import FileSpeaker, Speaker
    from omnicli.talk.view import EventLog

    if output_file:
        check_writable(output_file, "--output-file")
    if transcript:
        check_writable(transcript, "--transcript")
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
        from omnicli.talk.duplex.options import DuplexOptions, duplex_if_offered, duplex_link
        models = factory.turn_models()  # one copy, for the talk and its in-process session

        choice = EngineChoice(connection, llm=llm, asr_model=asr_model, stages=servers, thinker=thinker)
        if isinstance(options, DuplexOptions) and connection.server:
            transport = duplex_link(connection, model, log)
        elif isinstance(options, DuplexOptions):  # the duplex lane in this process, on the embedded engine
            from omnicli.talk.duplex.local import local_link

            transport = local_link(factory.engine(choice), model, log.write, models)
        else:
            transport = factory.transport(choice, model, models)
            if connection.server:  # a server whose greeting offers duplex is talked to in duplex
                stack.push_async_callback(transport.close)
                options, transport = await duplex_if_offered(transport, options, connection, model, log, say=note)
        stack.push_async_callback(transport.close)
        said, code = await converse(transport, source, speaker, options, log, models)
    if output_file:
        from omnicli.audio.atomic import atomic_write
        from omnicli.audio.chunk import SPEECH_RATE
        from omnicli.audio.formats import AudioFormat, encode

        audio = np.concatenate(said) if said else np.zeros(0, np.float32)
        atomic_write(output_file, encode(audio, SPEECH_RATE, AudioFormat.WAV))
        if not said and code == 0:
            note(f"omni talk: the answers came as text only, so {output_file} holds no audio")
    return code


async def converse(transport, source, speaker, options, log, models=None) -> tuple[list, int]:
    """The conversation on this terminal: the view, the keys (single keys without echo when
    stdin is a terminal) and Ctrl-C around one talk client (hearing turns with `models`). What the
    assistant said, and the exit code: 0 (q, or the end of a headless file), 130 after Ctrl-C, 143 after SIGTERM."""
    import asyncio
    import contextlib
    import signal

    from omnicli.cli.keys import TerminalKeys
    from omnicli.talk.client import TalkClient
    from omnicli.talk.view import LineView, talk_view

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    codes: list[int] = []

    def end(code: int) -> None:
        codes.append(code)
        stop.set()

    keyboard = sys.stdin.isatty()
    keys = _keys_help(options.turns, keyboard)
    async with contextlib.AsyncExitStack() as stack:
        for number, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            loop.add_signal_handler(number, end, code)
            stack.callback(loop.remove_signal_handler, number)
        if keyboard:  # before the panel: a key pressed while it loads must not be echoed under it
            stack.enter_context(TerminalKeys(loop, lambda action: on_key(action)))
        view = stack.enter_context(talk_view(keys))
        from omnicli.talk.duplex.client import DuplexTalkClient
        from omnicli.talk.duplex.options import DuplexOptions

        client: TalkClient | DuplexTalkClient
        if isinstance(options, DuplexOptions):
            client = DuplexTalkClient(transport, source, speaker, options, view, log, models)
        else:
            client = TalkClient(transport, source, speaker, options, view, log, models)

        def on_key(action: str) -> None:
            if action == "talk":
                client.toggle_push_to_talk()
            elif action == "mute":
                client.toggle_mute()
            elif action == "interrupt":
                client.stop_answer()
            else:
                end(0)

        if keyboard and isinstance(view, LineView):
            note(f"omni talk: {keys}")
        await client.run(stop)
    if (summary := client.state.summary()) is not None:
        note(f"omni talk: {summary}")
    return client.said, codes[0] if codes else 0


def _keys_help(turns: TurnMode, keyboard: bool) -> str:
    if not keyboard:
        return "Ctrl-C quits"
    return "Space talk · Esc interrupt · m mute · q quit" if turns == TurnMode.PUSH_TO_TALK else "Esc interrupt · m mute · q quit"
