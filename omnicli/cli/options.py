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
