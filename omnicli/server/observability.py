"""What `omni serve` tells its operator: one log line per request, and Prometheus metrics."""

import logging
import time

from prometheus_client import CONTENT_TYPE_LATEST as PROMETHEUS_CONTENT_TYPE  # noqa: F401
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from starlette.routing import Match

disable_created_metrics()  # the *_created series only add noise to a scrape

access_log = logging.getLogger("omni.access")


class ServerMetrics:
    """The server's Prometheus metrics, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "omni_requests", "HTTP requests answered", ["method", "route", "status"], registry=self.registry
        )
        self.errors = Counter(
            "omni_errors", "HTTP requests answered with 4xx or 5xx", ["route", "status"], registry=self.registry
        )
        self.first_output = Histogram(
            "omni_stage_time_to_first_output_seconds", "Time from a stage's start to its first output",
            ["stage"], registry=self.registry,
            buckets=(0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10),
        )
        self.rtf = Histogram(
            "omni_stage_real_time_factor", "Busy time over seconds of audio heard or spoken",
            ["stage"], registry=self.registry,
            buckets=(0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2),
        )
        self.tokens_per_second = Histogram(
            "omni_thinker_tokens_per_second", "Thinker generation speed", registry=self.registry,
            buckets=(5, 10, 20, 40, 60, 80, 120, 200),
        )
        self.loop_lag = Histogram(
            "omni_event_loop_lag_seconds", "How late the event loop woke a 20 ms timer (time spent blocked)",
            registry=self.registry, buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2),
        )
        self.active = Gauge(
            "omni_active_generations", "Engine generations running now", ["kind"], registry=self.registry
        )

    async def tracked(self, kind: str, deltas):
        """Pass an engine stream through, counting it as active until it ends or is cancelled."""
        gauge = self.active.labels(kind)
        gauge.inc()
        try:
            async for delta in deltas:
                yield delta
        finally:
            gauge.dec()

    def observe_stages(self, stages: dict[str, dict]) -> None:
        """Record one request's per-stage times to first output, real-time factors and token rate."""
        for stage, figures in stages.items():
            if figures.get("time_to_first_output") is not None:
                self.first_output.labels(stage).observe(figures["time_to_first_output"])
            if figures.get("rtf") is not None:
                self.rtf.labels(stage).observe(figures["rtf"])
            if figures.get("tokens_per_second") is not None:
                self.tokens_per_second.observe(figures["tokens_per_second"])

    def render(self) -> bytes:
        """The metrics in Prometheus' text format, for `/metrics`."""
        return generate_latest(self.registry)


UNMATCHED = "unmatched"
"""The one route label every unknown path shares, so nobody can add series by inventing paths."""
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class AccessLog:
    """Pure ASGI middleware (streaming-safe): counts and logs each request once it is answered.

    Requests are counted by route template (`/v1/audio/speech`), looked up in `routes` here
    rather than taken from the router, so requests refused before routing (401, 413) count too.
    """

    def __init__(self, app, metrics: ServerMetrics, routes: list) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    def route_label(self, scope) -> str:
        """The route template a request matches, or UNMATCHED, so labels stay few."""
        for route in self.routes:
            if route.matches(scope)[0] is not Match.NONE:
                return route.path
        return UNMATCHED

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 500

        async def tracked_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        finally:
            route = self.route_label(scope)
            method = scope["method"] if scope["method"] in _METHODS else "other"
            self.metrics.requests.labels(method, route, str(status)).inc()
            if status >= 400:
                self.metrics.errors.labels(route, str(status)).inc()
            client = scope.get("client") or ("-", 0)
            access_log.info(
                '%s "%s %s" %d %.3fs', client[0], scope["method"], scope["path"], status, time.perf_counter() - start
            )
