"""Mesh plumbing for one hosted service: the trace middleware, its bounded queue, the issue aggregator,
and the feeds reporter, started and stopped with the HTTP app's lifespan."""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from .._context import TRACEPARENT
from .._descriptor import Identity
from .._events import DEAD_LETTER, Delivered, Subscription, Verdict, safe_headers
from .._http.app import HttpApp
from .._pipeline import Middleware
from .._wiring import Sender, WiringError, checked_http_url, checked_nats_url
from .exporters import Exporter, FanOutExporter, QueueExporter
from .feeds import TOKEN_ENV, EnvelopeSender, FeedSender
from .issues import IssueAggregator
from .jetstream import MESH_NATS_ENV, JetStreamSender, require_nats
from .otlp import DEFAULT_SCHEDULE_DELAY, SCHEDULE_DELAY_ENV, OtlpExporter, traces_endpoint
from .reporter import DEFAULT_INTERVAL, Reporter
from .tracecontext import parse_traceparent
from .traces import TraceMiddleware

logger = logging.getLogger("svcgen.mesh")

DEFAULT_TRACE_QUEUE_CAP = 10_000
COLLECTOR_ENV = "SVCGEN_COLLECTOR"
HEARTBEAT_ENV = "SVCGEN_HEARTBEAT_SECONDS"
"""Override the manifest's `mesh.collector` and `mesh.heartbeatSeconds` where the service runs, without a
rebuild; SVCGEN_COLLECTOR_TOKEN gives the token of a locked collector."""


@dataclass(frozen=True)
class MeshSettings:
    collector: str | None = None
    """Collector base URL; feeds go to `{collector}/svc/invoke`, the collector's own (default) prefix. None: no
    feeds (traces may still leave by OTLP)."""
    heartbeat_seconds: float = DEFAULT_INTERVAL
    issues: bool = True
    trace_queue_cap: int = DEFAULT_TRACE_QUEUE_CAP
    """Trace events waiting for the next beat; past it the oldest are dropped and counted."""
    token: str | None = None
    """The collector's bearer token (a locked collector); read from SVCGEN_COLLECTOR_TOKEN where the service runs,
    never from the manifest, so it stays out of the generated code."""
    transport: str = "http"
    """`nats`: the feeds go to JetStream at `nats` (stream SVC_MESH) instead of `collector` (SVCGEN_MESH_NATS)."""
    nats: str | None = None
    otlp: str | None = None
    """OTLP/HTTP base URL (`/v1/traces` appended): trace events also leave as OpenTelemetry spans;
    OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT override it where the service runs."""

    @property
    def feeds(self) -> bool:
        """Whether the mesh feeds go anywhere: to a collector over HTTP, or to JetStream."""
        return self.transport == "nats" or self.collector is not None


MESH_VARIABLES = (COLLECTOR_ENV, MESH_NATS_ENV)
"""Where the environment sends the feeds: they override the manifest's `mesh:`, and mean nothing without it."""


def warn_without_mesh(environ: Mapping[str, str]) -> None:
    """For a service whose manifest has no `mesh:`: one warning when the environment still names where feeds go,
    which would otherwise be ignored without a word."""
    named = [variable for variable in MESH_VARIABLES if environ.get(variable, "").strip()]
    if named:
        logger.warning(
            "%s is set, but the manifest has no mesh: section, so this service sends no feeds; add "
            "`mesh: {collector: <url>}` to the manifest and rebuild to report",
            " and ".join(named),
        )


def _overridden(settings: MeshSettings, environ: Mapping[str, str]) -> MeshSettings:
    collector = environ.get(COLLECTOR_ENV, "").strip()
    if collector:
        # At start, one line: not a feed failing every beat with "no URL for topic svc:mesh:register".
        settings = dataclasses.replace(settings, collector=checked_http_url(collector, COLLECTOR_ENV,
                                                                            "http://127.0.0.1:8700"))  # fmt: skip
    nats = environ.get(MESH_NATS_ENV, "").strip()
    if nats:
        settings = dataclasses.replace(settings, transport="nats", nats=checked_nats_url(nats, MESH_NATS_ENV))
    token = environ.get(TOKEN_ENV, "").strip()
    if token:
        settings = dataclasses.replace(settings, token=token)
    seconds = _positive(environ, HEARTBEAT_ENV, "seconds")
    if seconds is not None:
        settings = dataclasses.replace(settings, heartbeat_seconds=seconds)
    return settings


def _positive(environ: Mapping[str, str], variable: str, unit: str) -> float | None:
    """The variable's positive number, None when unset; a `WiringError` (one line, naming it) otherwise."""
    text = environ.get(variable, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise WiringError(f"{variable}={text!r}: expected a positive number of {unit}")
    return value


def new_instance_id() -> str:
    return uuid.uuid4().hex[:16]


class MeshHost:
    def __init__(
        self,
        identity: Identity,
        settings: MeshSettings,
        *,
        sender: Sender | None = None,
        instance_id: str | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.settings = _overridden(settings, environ)
        if self.settings.transport == "nats":
            require_nats()  # at start, one line: not at the first feed
            if not self.settings.nats:
                raise WiringError(f"mesh transport nats needs a NATS URL: set mesh.nats or {MESH_NATS_ENV}")
        elif self.settings.transport != "http":
            raise WiringError(f"mesh transport {self.settings.transport!r}: expected http or nats")
        self.instance_id = instance_id or identity.instance_id or new_instance_id()
        self.identity = dataclasses.replace(identity, instance_id=self.instance_id)
        self.queue = QueueExporter(cap=settings.trace_queue_cap)
        otlp = traces_endpoint(self.settings.otlp, environ)
        delay = _positive(environ, SCHEDULE_DELAY_ENV, "milliseconds")
        self.otlp = None if otlp is None else OtlpExporter(
            otlp, self.identity, cap=settings.trace_queue_cap,
            flush_interval=delay / 1000 if delay is not None else DEFAULT_SCHEDULE_DELAY,
        )
        exporter: Exporter = self.queue
        if self.otlp is not None:
            # Its queue itself: one call less on the request path than through `OtlpExporter.export`.
            otlp_queue = self.otlp.queue
            exporter = FanOutExporter(self.queue, otlp_queue) if self.settings.feeds else otlp_queue
        self.issues = IssueAggregator(identity.service) if settings.issues else None
        self.tracer = TraceMiddleware(
            self.identity, exporter, on_failure=[self.issues.observe] if self.issues is not None else []
        )
        self._sender = sender
        self.reporter: Reporter | None = None

    def observe_dead_letter(self, subscription: Subscription, delivered: Delivered, verdict: Verdict) -> None:
        """An `EventBus.on_dead_letter` observer: each dead letter is an issue classified `dead-letter`."""
        if self.issues is None:
            return
        parent = parse_traceparent(safe_headers(delivered.headers).get(TRACEPARENT, ""))
        self.issues.record(subscription.id, verdict.status, subscription.version, "event", verdict.exception_type,
                           parent[0] if parent is not None else None, classification=DEAD_LETTER)  # fmt: skip

    @property
    def middleware(self) -> list[Middleware]:
        """Install first: the trace middleware times the whole invocation."""
        return [self.tracer]

    def attach(self, app: HttpApp) -> HttpApp:
        """Run the reporter and the OTLP exporter in `app`'s lifespan: register at startup, beat, flush once more at
        shutdown."""
        if self.otlp is not None:
            app.on_startup.append(self.otlp.start)
            app.on_shutdown.append(self.otlp.stop)
        if not self.settings.feeds:
            return app
        owned = self._sender is None
        # The collector's surfaces are under the default prefix, whatever prefix this service uses.
        sender = self._sender or self._feed_sender()
        reporter = Reporter(
            FeedSender(sender),
            app.service.descriptor,
            service=self.identity.service,
            instance_id=self.instance_id,
            health=app.service.check_health,
            traces=self.queue.drain_wire,
            backlog=self.queue.__len__,
            dropped=lambda: self.queue.dropped,
            issues=self.issues.flush if self.issues is not None else None,
            interval=self.settings.heartbeat_seconds,
        )

        async def stop() -> None:
            await reporter.stop()
            if owned and isinstance(sender, EnvelopeSender | JetStreamSender):
                await sender.aclose()

        app.on_startup.append(reporter.start)
        app.on_shutdown.append(stop)
        self.reporter = reporter
        return app

    def _feed_sender(self) -> EnvelopeSender | JetStreamSender:
        if self.settings.nats and self.settings.transport == "nats":
            return JetStreamSender(self.settings.nats)
        assert self.settings.collector is not None  # `feeds` holds: not nats, so a collector
        return EnvelopeSender(self.settings.collector, token=self.settings.token)
