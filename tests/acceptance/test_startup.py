"""`omni --help` stays fast: no heavy library is imported to print help (they load where used)."""

import subprocess
import sys

HEAVY = {
    # pydantic is not listed: Typer 0.29 itself loads it (typer._adapters) to parse options.
    "numpy", "fastapi", "starlette", "uvicorn", "httpx", "websockets", "openai", "rich",
    "soundfile", "soxr", "sounddevice", "pedalboard", "onnxruntime", "ctranslate2", "faster_whisper",
    "llama_cpp", "piper", "hibari", "jiwer", "torch", "vllm",
}

PROBE = """
import sys
from omnicli.cli.main import main
for argv in (["--help"], *[[name, "--help"] for name in sys.argv[1:]]):
    try:
        main(argv)
    except SystemExit:
        pass
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_help_for_every_command_imports_no_heavy_library():
    commands = ["speak", "chat", "talk", "transcribe", "serve", "bench-wer"]
    result = subprocess.run([sys.executable, "-c", PROBE, *commands], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.split("\n")[-2].split())
    assert "typer" in loaded  # the probe really ran the CLI
    assert loaded & HEAVY == set()
