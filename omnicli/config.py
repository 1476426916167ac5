"""Where connection settings come from: flag > environment > config file > default.

The config file is TOML at $OMNI_CONFIG or ~/.config/omni/config.toml, e.g.::

    server = "http://127.0.0.1:8091"
    api_key = "..."
"""

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from omnicli.errors import UsageError


def config_path() -> Path:
    return Path(os.environ.get("OMNI_CONFIG", Path.home() / ".config" / "omni" / "config.toml"))


def _file_settings() -> dict:
    path = config_path()
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read config file {path}: {exc}") from exc


@dataclass(frozen=True)
class Connection:
    """A server to talk to; `server is None` means the in-process engine."""

    server: str | None
    api_key: str | None


def resolve_connection(server: str | None, api_key: str | None) -> Connection:
    settings = _file_settings()
    server = (
        server
        or os.environ.get("OMNI_SERVER")
        or os.environ.get("OPENAI_BASE_URL")
        or settings.get("server")
    )
    api_key = (
        api_key
        or os.environ.get("OMNI_API_KEY")
        or os.environ.get("OPENAI_API_KEY")
        or settings.get("api_key")
    )
    if server is not None and not server.startswith(("http://", "https://")):
        raise UsageError(f"server URL must start with http:// or https://, got {server!r}")
    return Connection(server=_base_url(server) if server else None, api_key=api_key)


def _base_url(server: str) -> str:
    """Accept both `http://host:port` and OpenAI-style `http://host:port/v1`."""
    server = server.rstrip("/")
    return server[: -len("/v1")] if server.endswith("/v1") else server
