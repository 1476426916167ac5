"""`omni serve`: an OpenAI-compatible server over the in-process engine, or vLLM-Omni's own."""

import logging
import os
import sys
from typing import Annotated

import typer

from omnicli.cli.console import note
from omnicli.cli.options import (
    AsrModelOption,
    AsrServerOption,
    LlmModelOption,
    LlmOption,
    LlmServerOption,
    TtsModelOption,
    TtsServerOption,
    VoiceOption,
)
from omnicli.errors import UsageError


def serve(
    ctx: typer.Context,
    extra: Annotated[
        list[str] | None, typer.Argument(help="After '--': arguments passed on to `vllm serve`.", show_default=False)
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind; loopback unless told otherwise.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8091,
    api_key: Annotated[
        str | None, typer.Option("--api-key", help="Require 'Authorization: Bearer KEY'. Env: OMNI_API_KEY.", show_default=False)
    ] = None,
    engine: Annotated[str, typer.Option("--engine", help="'embedded' (CPU, in process) or 'vllm-omni' (GPU).")] = "embedded",
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model for --engine vllm-omni.", show_default=False)] = None,
    llm: LlmOption = None,
    asr_model: AsrModelOption = None,
    voice: VoiceOption = None,
    asr_server: AsrServerOption = None,
    llm_server: LlmServerOption = None,
    llm_model: LlmModelOption = None,
    tts_server: TtsServerOption = None,
    tts_model: TtsModelOption = None,
    max_body_mb: Annotated[float, typer.Option("--max-body-mb", min=0.001, help="Largest request body, in MiB (413 above).")] = 64.0,
) -> None:
    """Serve: /v1/audio/speech, /v1/audio/transcriptions, /v1/chat/completions, /v1/models, /metrics."""
    api_key = api_key or os.environ.get("OMNI_API_KEY")
    if engine == "vllm-omni":
        _hand_off_to_vllm(model, host, port, api_key, extra or [])
        return
    if engine != "embedded":
        raise UsageError(f"--engine must be 'embedded' or 'vllm-omni', got {engine!r}")
    if extra:
        raise UsageError(f"unexpected arguments {' '.join(extra)!r} (extra arguments are for --engine vllm-omni)")

    import uvicorn

    from omnicli.cli.engines import EngineChoice, engines, stage_servers
    from omnicli.config import Connection
    from omnicli.server.app import create_app

    servers = stage_servers(asr_server, llm_server, tts_server, llm_model=llm_model, tts_model=tts_model)
    choice = EngineChoice(Connection(None, None), llm=llm, asr_model=asr_model, voice=voice, stages=servers)
    factory = engines(ctx)
    if servers:  # a stage server that is not there fails here, in one line, before the port opens
        import asyncio

        asyncio.run(_reachable(factory.engine(choice)))
    app = create_app(
        factory.engine(choice),
        api_key=api_key,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    access = logging.getLogger("omni.access")
    access.handlers[:] = [handler]
    access.setLevel(logging.INFO)
    access.propagate = False
    auth = "Bearer key required" if api_key else "no key"
    where = ", ".join(f"{name} at {url}" for name, url in (("ASR", servers.asr), ("LLM", servers.llm), ("TTS", servers.tts)) if url)
    note(f"omni serve: listening on http://{host}:{port} (embedded engine{', ' + where if where else ''}, {auth})")
    # Realtime appends over 15 MiB get an `error` event, not a dropped socket: frames up to
    # 100 MiB reach the session, which enforces the real limits.
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, ws_max_size=100 * 1024 * 1024)


async def _reachable(engine) -> None:
    try:
        await engine.check()
    finally:
        await engine.aclose()


def _hand_off_to_vllm(model: str | None, host: str, port: int, api_key: str | None, extra: list[str]) -> None:
    """vLLM-Omni serves its GPU models with the same API; omni starts it and steps aside."""
    import importlib.util
    import shutil

    if not model:
        raise UsageError("--engine vllm-omni needs --model (e.g. Qwen/Qwen3-Omni-30B-A3B-Instruct)")
    vllm = shutil.which("vllm")
    if importlib.util.find_spec("vllm_omni") is None or vllm is None:
        raise UsageError(
            "vLLM-Omni is not installed here; on a CUDA machine: pip install vllm-omni "
            "(then: omni serve --engine vllm-omni --model MODEL)"
        )
    command = [vllm, "serve", model, "--omni", "--host", host, "--port", str(port)]
    if api_key:
        command += ["--api-key", api_key]
    command += extra
    note("omni serve: handing over to " + " ".join(command))
    sys.stdout.flush()
    os.execv(vllm, command)
