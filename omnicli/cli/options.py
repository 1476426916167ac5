"""Options several commands share, declared once."""

from typing import Annotated

import typer

ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="URL of an OpenAI-compatible server (omni serve, vLLM-Omni, OpenAI); "
        "default: the in-process engine. Env: OMNI_SERVER.",
        show_default=False,
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="Bearer key for the server. Env: OMNI_API_KEY or OPENAI_API_KEY.",
        show_default=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Model name to ask the server for.", show_default=False),
]
LlmOption = Annotated[
    str | None,
    typer.Option("--llm", help="GGUF model for the in-process thinker.", show_default=False),
]
AsrModelOption = Annotated[
    str | None,
    typer.Option(
        "--asr-model",
        help="Whisper model: tiny.en (default), base, or a CTranslate2 directory.",
        show_default=False,
    ),
]
VoiceOption = Annotated[
    str | None,
    typer.Option("--voice", help="Voice name (or a Piper .onnx path in process).", show_default=False),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help="Seconds to wait for the server's answer (connecting gives up after 5 s). Env: OMNI_TIMEOUT; default 120.",
        show_default=False,
    ),
]
