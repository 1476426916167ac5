"""vLLM-Omni's own `DuplexClient` (vllm_omni/clients/duplex.py), used as its docstring shows, against
a duplex server: `python vllm_duplex_driver.py URL WAV16K`. It runs in a process of its own because
importing `vllm_omni` patches torch for the whole process. Prints one JSON line of what the client
saw; exits 77 when `vllm_omni.clients.duplex` does not import (the test then skips)."""

import asyncio
import json
import sys
from pathlib import Path

from omnicli.engine.torch_extras import hide_unloadable

hide_unloadable()  # beside the CPU torch, the index's CUDA torchvision cannot load; transformers then goes without it
try:
    from vllm_omni.clients.duplex import DuplexClient, SessionConfig, read_pcm16_wav
except ImportError as exc:
    print(f"vllm_omni.clients.duplex does not import: {exc}", file=sys.stderr)
    sys.exit(77)

SAFETY_S = 60


async def collect(client: DuplexClient, seen: list[dict]) -> None:
    async for event in client.events():
        seen.append(event.raw)


async def main(url: str, wav: str) -> dict:
    pcm = read_pcm16_wav(Path(wav))
    seen: list[dict] = []
    audio = b""
    async with DuplexClient(url, model="omni-test", config=SessionConfig(), heartbeat_interval_s=0.2) as client:
        created = dict(client.session_info)
        collector = asyncio.create_task(collect(client, seen))
        await asyncio.sleep(0)
        await client.stream_pcm(pcm, realtime=False)  # the server (Silero + Smart Turn) decides the turn's end
        decisions = []
        async for response in client.responses():
            decisions.append(response.decision)
            if response.decision == "listen":
                continue
            async for chunk in response.audio():
                audio += chunk
                await client.ack_playback(response.played_ms, response_id=response.response_id)
            await response.wait()
            break
        transcript, played_ms = response.transcript, response.played_ms
    await asyncio.wait_for(collector, SAFETY_S)
    return {"session_id": client.session_id, "created": created, "decisions": decisions, "audio_bytes": len(audio),
            "transcript": transcript, "played_ms": played_ms, "events": seen}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2]), SAFETY_S))))
