"""Where connection settings come from: flag > environment > config file > default.

The config file is TOML at $OMNI_CONFIG or ~/.config/omni/config.toml, e.g.::

    server = "http://127.0.0.1:8091"     # or several: ["http://gpu1:8091", "http://gpu2:8091"]
    api_key = "..."
    timeout = 120
    llm = "smollm2"
"""

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from omnicli.errors import UsageError

DEFAULT_TIMEOUT = 120.0
"""Seconds to wait for a server's answer; a long speech or chat answer streams well within it."""
CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a server to accept the connection: a live one does so at once."""


def config_path() -> Path:
    """Where the config file is read from: $OMNI_CONFIG, else ~/.config/omni/config.toml."""
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
    """The first (or only) server."""
    api_key: str | None
    timeout: float = DEFAULT_TIMEOUT
    """Seconds to wait for an answer once connected (connecting: CONNECT_TIMEOUT)."""
    servers: tuple[str, ...] = ()
    """Every server given, `server` first (replicas a command spreads its requests over)."""

    def __post_init__(self) -> None:
        if not self.servers and self.server:
            object.__setattr__(self, "servers", (self.server,))


def resolve_connection(server: str | Sequence[str] | None, api_key: str | None, timeout: float | None = None) -> Connection:
    """`server`: one URL, a comma list, or several of either (`--server` repeated)."""
    settings = _file_settings()
    flag = ",".join(server) if server is not None and not isinstance(server, str) else server
    file_server = settings.get("server")
    if isinstance(file_server, list):
        file_server = ",".join(str(url) for url in file_server)
    url, url_from = _first(
        (flag, "--server"), (os.environ.get("OMNI_SERVER"), "OMNI_SERVER"),
        (os.environ.get("OPENAI_BASE_URL"), "OPENAI_BASE_URL"), (file_server, f"server in {config_path()}"),
    )
    key, _ = _first(
        (api_key, "--api-key"), (os.environ.get("OMNI_API_KEY"), "OMNI_API_KEY"),
        (os.environ.get("OPENAI_API_KEY"), "OPENAI_API_KEY"), (settings.get("api_key"), "api_key"),
    )
    servers = _server_list(str(url), url_from) if url else ()
    return Connection(
        server=servers[0] if servers else None,
        api_key=str(key) if key else None,
        timeout=resolve_timeout(timeout, settings),
        servers=servers,
    )


def resolve_timeout(timeout: float | None, settings: dict | None = None) -> float:
    """Seconds to wait for a server's answer: --timeout > OMNI_TIMEOUT > the config file > the default."""
    settings = _file_settings() if settings is None else settings
    seconds, timeout_from = _first(
        (timeout, "--timeout"), (os.environ.get("OMNI_TIMEOUT"), "OMNI_TIMEOUT"),
        (settings.get("timeout"), f"timeout in {config_path()}"), (DEFAULT_TIMEOUT, "the default"),
    )
    return _seconds(seconds, timeout_from)


def _server_list(value: str, source: str) -> tuple[str, ...]:
    """Every URL of a comma list, checked, in order, each once; OPENAI_BASE_URL names one."""
    pieces = [value] if source == "OPENAI_BASE_URL" else [p.strip() for p in value.split(",") if p.strip()]
    if not pieces:
        raise UsageError(f"{source}: no server URL in {value!r}")
    urls = [_base_url(_check_url(piece, source)) for piece in pieces]
    return tuple(dict.fromkeys(urls))


def thinker_setting() -> str | None:
    """The in-process thinker named outside the command line (`OMNI_LLM`, then `llm` in the config
    file), or None for the catalogue's default; `--llm` is applied before this is asked."""
    name, _ = _first((os.environ.get("OMNI_LLM"), "OMNI_LLM"), (_file_settings().get("llm"), "llm"))
    return str(name) if name is not None else None


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
