"""What commands read from stdin and where they write: checked before any work starts, so a
bad place costs one line and nothing half-made."""

import os
import sys
from pathlib import Path

from omnicli.audio.atomic import check_creatable
from omnicli.errors import OmniError, UsageError


def read_stdin_text() -> str:
    """Piped text, which must be UTF-8 (bytes are decoded here, whatever the locale says)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"stdin is not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})") from None


def check_writable(path: str, flag: str) -> None:
    """Refuse a file that could not be written, before the work that would fill it."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise UsageError(f"cannot write {flag} {path}: it is a folder")
    if not folder.is_dir():
        raise UsageError(f"cannot write {flag} {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write {flag} {path}: the folder {folder} is not writable")
    try:
        check_creatable(target)
    except OmniError as exc:
        raise UsageError(f"{flag}: {exc}") from exc


def make_folder(path: str, flag: str) -> Path:
    """A folder to write into, made when missing."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make {flag} {path}: {exc.strerror or exc}") from exc
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write into {flag} {path}: the folder is not writable")
    return folder
