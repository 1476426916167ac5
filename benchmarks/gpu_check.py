"""The GPU path, checked on a CUDA machine: omni's vLLM thinker, and what of vLLM-Omni runs without
downloaded weights.

1. The vLLM thinker (`--thinker vllm`) on the GPU with MODEL (a model folder, a catalogue name such
   as smollm2, or org/model where the hub is reachable): load time, first token and tokens/s of
   one chat, then aggregate tokens/s of 1, 4 and 16 chats at once (one engine, batched).
2. vLLM-Omni: AsyncOmni imports (it needs torchvision, absent from CPU installs); its bundled stage
   configs for Qwen3-Omni and Qwen3-TTS parse; omni's reading of its outputs on real output
   objects holding CUDA tensors (bf16 and float32), which the CPU tests cannot build.
Goal: every check says "ok"; the thinker's 16-chat tokens/s well above its one-chat figure.
Needs: a CUDA GPU, pip install vllm vllm-omni (matching releases) and omni.
Usage: python benchmarks/gpu_check.py [MODEL] [--max-tokens 128]
This script was written without a GPU at hand: it has not been run on hardware yet.
"""

import argparse
import asyncio
import time
import traceback

QUESTION = [{"role": "system", "content": "You are a helpful assistant. Answer briefly and clearly."},
            {"role": "user", "content": "Explain in three sentences why the sky is blue."}]


async def chat(thinker, max_tokens: int) -> tuple[float, int]:
    start = time.perf_counter()
    first, pieces = None, 0
    async for _ in thinker.stream(QUESTION, max_tokens=max_tokens, temperature=0.0):
        first = first or time.perf_counter() - start
        pieces += 1
    return first or float("nan"), pieces


async def thinker_check(model: str, max_tokens: int) -> None:
    from omnicli.engine.vllm_thinker import VllmThinker

    thinker = VllmThinker(model, engine_options={"gpu_memory_utilization": 0.5})
    start = time.perf_counter()
    await thinker.preload()
    print(f"  loaded {thinker.source()} in {time.perf_counter() - start:.1f} s")
    await chat(thinker, 8)  # warm-up
    first, pieces = await chat(thinker, max_tokens)
    print(f"  one chat: first token {first * 1000:.0f} ms, {pieces} pieces")
    for chats in (1, 4, 16):
        start = time.perf_counter()
        results = await asyncio.gather(*(chat(thinker, max_tokens) for _ in range(chats)))
        wall = time.perf_counter() - start
        firsts = sorted(r[0] for r in results)
        print(f"  {chats:>2} chats: {sum(r[1] for r in results) / wall:8.1f} pieces/s together, "
              f"first token p50 {firsts[len(firsts) // 2] * 1000:.0f} ms")
    thinker.close()


def omni_checks() -> None:
    import torch

    from omnicli.engine.vllm_omni import require_vllm_omni

    require_vllm_omni()
    print(f"  CUDA: {torch.cuda.get_device_name(0)}")
    from vllm_omni.entrypoints.async_omni import AsyncOmni

    print(f"  AsyncOmni imports ({AsyncOmni.__module__})")
    import importlib.resources

    import yaml

    configs = importlib.resources.files("vllm_omni") / "model_executor" / "stage_configs"
    for name in ("qwen3_omni_moe.yaml", "qwen3_tts.yaml"):
        path = configs / name
        if path.is_file():
            stages = yaml.safe_load(path.read_text()).get("stage_args", [])
            print(f"  {name}: {len(stages)} stages")
        else:
            print(f"  {name}: not bundled in this release")
    from vllm.outputs import CompletionOutput  # noqa: F401 - the base of what it yields
    from vllm_omni.outputs import OmniRequestOutput
    from vllm_omni.outputs.mm_outputs import MultimodalCompletionOutput, MultimodalPayload

    from omnicli.engine.vllm_omni_output import OutputReader

    for dtype in (torch.bfloat16, torch.float32):
        wave = torch.sin(torch.linspace(0, 400, 4800, device="cuda")).to(dtype)
        payload = MultimodalPayload(tensors={"audio": wave}, metadata={"sr": torch.tensor(24000, device="cuda")})
        out = OmniRequestOutput(request_id="gpu", final_output_type="audio", outputs=[MultimodalCompletionOutput(
            index=0, text="", token_ids=[], cumulative_logprob=None, logprobs=None, multimodal_output=payload)])
        chunks = OutputReader().read(out)[1]
        assert len(chunks) == 1 and len(chunks[0].samples) == 4800, chunks
        print(f"  {dtype} CUDA audio read: ok")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="smollm2")
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    failed = False
    for title, check in (("vLLM thinker", lambda: asyncio.run(thinker_check(args.model, args.max_tokens))),
                         ("vLLM-Omni without weights", omni_checks)):
        print(f"{title}:", flush=True)
        try:
            check()
            print("  ok")
        except Exception:  # noqa: BLE001 - every check runs; each failure is shown whole
            failed = True
            traceback.print_exc()
            print("  FAILED")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
