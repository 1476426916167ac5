"""`omni serve` under load against the in-process engine doing the same work.

For 1, 4 and 8 concurrent clients, each synthesizing the same sentences: aggregate throughput
(seconds of audio made per second of wall time) and request latency p50/p99, over HTTP to a live
`omni serve` on 127.0.0.1 and in process with the same concurrency.
Goal: at concurrency 4 and 8, HTTP throughput >= 0.9x in-process.
Usage: python benchmarks/serve.py [--requests N]
"""

import argparse
import asyncio
import io
import time

import httpx
import soundfile as sf
from local_serve import omni_serve

from omnicli.bench.scoring import percentile

SENTENCES = [line for line in """\
The quick brown fox jumps over the lazy dog near the river bank.
Please call Stella and ask her to bring these things with her from the store.
She sells sea shells by the sea shore every summer morning.
The meeting has been moved to Thursday at three in the afternoon.
Our train leaves at seven forty five, so we should hurry to the station.
A warm cup of tea can make a cold winter evening feel much shorter.
He opened the window and listened to the birds singing in the garden.
Turn left at the second traffic light and the museum is on your right.""".splitlines()]


async def load(concurrency: int, requests: int, one_request) -> dict:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for n in range(requests):
        queue.put_nowait(SENTENCES[n % len(SENTENCES)])
    latencies, audio = [], 0.0

    async def client():
        nonlocal audio
        while not queue.empty():
            text = queue.get_nowait()
            start = time.perf_counter()
            seconds = await one_request(text)  # not `audio += await ...`: that reads audio first
            audio += seconds
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    return {"throughput": audio / wall, "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=24, help="requests per concurrency level")
    requests = parser.parse_args().requests

    from omnicli.engine.base import SpeechRequest
    from omnicli.engine.staged import embedded_engine

    engine = embedded_engine()

    async def in_process(text: str) -> float:
        return sum([c.seconds async for c in engine.speech(SpeechRequest(text=text))])

    with omni_serve() as url:
        client = httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=16))

        async def over_http(text: str) -> float:
            response = await client.post(f"{url}/v1/audio/speech", json={"input": text, "response_format": "wav"})
            response.raise_for_status()
            return sf.info(io.BytesIO(response.content)).duration

        async def run_all():
            await load(2, 4, over_http), await load(2, 4, in_process)  # warm both
            rows = []
            for concurrency in (1, 4, 8):
                remote = await load(concurrency, requests, over_http)
                local = await load(concurrency, requests, in_process)
                rows.append((concurrency, remote, local))
            await client.aclose()
            return rows

        rows = asyncio.run(run_all())

    print(f"{'clients':>7} | {'audio s/s http':>14} {'in-proc':>8} {'ratio':>6} | "
          f"{'p50 http':>8} {'in-proc':>8} | {'p99 http':>8} {'in-proc':>8}")
    for concurrency, remote, local in rows:
        print(f"{concurrency:>7} | {remote['throughput']:>14.2f} {local['throughput']:>8.2f} "
              f"{remote['throughput'] / local['throughput']:>6.2f} | {remote['p50']:>8.3f} {local['p50']:>8.3f} | "
              f"{remote['p99']:>8.3f} {local['p99']:>8.3f}")
    print(f"{requests} requests per level, {len(SENTENCES)} sentences, goal: ratio >= 0.9 at 4 and 8 clients")


if __name__ == "__main__":
    main()
