"""`omni chat`: text, audio and images in; text and speech out. One-shot, piped or interactive."""

import json
import sys
from typing import Annotated

import typer

from omnicli.cli.options import (
    ApiKeyOption,
    AsrModelOption,
    AsrServerOption,
    EngineOption,
    LlmModelOption,
    LlmOption,
    LlmServerOption,
    ModelOption,
    ServerOption,
    StageParamOption,
    ThinkerOption,
    TimeoutOption,
    TtsModelOption,
    TtsServerOption,
    VoiceOption,
)
from omnicli.errors import UsageError

DEFAULT_SYSTEM = "You are a helpful assistant. Answer briefly and clearly."


def chat(
    ctx: typer.Context,
    prompt: Annotated[list[str] | None, typer.Argument(help="The prompt; piped stdin is put before it.", show_default=False)] = None,
    system: Annotated[str | None, typer.Option("--system", "-s", help="System prompt.", show_default=False)] = None,
    attach: Annotated[
        list[str] | None,
        typer.Option("--attach", "-a", help="Attach a file (wav/mp3/flac/ogg audio, png/jpg image); repeatable.", show_default=False),
    ] = None,
    modalities: Annotated[str, typer.Option("--modalities", help="Output modalities: text or text,audio.")] = "text",
    output_audio: Annotated[
        str | None, typer.Option("--output-audio", "-o", help="Write the spoken answer here (implies audio).", show_default=False)
    ] = None,
    format: Annotated[
        str | None, typer.Option("--format", help="Audio format: wav, mp3, flac, opus, pcm (pcm16); default from -o.", show_default=False)
    ] = None,
    voice: VoiceOption = None,
    play: Annotated[bool, typer.Option("--play", help="Hear the answer while it streams (implies audio).")] = False,
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Ask the server for one whole answer.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object (text, audio, usage, timings).")] = False,
    interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Chat turn by turn (the default on a terminal with no prompt).")] = False,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Longest answer, in tokens (default: omni's standard limit).", show_default=False)
    ] = None,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, max=2.0, help="Sampling temperature.")] = 0.7,
    llm: LlmOption = None,
    thinker: ThinkerOption = None,
    engine: EngineOption = None,
    stage_param: StageParamOption = None,
    asr_model: AsrModelOption = None,
    model: ModelOption = None,
    server: ServerOption = None,
    api_key: ApiKeyOption = None,
    timeout: TimeoutOption = None,
    asr_server: AsrServerOption = None,
    llm_server: LlmServerOption = None,
    llm_model: LlmModelOption = None,
    tts_server: TtsServerOption = None,
    tts_model: TtsModelOption = None,
    no_local_stages: Annotated[
        bool, typer.Option("--no-local-stages", help="Refuse, instead of hearing and speaking here, when --server can do neither.")
    ] = False,
) -> None:
    """Chat: omni chat "what is in this clip?" -a clip.wav --modalities text,audio -o answer.mp3"""
    from omnicli.audio.formats import choose_format
    from omnicli.cli.attachments import read_attachment
    from omnicli.cli.chat_session import ChatSession, TurnOutput
    from omnicli.cli.engines import EngineChoice, engines, stage_servers
    from omnicli.cli.files import check_writable, read_stdin_text
    from omnicli.config import resolve_connection
    from omnicli.engine.base import DEFAULT_MAX_TOKENS, Message, TextPart

    wanted = tuple(m.strip() for m in modalities.split(",") if m.strip())
    if not wanted or set(wanted) - {"text", "audio"} or "text" not in wanted:
        raise UsageError(f"--modalities must be 'text' or 'text,audio', got {modalities!r}")
    if output_audio or play:
        wanted = ("text", "audio")
    fmt = choose_format(format, output_audio)
    connection = resolve_connection(server, api_key, timeout)
    if output_audio not in (None, "-"):
        check_writable(output_audio, "-o")
    parts = [read_attachment(path) for path in attach or []]

    # In a REPL, stdin holds the turns; otherwise piped input goes before the prompt (like `llm`).
    piped = "" if interactive or sys.stdin.isatty() else read_stdin_text()
    text = "\n".join(t for t in (piped.strip(), " ".join(prompt or []).strip()) if t)
    if not interactive and not text and not parts:
        if sys.stdin.isatty():
            interactive = True
        else:
            raise UsageError("no prompt (give it as arguments, on stdin, or attach a file)")
    if json_output and output_audio == "-":
        raise UsageError("--json prints to stdout; write the audio to a file with -o PATH")

    servers = stage_servers(asr_server, llm_server, tts_server, llm_model=llm_model, tts_model=tts_model)
    choice = EngineChoice(connection, llm=llm, asr_model=asr_model, chat_stream=not no_stream, stages=servers,
                          local_stages=not no_local_stages, model=model if engine == "vllm-omni" else None,
                          thinker=thinker, engine=engine, stage_params=tuple(stage_param or ()))
    session = ChatSession(
        engines(ctx).engine(choice),
        # Qwen3-Omni speaks only under its own system prompt, which the vllm-omni engine supplies.
        system=system if system is not None else (DEFAULT_SYSTEM if not connection.server and engine != "vllm-omni" else None),
        modalities=wanted,
        voice=voice,
        model=model,
        max_tokens=max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS,
        temperature=temperature,
        output=TurnOutput(path=output_audio, fmt=fmt, play=play, json=json_output),
    )
    if interactive:
        session.repl(first=[*parts, TextPart(text)] if text or parts else None)
    else:
        user = [*parts, TextPart(text)] if text else parts
        result = session.one_shot(Message("user", user))
        if json_output:
            print(json.dumps(result, indent=None))
        if session.failed:  # the text came, the audio file asked for did not (said already)
            raise typer.Exit(1)
