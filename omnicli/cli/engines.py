"""The one place commands get what they drive: an engine (in process, a server, or stages spread
over both), the realtime transport to a session for talk, and the judge that hears bench-wer's audio.

Commands take an `Engines` from Typer's context (`ctx.obj`); `main()` passes none, so the
defaults below apply. A test hands the CLI another engine with
`CliRunner().invoke(app, args, obj=MyEngines())`, never by patching globals; a test that wants
the real factory against a fake server sets `http` to an `httpx.MockTransport`.
"""

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import typer

from omnicli.config import Connection
from omnicli.engine.base import Engine
from omnicli.errors import UsageError

if TYPE_CHECKING:
    from omnicli.bench.naturalness import NaturalnessJudge
    from omnicli.bench.runner import Judge
    from omnicli.bench.similarity import SimilarityJudge
    from omnicli.client.pool import ServerPool
    from omnicli.client.remote import RemoteEngine
    from omnicli.engine.stages import Stages, ThinkerStage
    from omnicli.turns.models import TurnModels


@dataclass(frozen=True)
class StageServers:
    """Where the staged engine's stages run: a server URL each, or None (in this process)."""

    asr: str | None = None
    llm: str | None = None
    tts: str | None = None
    llm_model: str | None = None
    """What to ask --llm-server for (default: its first listed model)."""
    tts_model: str | None = None

    def __bool__(self) -> bool:
        return bool(self.asr or self.llm or self.tts)


def stage_servers(asr: str | None = None, llm: str | None = None, tts: str | None = None, *,
                  llm_model: str | None = None, tts_model: str | None = None) -> StageServers:
    """The stage flags, each URL checked (a bad one is a usage error naming its flag)."""
    from omnicli.config import server_url

    return StageServers(
        asr=server_url(asr, "--asr-server") if asr else None,
        llm=server_url(llm, "--llm-server") if llm else None,
        tts=server_url(tts, "--tts-server") if tts else None,
        llm_model=llm_model, tts_model=tts_model,
    )


@dataclass(frozen=True)
class EngineChoice:
    """What the command line chose: a server, or the in-process models to load, or a mix."""

    connection: Connection
    llm: str | None = None
    asr_model: str | None = None
    """Whisper in process; with --asr-server, the model to ask it for."""
    voice: str | None = None
    speech_stream: str | None = None
    """To a server: None (one whole answer), "sse" or "audio" (streamed speech)."""
    chat_stream: bool = True
    model: str | None = None
    """The model to ask --server for when a request names none."""
    stages: StageServers = field(default_factory=StageServers)
    local_stages: bool | None = None
    """Chat against a --server that neither hears nor speaks: hear and speak here (True) or
    refuse (False); None: use the server as it is."""
    thinker: str | None = None
    """How the in-process thinker runs: "llama" (llama.cpp; None means it) or "vllm"."""
    engine: str | None = None
    """The in-process engine: "embedded" (the stages; None means it) or "vllm-omni" (`model`)."""
    stage_params: tuple[str, ...] = ()
    """--stage-param flags for --engine vllm-omni: STAGE.FIELD=VALUE each."""


THINKERS = ("llama", "vllm")
ENGINES = ("embedded", "vllm-omni")


def check_runtime(choice: EngineChoice) -> None:
    """Refuse a --thinker or --engine that cannot apply, in one line, before any work."""
    if choice.thinker not in (None, *THINKERS):
        raise UsageError(f"--thinker must be one of {', '.join(THINKERS)}, got {choice.thinker!r}")
    if choice.engine not in (None, *ENGINES):
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {choice.engine!r}")
    elsewhere = "--server" if choice.connection.server else "--llm-server" if choice.stages.llm else None
    if choice.thinker == "vllm" and elsewhere:
        raise UsageError(f"--thinker vllm runs the thinker in this process; {elsewhere} thinks elsewhere: use one or the other")
    if choice.thinker == "vllm":
        from omnicli.engine.vllm_thinker import require_vllm

        require_vllm()
    if choice.engine == "vllm-omni":
        if choice.connection.server or choice.stages:
            raise UsageError("--engine vllm-omni runs the whole model in this process; drop --server and the stage servers")
        if choice.thinker == "vllm":
            raise UsageError("--engine vllm-omni brings its own thinker; --thinker is for the embedded engine")
        if not choice.model:
            raise UsageError("--engine vllm-omni needs --model (e.g. Qwen/Qwen3-Omni-30B-A3B-Instruct or "
                             "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice)")
        from omnicli.engine.vllm_omni import require_vllm_omni, stage_params

        stage_params(list(choice.stage_params))  # a malformed flag fails here, before any work
        require_vllm_omni()
    elif choice.stage_params:
        raise UsageError("--stage-param sets the sampling of vLLM-Omni's stages: it needs --engine vllm-omni")


class Engines:
    """Builds engines for the commands; subclass it to hand them something else."""

    http: Any = None
    """An httpx transport every server connection uses (tests: `httpx.MockTransport`)."""

    def turn_models(self) -> "TurnModels":
        """The turn-taking models (Silero, Smart Turn, the words check) for the process, each loaded on first use."""
        from omnicli.turns.models import TurnModels

        return TurnModels()

    def engine(self, choice: EngineChoice) -> Engine:
        """The engine a command's options choose: in process, on servers, or stages split between them."""
        check_runtime(choice)
        if choice.engine == "vllm-omni":
            return self.vllm_omni(choice)
        connection = choice.connection
        if connection.server:
            if choice.stages:
                raise UsageError("--server hands the whole answer to one server; --asr-server, --llm-server and "
                                 "--tts-server place stages of the in-process engine: use one or the other")
            options = {"model": choice.model, "stream": choice.speech_stream, "chat_stream": choice.chat_stream}
            server: RemoteEngine | ServerPool = (self.remote(connection, connection.server, **options)
                                                 if len(connection.servers) == 1 else self.pool(connection, **options))
            if choice.local_stages is None:
                return server
            return self._around(server, choice)
        if not choice.stages:
            from omnicli.engine.staged import StagedEngine

            return StagedEngine(self.local_stages(choice))
        return self._staged(choice)

    def local_stages(self, choice: EngineChoice) -> "Stages":
        """The in-process stages (loaded on first use, so the ones a server replaces never are)."""
        from omnicli.engine.staged import embedded_stages

        stages = embedded_stages(llm=choice.llm, asr_model=choice.asr_model, voice=choice.voice)
        if choice.thinker == "vllm":
            stages = replace(stages, thinker=self.vllm_thinker(choice.llm))
        return stages

    def vllm_thinker(self, llm: str | None) -> "ThinkerStage":
        """vLLM as the thinker stage: one engine for every request of this process."""
        from omnicli.engine.vllm_thinker import VllmThinker, require_vllm

        require_vllm()
        return VllmThinker(llm)

    def vllm_omni(self, choice: EngineChoice) -> Engine:
        """vLLM-Omni's AsyncOmni running `choice.model` in this process (CUDA GPUs only)."""
        from omnicli.engine.vllm_omni import VllmOmniEngine, require_vllm_omni, stage_params

        assert choice.model is not None
        require_vllm_omni()
        return VllmOmniEngine(choice.model, stage_overrides=stage_params(list(choice.stage_params)))

    def remote(self, connection: Connection, url: str, **options) -> "RemoteEngine":
        """A client for the server at `url`, with the connection's key and timeout."""
        from omnicli.client.remote import RemoteEngine

        return RemoteEngine(url, connection.api_key, timeout=connection.timeout, transport=self.http, **options)

    def pool(self, connection: Connection, **options) -> "ServerPool":
        """Clients for every server of `connection`, as one engine that spreads requests over
        them; skipped servers are one warning line each on stderr."""
        from omnicli.cli.console import note
        from omnicli.client.pool import ServerPool

        return ServerPool([self.remote(connection, url, **options) for url in connection.servers], say=note)

    def _staged(self, choice: EngineChoice) -> Engine:
        from omnicli.client.stages import HybridEngine, RemoteASR, RemoteStage, RemoteTalker, RemoteThinker

        servers, connection = choice.stages, choice.connection
        stages = self.local_stages(choice)
        remote: list[RemoteStage] = []
        if servers.asr:
            asr = RemoteASR(self.remote(connection, servers.asr, model=choice.asr_model))
            stages = replace(stages, asr=asr)
            remote.append(asr)
        if servers.llm:
            thinker = RemoteThinker(self.remote(connection, servers.llm, model=servers.llm_model))
            stages = replace(stages, thinker=thinker)
            remote.append(thinker)
        if servers.tts:
            talker = RemoteTalker(self.remote(connection, servers.tts), model=servers.tts_model, default_voice=choice.voice)
            stages = replace(stages, talker=talker)
            remote.append(talker)
        return HybridEngine(stages, remote)

    def _around(self, server: "RemoteEngine | ServerPool", choice: EngineChoice) -> Engine:
        from omnicli.cli.console import note
        from omnicli.client.pool import ServerPool
        from omnicli.client.stages import ServerAsThinker, has_audio_routes

        connection = choice.connection

        async def probe() -> bool | None:
            if isinstance(server, ServerPool):
                await server.check()  # replicas alike: the first one up is asked
            return await has_audio_routes(server.base_url, connection.api_key, timeout=connection.timeout,
                                          transport=self.http)

        return ServerAsThinker(server, lambda: self.local_stages(choice), probe=probe,
                               allowed=bool(choice.local_stages), say=note)

    def transport(self, choice: EngineChoice, model: str | None, models: "TurnModels | None" = None):
        """A realtime session: over a WebSocket to the server, or in this process on the engine
        (hearing turns with `models`, the talk's own)."""
        check_runtime(choice)
        if choice.connection.server:
            if choice.stages:
                raise UsageError("--server talks to a whole realtime server; --asr-server, --llm-server and "
                                 "--tts-server place stages of the in-process session: use one or the other")
            connection = choice.connection
            if len(connection.servers) > 1:  # a session stays where it starts: on the first server up
                from omnicli.cli.console import note
                from omnicli.client.one_server import FirstServerTransport

                servers = [self.remote(connection, url) for url in connection.servers]
                return FirstServerTransport(servers, connection.api_key, model, say=note)
            from omnicli.talk.transport import WebSocketTransport

            return WebSocketTransport(connection.servers[0], connection.api_key, model)
        from omnicli.talk.transport import LocalTransport

        return LocalTransport(self.engine(choice), models=models)

    def judge(self, asr_model: str | None, device: str, server: Connection | None = None) -> "Judge":
        """What hears bench-wer's audio: Whisper in this process (standard decoding), or the
        `/v1/audio/transcriptions` of `server` (--asr-server), asked for `asr_model`."""
        if server is not None and server.server:
            from omnicli.client.stages import RemoteASR

            return RemoteASR(self.remote(server, server.server, model=asr_model))
        from omnicli.engine.asr import LocalASR

        return LocalASR(asr_model, device=device)

    def naturalness(self) -> "NaturalnessJudge":
        """What predicts bench-wer's MOS (--mos): DNSMOS in this process."""
        from omnicli.bench.naturalness import DnsMos

        DnsMos.check()
        return DnsMos()

    def speaker_similarity(self) -> "SimilarityJudge":
        """What compares bench-wer's clips with their prompts (--sim): d-vectors in this process."""
        from omnicli.bench.similarity import DVectorSimilarity

        DVectorSimilarity.check()
        return DVectorSimilarity()

    async def release(self, judge: "Judge") -> None:
        """Close the connection of a judge made here on a server."""
        from omnicli.client.stages import RemoteStage

        if isinstance(judge, RemoteStage):
            await judge.aclose()


def engines(ctx: typer.Context) -> Engines:
    """The factory this invocation uses: the one a caller passed as `obj`, else the default."""
    return ctx.obj if isinstance(ctx.obj, Engines) else Engines()
