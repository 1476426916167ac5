"""Write files whole or not at all: an interrupted run never leaves a partial file behind."""

import os
import tempfile
from pathlib import Path

from omnicli.errors import OmniError


def atomic_write(path: str | Path, data: bytes) -> None:
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        raise OmniError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OmniError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
