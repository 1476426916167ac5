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
    StageParamOption,
    ThinkerOption,
    TtsModelOption,
    TtsServerOption,
    VoiceOption,
)
from omnicli.errors import UsageError


def serve(
    ctx: typer.Context,
    extra: Annotated[
        list[str] | None, typer.Argument(help="After '--': arguments passed on to `vllm serve` (--engine vllm-serve).", show_default=False)
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind; loopback unless told otherwise.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8091,
    api_key: Annotated[
        str | None, typer.Option("--api-key", help="Require 'Authorization: Bearer KEY'. Env: OMNI_API_KEY.", show_default=False)
    ] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="'embedded' (CPU, in process), 'vllm-omni' (vLLM-Omni's AsyncOmni in process; GPU) or "
        "'vllm-serve' (hand over to `vllm serve MODEL --omni`; GPU).")] = "embedded",
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model for --engine vllm-omni or vllm-serve.", show_default=False)] = None,
    stage_param: StageParamOption = None,
    llm: LlmOption = None,
    thinker: ThinkerOption = None,
    asr_model: AsrModelOption = None,
    voice: VoiceOption = None,
    asr_server: AsrServerOption = None,
    llm_server: LlmServerOption = None,
    llm_model: LlmModelOption = None,
    tts_server: TtsServerOption = None,
    tts_model: TtsModelOption = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", min=0.001, help="Seconds to wait for a stage server's answer (--asr/--llm/--tts-server); "
        "past it the client gets 504. Env: OMNI_TIMEOUT; default 120.", show_default=False)] = None,
    max_body_mb: Annotated[float, typer.Option("--max-body-mb", min=0.001, help="Largest request body, in MiB (413 above).")] = 64.0,
    max_duplex_sessions: Annotated[int, typer.Option(
        "--max-duplex-sessions", min=0, help="Duplex sessions (/v1/realtime?duplex=1) at once; more are refused (duplex_session_busy).")] = 4,
    max_realtime_sessions: Annotated[int | None, typer.Option(
        "--max-realtime-sessions", min=0, help="Turn-based realtime sessions (/v1/realtime) at once; more are refused "
        "(realtime_session_busy, close 1013). Default: two a core.", show_default=False)] = None,
    duplex_grace_s: Annotated[float, typer.Option(
        "--duplex-grace-s", min=0.0, help="How long a duplex session whose socket dropped waits for session.resume.")] = 30.0,
) -> None:
    """Serve: /v1/audio/speech, /v1/audio/transcriptions, /v1/chat/completions, /v1/models, /metrics."""
    api_key = api_key or os.environ.get("OMNI_API_KEY")
    if engine == "vllm-serve":
        _hand_off_to_vllm(model, host, port, api_key, extra or [])
        return
    if engine not in ("embedded", "vllm-omni"):
        raise UsageError(f"--engine must be 'embedded', 'vllm-omni' or 'vllm-serve', got {engine!r}")
    if extra:
        raise UsageError(f"unexpected arguments {' '.join(extra)!r} (extra arguments are for --engine vllm-serve)")

    import uvicorn

    from omnicli.cli.engines import EngineChoice, engines, stage_servers
    from omnicli.config import Connection, resolve_timeout
    from omnicli.server.app import create_app

    servers = stage_servers(asr_server, llm_server, tts_server, llm_model=llm_model, tts_model=tts_model)
    choice = EngineChoice(Connection(None, None, timeout=resolve_timeout(timeout)), llm=llm, asr_model=asr_model, voice=voice, stages=servers,
                          thinker=thinker, engine=engine, model=model, stage_params=tuple(stage_param or ()))
    factory = engines(ctx)
    if servers:  # a stage server that is not there fails here, in one line, before the port opens
        import asyncio

        asyncio.run(_reachable(factory.engine(choice)))
    listener = _listen(host, port)  # the port is ours before any model loads (vLLM's start-up takes free ports too)
    port = listener.getsockname()[1]  # --port 0: the one the system chose
    app = create_app(
        factory.engine(choice),
        api_key=api_key,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        max_duplex_sessions=max_duplex_sessions,
        max_realtime_sessions=max_realtime_sessions,
        duplex_grace_s=duplex_grace_s,
        turn_models=factory.turn_models(),
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    access = logging.getLogger("omni.access")
    access.handlers[:] = [handler]
    access.setLevel(logging.INFO)
    access.propagate = False
    auth = "Bearer key required" if api_key else "no key"
    where = ", ".join(f"{name} at {url}" for name, url in (("ASR", servers.asr), ("LLM", servers.llm), ("TTS", servers.tts)) if url)
    runs = f"{engine} engine" + (", vLLM thinker" if thinker == "vllm" else "")
    note(f"omni serve: listening on http://{host}:{port} ({runs}{', ' + where if where else ''}, {auth})")
    # Realtime appends over 15 MiB get an `error` event, not a dropped socket: frames up to
    # 100 MiB reach the session, which enforces the real limits.
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, ws_max_size=100 * 1024 * 1024)
    uvicorn.Server(config).run(sockets=[listener])


def _listen(host: str, port: int):
    """A bound socket for uvicorn: a port in use is one line here, not a failure after the models load."""
    import socket

    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise UsageError(f"--host {host!r}: {exc.strerror}") from exc
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as exc:
        listener.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", hint="choose another --port") from exc
    return listener


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
        raise UsageError("--engine vllm-serve needs --model (e.g. Qwen/Qwen3-Omni-30B-A3B-Instruct)")
    vllm = shutil.which("vllm")
    if importlib.util.find_spec("vllm_omni") is None or vllm is None:
        raise UsageError(
            "vLLM-Omni is not installed here; on a CUDA machine: pip install vllm-omni "
            "(then: omni serve --engine vllm-serve --model MODEL)"
        )
    from omnicli.engine.vllm_omni import require_vllm_omni

    require_vllm_omni("--engine vllm-serve")  # installed, but no GPU (a CPU build of vLLM): one line, not vLLM's traceback
    command = [vllm, "serve", model, "--omni", "--host", host, "--port", str(port)]
    if api_key:
        command += ["--api-key", api_key]
    command += extra
    note("omni serve: handing over to " + " ".join(command))
    sys.stdout.flush()
    os.execv(vllm, command)
