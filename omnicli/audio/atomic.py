"""Write files whole or not at all: an interrupted run never leaves a partial file behind.

The temporary file is created with mode 0666 and the kernel applies the umask, so what omni
writes gets the mode people expect (0644 under umask 022), as any other tool's output would;
`tempfile.mkstemp` would make it 0600 whatever the umask.
"""

import os
import secrets
from pathlib import Path

from omnicli.errors import OmniError

_TRIES = 8
"""Random names to try before giving up on a folder where each one exists already."""


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` whole: into a temporary file beside it, then renamed over it."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = _create(directory, path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OmniError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise


def check_creatable(path: str | Path) -> None:
    """Fail now, as `atomic_write` would at the end, where no file can be made beside `path`
    (a read-only or virtual file system such as /proc, whatever the permission bits say)."""
    path = Path(path)
    fd, tmp = _create(path.parent if str(path.parent) else Path("."), path)
    os.close(fd)
    tmp.unlink(missing_ok=True)


def _create(directory: Path, path: Path) -> tuple[int, Path]:
    """A new file beside `path`, opened for writing, named so it is never taken for the real one."""
    for _ in range(_TRIES):
        tmp = directory / f".{path.name}.{secrets.token_hex(4)}.part"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise OmniError(f"cannot write {path}: {exc.strerror or exc}") from exc
    raise OmniError(f"cannot write {path}: no free temporary name in {directory}")
