"""One hierarchy for every failure a user can cause or meet.

Third-party exceptions (httpx, soundfile, sounddevice) are translated into these at exactly one
boundary each, so the CLI can map them to one clear line and an exit code.
"""


class OmniError(Exception):
    """A failure worth one line on stderr; exit code 1."""

    exit_code = 1
    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class UsageError(OmniError):
    """The command line asked for something impossible; exit code 2, before any work."""

    exit_code = 2


class ContextWindowError(UsageError):
    """The prompt does not fit the model's context window (a conversation may drop old turns)."""


class UnsupportedError(OmniError):
    """The engine or server cannot do what was asked (no such route, modality or feature)."""


class ServerError(OmniError):
    """A server was unreachable, refused the request or answered something unusable."""


class ServerTimeout(ServerError):
    """A server took the request and did not answer within the timeout."""


class AudioDeviceError(OmniError):
    """A sound device could not be opened or failed while running."""


MESSAGE_CHARS = 300
"""How much of a server's own words an error line carries: enough to read, never a whole page."""


class EventError(Exception):
    """A client event that cannot be carried out: becomes an `error` event, the session goes on."""

    def __init__(self, message: str, code: str = "invalid_request_error", param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


def capped(text: str) -> str:
    """One line of at most MESSAGE_CHARS characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"
