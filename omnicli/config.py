"""Where connection settings come from: flag > environment > config file > default.

The config file is TOML at $OMNI_CONFIG or ~/.config/omni/config.toml, e.g.::

    server = "http://127.0.0.1:8091"
    api_key = "..."
    timeout = 120
"""

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from omnicli.errors import UsageError

DEFAULT_TIMEOUT = 120.0
"""Seconds to wait for a server's answer; a long speech or chat answer streams well within it."""
CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a server to accept the connection: a live one does so at once."""


def config_path() -> Path:
    return Path(os.environ.get("OMNI_CONFIG", Path.home() / ".config" / "omni" / "config.toml"))


def _file_settings() -> dict:
    path = config_path()
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read config file {path}: {exc}") from exc


@dataclass(frozen=True)
class Connection:
    """A server to talk to; `server is None` means the in-process engine."""

    server: str | None
    api_key: str | None
    timeout: float = DEFAULT_TIMEOUT
    """Seconds to wait for an answer once connected (connecting: CONNECT_TIMEOUT)."""


def resolve_connection(server: str | None, api_key: str | None, timeout: float | None = None) -> Connection:
    settings = _file_settings()
    url, url_from = _first(
        (server, "--server"), (os.environ.get("OMNI_SERVER"), "OMNI_SERVER"),
        (os.environ.get("OPENAI_BASE_URL"), "OPENAI_BASE_URL"), (settings.get("server"), f"server in {config_path()}"),
    )
    key, _ = _first(
        (api_key, "--api-key"), (os.environ.get("OMNI_API_KEY"), "OMNI_API_KEY"),
        (os.environ.get("OPENAI_API_KEY"), "OPENAI_API_KEY"), (settings.get("api_key"), "api_key"),
    )
    seconds, timeout_from = _first(
        (timeout, "--timeout"), (os.environ.get("OMNI_TIMEOUT"), "OMNI_TIMEOUT"),
        (settings.get("timeout"), f"timeout in {config_path()}"), (DEFAULT_TIMEOUT, "the default"),
    )
    return Connection(
        server=_base_url(_check_url(str(url), url_from)) if url else None,
        api_key=str(key) if key else None,
        timeout=_seconds(seconds, timeout_from),
    )


def server_url(value: str, source: str) -> str:
    """A server URL given by `source` (a flag), checked and without a trailing /v1."""
    return _base_url(_check_url(value, source))


def _first(*candidates: tuple[object, str]) -> tuple[object, str]:
    """The first value that is set, and where it came from (for error messages)."""
    for value, source in candidates:
        if value not in (None, ""):
            return value, source
    return None, ""


def _check_url(server: str, source: str) -> str:
    """A server URL that httpx can use, or one line saying what is wrong with it."""
    if not server.startswith(("http://", "https://")):
        raise UsageError(f"{source}: server URL must start with http:// or https://, got {server!r}")
    try:
        parts = urlsplit(server)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise UsageError(f"{source}: {server!r} is not a valid URL: {exc}") from exc
    if not parts.hostname:
        raise UsageError(f"{source}: {server!r} is not a valid URL: it names no host")
    return server


def _seconds(value: object, source: str) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{source}: timeout must be a number of seconds, got {value!r}") from None
    if not 0 < seconds <= 86400:
        raise UsageError(f"{source}: timeout must be between 0 and 86400 seconds, got {value!r}")
    return seconds


def _base_url(server: str) -> str:
    """Accept both `http://host:port` and OpenAI-style `http://host:port/v1`."""
    server = server.rstrip("/")
    return server[: -len("/v1")] if server.endswith("/v1") else server
