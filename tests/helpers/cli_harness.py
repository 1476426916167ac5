"""The real `omni` Typer app under `CliRunner`, handed a scripted engine through `ctx.obj`
(the `Engines` seam), with the config file pointed at a missing path and no server settings
from the environment, so only what a test passes counts."""

from pathlib import Path

from typer.testing import CliRunner, Result

from omnicli.cli.engines import EngineChoice, Engines
from omnicli.cli.main import app
from omnicli.turns.models import TurnModels
from tests.helpers.models import TURN_MODELS
from tests.helpers.scripted import ScriptedEngine

CLEAN_ENV = {
    "OMNI_CONFIG": "/nonexistent/omni/config.toml",
    "OMNI_SERVER": None, "OMNI_API_KEY": None, "OPENAI_API_KEY": None, "OPENAI_BASE_URL": None,
    "OMNI_TIMEOUT": None, "OMNI_TRACEBACK": None,
}


class LengthMos:
    """A naturalness judge whose MOS is 1 + the clip's seconds, so a test knows every figure."""

    name = "MOS by length"

    async def preload(self) -> None:
        """Nothing to load."""

    async def rate(self, samples, rate: int) -> dict[str, float]:
        """1 + seconds as `mos`, 1.0 as `mos_ovrl`."""
        return {"mos": 1 + len(samples) / rate, "mos_ovrl": 1.0}


class LengthSimilarity:
    """A similarity judge that compares durations (the shorter over the longer), so a test knows every figure."""

    name = "similarity by length"

    async def preload(self) -> None:
        """Nothing to load."""

    async def similarity(self, prompt: Path, samples, rate: int) -> float:
        """The shorter of the prompt and the clip over the longer."""
        import soundfile

        prompt_seconds, clip_seconds = soundfile.info(str(prompt)).duration, len(samples) / rate
        return min(prompt_seconds, clip_seconds) / max(prompt_seconds, clip_seconds)


class StandInModels(Engines):
    """The real engines, with the stand-in turn-taking models (which load nothing)."""

    def turn_models(self) -> TurnModels:
        """The stand-in turn-taking models of tests/helpers/models.py."""
        return TURN_MODELS


class ScriptedEngines(StandInModels):
    """Hands every command the same scripted engine (and judge) and turn-taking models (the
    stand-ins unless given others); records what was chosen."""

    def __init__(self, engine: ScriptedEngine | None = None, judge: ScriptedEngine | None = None,
                 models: TurnModels | None = None) -> None:
        self.scripted = engine or ScriptedEngine()
        self.scripted_judge = judge or ScriptedEngine()
        self.models = models or TURN_MODELS
        self.choices: list[EngineChoice] = []

    def turn_models(self) -> TurnModels:
        """The models given, else the stand-ins."""
        return self.models

    def engine(self, choice: EngineChoice) -> ScriptedEngine:
        self.choices.append(choice)
        return self.scripted

    def judge(self, asr_model: str | None, device: str, server=None):
        """The scripted judge; a judge on a server (--asr-server) is the real one, over `http`."""
        return self.scripted_judge if server is None else super().judge(asr_model, device, server)

    def naturalness(self) -> LengthMos:
        """The MOS judge whose figures a test can tell in advance."""
        return LengthMos()

    def speaker_similarity(self) -> LengthSimilarity:
        """The similarity judge whose figures a test can tell in advance."""
        return LengthSimilarity()


def omni(*args: str | Path, engines: Engines | None = None, input: bytes | str | None = None,
         env: dict | None = None) -> Result:
    """Run `omni ARGS` in process; stdout and stderr come back apart (result.stdout/.stderr). Without
    `engines`, the real ones with the stand-in turn-taking models."""
    return CliRunner().invoke(app, [str(a) for a in args], obj=engines or StandInModels(), input=input,
                              env={**CLEAN_ENV, **(env or {})}, catch_exceptions=False)
