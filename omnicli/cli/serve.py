"""`omni serve`: an OpenAI-compatible server over the in-process engine."""

from typing import Annotated

import typer

from omnicli.cli.console import note


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind; loopback unless told otherwise.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8091,
) -> None:
    """Serve the embedded engine over HTTP: /v1/audio/speech, /v1/audio/voices, /v1/models."""
    import uvicorn

    from omnicli.engine.embedded import EmbeddedEngine
    from omnicli.server.app import create_app

    app = create_app(EmbeddedEngine())
    note(f"omni serve: listening on http://{host}:{port}")
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
