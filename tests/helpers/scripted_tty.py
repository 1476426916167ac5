"""The real `omni` Typer app on a pseudo-terminal (pty_screen.Terminal) over a scripted engine,
the way cli_harness runs it in process: a child process builds the engine from a line of Python
and hands it to the app through `obj`. `gate(path)` and `until_typed` are script steps that hold
an answer until the test says so. Nothing here measures or asserts time."""

import os
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.helpers.pty_screen import SAFETY_S, Terminal

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import sys
sys.path[:0] = {paths!r}
from tests.helpers.cli_harness import ScriptedEngines
from omnicli.engine.base import *
from tests.helpers.scripted import *
from tests.helpers.scripted_tty import gate, until_typed
from omnicli.cli.main import app
app(args={args!r}, prog_name="omni", obj=ScriptedEngines({engine}))
"""


def scripted_omni(*args: str, engine: str = "ScriptedEngine()", cols: int = 80, rows: int = 24) -> Terminal:
    """`omni ARGS` over the scripted engine `engine` (Python, with scripted.py's and
    engine.base's names in scope), in cli_harness's clean environment."""
    from tests.helpers.cli_harness import CLEAN_ENV

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PYTHONPATH")}
    env.update({k: v for k, v in CLEAN_ENV.items() if v is not None}, TERM="xterm-256color")
    for key in (k for k, v in CLEAN_ENV.items() if v is None):
        env.pop(key, None)
    code = _CHILD.format(paths=[str(ROOT)], args=list(args), engine=engine)
    return Terminal([sys.executable, "-c", code], env, rows=rows, cols=cols)


def gate(path: str) -> Callable[[], None]:
    """A script step that holds the answer until the file `path` exists."""

    def wait() -> None:
        deadline = time.monotonic() + SAFETY_S
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"gate {path} never opened")
            time.sleep(0.01)

    return wait


def until_typed() -> None:
    """A script step that holds the answer until something is typed on the terminal (stdin is
    readable): keys typed mid-answer have surely reached the line discipline by then."""
    if not select.select([sys.stdin], [], [], SAFETY_S)[0]:
        raise RuntimeError("nothing was typed")
