"""vLLM-Omni's own duplex server on 127.0.0.1, on the CPU: its `/v1/realtime` route (and
`?duplex=1`), `OmniDuplexSessionHandler` and `DuplexOmni` engine, as `vllm serve --omni` wires them,
over the test pipeline in vllm_omni_cpu_duplex/ (a text LLM: SmolLM2 converted by .ci/run).

    PYTHONPATH=<overlay> python vllm_omni_duplex_server.py --port-file F

writes `http://127.0.0.1:PORT` to F once the socket listens. The overlay (built by .ci/run) holds
what vLLM-Omni imports beyond omni's own dependencies, and this test pipeline.
"""

import argparse
import asyncio
import os
from pathlib import Path

MODEL = Path(os.environ.get("OMNI_VLLM_MODEL", Path.home() / ".cache" / "omni" / "vllm" / "smollm2"))
DEPLOY = Path(__file__).resolve().parent / "vllm_omni_cpu_duplex" / "deploy.yaml"


async def serve(port_file: Path) -> None:
    from omnicli.engine.torch_extras import hide_unloadable

    hide_unloadable()  # the vllm extra's CUDA torchcodec (the overlay's torchvision and torchaudio load)
    import uvicorn
    from fastapi import FastAPI
    from vllm_omni.entrypoints.duplex.serving import OmniDuplexSessionHandler
    from vllm_omni.entrypoints.duplex_omni import DuplexOmni
    from vllm_omni.entrypoints.openai.api_server import router
    from vllm_omni_cpu_duplex import register

    register()  # here; the engine's processes get it from the entry point
    engine = DuplexOmni(model=str(MODEL), deploy_config=str(DEPLOY))
    app = FastAPI()
    app.include_router(router)
    app.state.openai_serving_duplex = OmniDuplexSessionHandler(duplex_omni=engine)  # as api_server wires it
    app.state.api_server_count = 1
    app.state.duplex_warmup_done = None
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        port_file.write_text(f"http://127.0.0.1:{port}")
        await serving
    finally:
        engine.shutdown()


if __name__ == "__main__":  # the engine's processes are spawned: they import this file again
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", type=Path, required=True)
    asyncio.run(serve(parser.parse_args().port_file))
