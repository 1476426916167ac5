"""/metrics counts requests by route template: invented paths and methods add no series."""

import re

from tests.helpers.server_harness import run


def series(text: str) -> set[str]:
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_three_hundred_unknown_paths_add_no_series():
    async def test(client, app):
        for method in ("GET", "POST", "BREW"):
            await client.request(method, "/warm-up")
        await client.get("/metrics")
        before = series((await client.get("/metrics")).text)
        for n in range(300):
            await client.request(("GET", "POST", "BREW")[n % 3], f"/probe/{n}?q={n}")
        after = series((await client.get("/metrics")).text)
        assert after - before == set()
        assert 'omni_requests_total{method="GET",route="unmatched",status="404"}' in after
        assert 'omni_requests_total{method="other",route="unmatched",status="404"}' in after

    run(test)


def test_requests_are_labelled_by_route_even_when_refused_before_routing():
    async def test(client, app):
        await client.post("/v1/audio/speech", json={"input": "Hello."})
        await client.get("/v1/models")  # no key: a 401 before any router runs
        text = (await client.get("/metrics", headers={"authorization": "Bearer k"})).text
        assert re.search(r'omni_requests_total\{method="POST",route="/v1/audio/speech",status="401"\} 1\.0', text)
        assert re.search(r'omni_errors_total\{route="/v1/models",status="401"\} 1\.0', text)

    run(test, api_key="k")


def test_stage_figures_are_reported():
    async def test(client, app):
        await client.post("/v1/audio/speech", json={"input": "Hello."})
        text = (await client.get("/metrics")).text
        assert re.search(r'omni_requests_total\{method="POST",route="/v1/audio/speech",status="200"\} 1\.0', text)
        assert 'omni_stage_time_to_first_output_seconds_count{stage="speech"} 1.0' in text

    run(test)
