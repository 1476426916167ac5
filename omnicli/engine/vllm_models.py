"""What `--thinker vllm --llm X` loads: a model folder vLLM reads, made once from a catalogue GGUF.

vLLM cannot read GGUF on the CPU (its GGUF kernels are CUDA-only), but transformers can: a catalogue
model (smollm2, qwen-0.5b, qwen-1.5b) is dequantized once into `~/.cache/omni/vllm/NAME` (float32, a
plain safetensors folder with the tokenizer and its chat template). The folder is built under a
temporary name and renamed into place, under a file lock, so a crash or a second process never
leaves or reads half a folder. Any other `--llm` is a model folder, or a model name a GPU machine's
vLLM fetches itself.
"""

import fcntl
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from omnicli.engine import packaged
from omnicli.engine.thinker import chosen_llm
from omnicli.engine.torch_extras import hide_unloadable
from omnicli.errors import OmniError, UsageError
from omnicli.packages import cache_dir

log = logging.getLogger("omni")

VLLM_INSTALL = 'pip install ".[vllm]" in omni\'s folder'
"""How a user installs what `--thinker vllm` needs (the `vllm` extra), as every error that needs it says."""

_DONE = "omni-converted"
"""Written last into a finished folder: its presence is what `converted` trusts."""


def vllm_model(name: str | None) -> str:
    """A model vLLM can load for `--llm name`: a converted catalogue model, a folder, or a hub name."""
    name = chosen_llm(name)
    if name in packaged.THINKERS:
        return str(converted(name))
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise UsageError(f"--llm {name}: the folder has no config.json (a Hugging Face model folder is needed)")
        return str(folder)
    if folder.suffix == ".gguf" or folder.exists():
        raise UsageError(f"--llm {name}: --thinker vllm reads model folders, not single files; "
                         f"name a catalogue model ({', '.join(packaged.THINKERS)}) or a model folder")
    if "/" in name and not name.startswith((".", "/", "~")):
        return name  # org/model: vLLM fetches it (on a machine that may reach the hub)
    raise UsageError(f"unknown LLM {name!r} for --thinker vllm: name one of {', '.join(packaged.THINKERS)}, "
                     "a model folder, or a Hugging Face model name (org/model)")


def converted(name: str) -> Path:
    """The catalogue model `name` as a float32 model folder, converted from its GGUF on first use."""
    target = cache_dir() / "vllm" / name
    if (target / _DONE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits, then finds it done
        if not (target / _DONE).is_file():
            _convert(packaged.thinker_gguf(name), target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    hide_unloadable()
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise OmniError(f"converting a GGUF for vLLM needs transformers and torch: {VLLM_INSTALL} ({exc})") from exc
    log.warning("converting %s into a model folder for vLLM at %s, once (about a minute)", gguf.name, target)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # The weights are dequantized already; only the GGUF marks stop transformers saving them.
        marked: Any = model
        marked.hf_quantizer = None
        marked.is_quantized = False
        if hasattr(marked.config, "quantization_config"):
            del marked.config.quantization_config
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / _DONE).write_text(f"{gguf}\n")
        staging.chmod(0o755)
        if target.exists():  # a folder left by an older, interrupted run without its mark
            shutil.rmtree(target)
        staging.rename(target)
    except Exception as exc:
        raise OmniError(f"cannot convert {gguf.name} for vLLM: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
