"""The one output sink: data goes to stdout, everything a person reads goes to stderr.

rich is imported on first use, not at start-up, so `omni --help` stays fast.
"""

import functools
import sys


@functools.cache
def stderr():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def note(message: str) -> None:
    print(message, file=sys.stderr)
