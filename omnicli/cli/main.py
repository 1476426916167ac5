"""The root of the `omni` command: wires sub-commands and maps errors to one line and an exit code.

Exit codes: 0 success, 1 runtime failure, 2 usage error, 130 on Ctrl-C.
Set OMNI_TRACEBACK=1 (or pass -v) to see the traceback behind an error.
"""

import logging
import os
import sys
from typing import Annotated

import typer
from typer.core import TyperGroup

from omnicli import __version__
from omnicli.cli import bench_wer, chat, serve, speak, talk, transcribe


class OmniGroup(TyperGroup):
    """The CLI's one error boundary: whatever a command raises becomes one line and an exit code,
    whether the CLI runs from `main()` or from a test's `CliRunner`."""

    def invoke(self, ctx):
        """Run the command, turning its failures into one line on stderr and an exit code."""
        from omnicli.errors import OmniError

        try:
            return super().invoke(ctx)
        except OmniError as exc:
            if os.environ.get("OMNI_TRACEBACK"):
                raise
            raise typer.Exit(_fail(str(exc), exc.exit_code, exc.hint)) from exc
        except OSError as exc:  # a file or stream the command did not translate itself
            if os.environ.get("OMNI_TRACEBACK"):
                raise
            where = f" ({exc.filename})" if exc.filename else ""
            raise typer.Exit(_fail(f"{exc.strerror or exc}{where}", 1)) from exc
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


app = typer.Typer(
    name="omni",
    cls=OmniGroup,
    help="Speech and omni-modal models from the terminal: speak, chat, talk, transcribe, serve, bench-wer.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich's renderer would slow every start-up
)
app.command(name="speak")(speak.speak)
app.command(name="chat")(chat.chat)
app.command(name="talk")(talk.talk)
app.command(name="serve")(serve.serve)
app.command(name="transcribe")(transcribe.transcribe)
app.command(name="bench-wer")(bench_wer.bench_wer)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"omni {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show details and tracebacks on errors.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Options that apply to every sub-command: verbosity and the version."""
    if verbose:
        os.environ["OMNI_TRACEBACK"] = "1"
    _setup_logging(verbose)


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("omni: %(levelname)s: %(message)s"))
    log = logging.getLogger("omni")
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG if verbose else logging.WARNING)
    log.propagate = False


def _fail(message: str, code: int, hint: str | None = None) -> int:
    """One line on stderr: the error, and what to try in parentheses."""
    line = " ".join(message.split())
    print(f"omni: error: {line}" + (f" ({hint})" if hint else ""), file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; never let a known error escape as a traceback."""
    try:
        result = app(args=argv, prog_name="omni", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except (typer.Exit, typer.Abort) as exc:
        code = getattr(exc, "exit_code", 1)
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:
        # Click's usage errors (bad option, bad value) carry their own exit code and message.
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            command = getattr(getattr(exc, "ctx", None), "command_path", "omni")
            code = _fail(exc.format_message(), exc.exit_code, f"see '{command} --help'")
        else:
            raise
    sys.stdout.flush()
    sys.exit(code)
