"""`omni talk` for the screen tests (test_talk_view_screen.py), started on a pseudo-terminal:

    python talk_screen_runner.py cli SCRIPT ARGS...    the real `omni` app, a scripted engine as ctx.obj
    python talk_screen_runner.py ptt SCRIPT CLIP       `converse` (the terminal half of `omni talk`)
                                                       with a voice that keeps saying CLIP (a WAV, or
                                                       "silence") and a speaker that plays in real time

SCRIPT names one of `SCRIPTS`. A GATE file in the environment (OMNI_TEST_GATE) holds the models'
loading until it exists, so a test can look at the screen while they load.
"""

import asyncio
import os
import sys
from pathlib import Path

import numpy as np

from omnicli.engine.base import AudioDelta, TextDelta, TranscriptDelta
from omnicli.errors import OmniError
from tests.helpers.scripted import Hold, ScriptedEngine, answer, tone

STORY = [TextDelta("Once upon a time, a knight rode out. "), AudioDelta(tone(2.5)), TextDelta("He never came back."), Hold()]
"""An answer that never finishes: whatever is still coming when the user speaks is cut off. Its
first sentence comes with as much audio as a voice takes to say it."""


class Engine(ScriptedEngine):
    async def preload(self) -> None:
        gate = os.environ.get("OMNI_TEST_GATE")
        while gate and not Path(gate).exists():
            await asyncio.sleep(0.05)
        await super().preload()


class Broken(Engine):
    async def preload(self) -> None:
        raise OmniError("the thinker's model file is missing")


def _in_turn(scripts: list) -> object:
    """One script per request, in order; the last one for every request after."""
    return lambda req: scripts.pop(0) if len(scripts) > 1 else scripts[0]


HEARD = "what I said"
"""A turn is heard early (a pause in the voice) or in the answer's stream, as the staged engine hears
it: the same words either way, so the screen does not depend on which came first."""

SCRIPTS = {
    "noon": lambda: Engine(chat=[TranscriptDelta(HEARD), *answer("It is noon.", audio_seconds=2.0)], transcripts=[HEARD]),
    "story": lambda: Engine(chat=_in_turn([[TranscriptDelta(HEARD), *STORY],
                                           [TranscriptDelta(HEARD), *answer("It is noon.", audio_seconds=0.5)]]),
                            transcripts=[HEARD]),
    "story-file": lambda: Engine(chat=_in_turn([[TranscriptDelta("tell me a story"), *STORY],
                                                [TranscriptDelta("what time is it"), *answer("It is noon.", audio_seconds=0.5)]]),
                                 transcripts=["tell me a story", "what time is it"]),
    "broken": lambda: Broken(),
}


def cli(script: str, args: list[str]) -> int:
    import typer

    from omnicli.cli.main import app
    from omnicli.turns.models import TurnModels
    from tests.helpers.cli_harness import ScriptedEngines

    try:  # the real turn-taking models: the screen tests speak with Piper's voice
        code = app(args=args, obj=ScriptedEngines(SCRIPTS[script](), models=TurnModels()), prog_name="omni",
                   standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    return code if isinstance(code, int) else 0


async def ptt(script: str, clip: str) -> int:
    from omnicli.audio.formats import decode
    from omnicli.cli.talk import converse
    from omnicli.talk.client import TalkOptions
    from omnicli.talk.transport import LocalTransport
    from omnicli.talk.view import EventLog
    from omnicli.turns.models import TurnModels
    from tests.helpers.talk_harness import LoopedVoice, PacedSpeaker

    if clip == "silence":
        samples = np.zeros(24000, np.float32)
    else:
        samples, _ = decode(Path(clip).read_bytes())
        samples = np.concatenate([samples, np.zeros(24000, np.float32)])
    models = TurnModels()
    _, code = await converse(LocalTransport(SCRIPTS[script](), models=models), LoopedVoice(samples), PacedSpeaker(),
                             TalkOptions(turns="ptt"), EventLog(None), models)
    return code


if __name__ == "__main__":
    mode, name, *rest = sys.argv[1:]
    sys.exit(cli(name, rest) if mode == "cli" else asyncio.run(ptt(name, rest[0])))
