"""`Service`: a registry hosted behind the pipeline, with the reserved topics answered before routing.

Everything derived from the registry (descriptor, spec, their JSON) is computed once, here.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cached_property
from typing import Any, Final

import orjson

from . import _status as st
from ._codec import TextFields, codec_for, float_subclass
from ._context import Context
from ._deadline import DEADLINE_HEADER, Clock, caller_deadline
from ._dependencies import Dependencies
from ._descriptor import Descriptor, Identity, ProducedTopic, build_descriptor, build_spec
from ._envelope import envelope_from, parse_envelope, response_envelope_bytes
from ._health import HealthChecks, HealthReport
from ._idempotency import IDEMPOTENCY_KEY_HEADER, IdempotencyStore, MemoryIdempotencyStore, fingerprint, run_once
from ._invocation import NO_HEADERS, Invocation, lowered
from ._jsonlimits import DEFAULT_JSON_LIMITS, JsonLimits
from ._openapi import build_openapi
from ._pipeline import Middleware, Pipeline
from ._registry import Registration, Registry
from ._result import Outcome, Result
from ._security import Guard, Principal, Security
from ._topics import DEFAULT_PREFIX, HEALTHCHECK_TOPIC, MESH_TOPIC, SPEC_TOPIC, VERSION_HEADERS, normalize_prefix
from ._versioning import VersionSelector, requested_version

logger = logging.getLogger("svcgen.service")

DEFAULT_TITLE = "Svc service"
DEFAULT_API_VERSION = "1.0.0"

_ReservedAnswer = Callable[[], Awaitable[Outcome]]
ADMITTED_PER_CALL: Final = frozenset({*VERSION_HEADERS, IDEMPOTENCY_KEY_HEADER})
"""Headers that make `invoke` admit a call on its own: they pick the version or ask for an idempotent run."""
Runner = Callable[
    [Mapping[str, str], str | bytes | None, TextFields | None, str, JsonLimits, "Principal | None"],
    Awaitable[Outcome],
]
"""`Service.runner`'s: (headers, body, fields, transport, JSON limits, principal) → the call's `Outcome`."""


class Service:
    def __init__(
        self,
        identity: Identity,
        registry: Registry,
        *,
        middleware: Sequence[Middleware] = (),
        dependencies: Dependencies | None = None,
        health: HealthChecks | None = None,
        produces: Sequence[ProducedTopic] | None = None,
        events: Mapping[str, Any] | None = None,
        title: str = DEFAULT_TITLE,
        api_version: str = DEFAULT_API_VERSION,
        prefix: str = DEFAULT_PREFIX,
        json_limits: JsonLimits = DEFAULT_JSON_LIMITS,
        security: Guard | Security | None = None,
        idempotency: IdempotencyStore | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.identity = identity
        self.idempotency: IdempotencyStore = idempotency if idempotency is not None else MemoryIdempotencyStore()
        """Where answers to `Idempotency-Key` calls of non-idempotent topics are kept (wiring.py may set another)."""
        self.clock = clock
        """The monotonic clock deadlines are measured on."""
        self.json_limits = json_limits
        """The default for invocations whose transport does not set its own."""
        self.registry = registry
        self.dependencies = dependencies or Dependencies()
        self.guard = Guard(security) if isinstance(security, Security) else security
        """Who may call each topic, checked before the pipeline runs; None: every topic is public."""
        if self.guard is not None:
            self.guard.check_registrations(registry)
        check = self.guard.health_check() if self.guard is not None else None
        if check is not None:
            health = health if health is not None else HealthChecks()
            health.add(check)
        self.health = health
        self.title = title
        self.api_version = api_version
        self.prefix = normalize_prefix(prefix)
        self.middleware = tuple(middleware)
        self._versions = VersionSelector(registry)
        self._encoders: dict[int, Callable[[Any], Any]] = {}
        self._scopes: dict[int, str] = {}
        self._runners: dict[int, Runner] = {}
        self.pipeline = Pipeline(self._versions, self.middleware, clock=clock)
        self.produces = produces
        self.events = events
        """The descriptor's `events` (`events_descriptor`): None for a service with none."""
        self.spec: dict[str, Any] = build_spec(identity.service, registry)
        self._spec_answer = Outcome(Result.ok(self.spec), orjson.dumps(self.spec))
        self._static_envelopes: dict[str, bytes] = {SPEC_TOPIC: response_envelope_bytes(self._spec_answer)}
        self._describe(identity)
        self._reserved: dict[str, _ReservedAnswer] = {
            MESH_TOPIC: self._answer_mesh,
            SPEC_TOPIC: self._answer_spec,
            HEALTHCHECK_TOPIC: self._answer_health,
        }

    def declare_profile(self, profile: Mapping[str, Any]) -> None:
        """Put the profile object in the descriptor; the hash does not cover it, so it stays the same."""
        self._describe(dataclasses.replace(self.identity, profile=dict(profile)))

    def _describe(self, identity: Identity) -> None:
        self.identity = identity
        self.descriptor: Descriptor = build_descriptor(identity, self.registry, self.produces, self.events)
        self._mesh_answer = Outcome(Result.ok(self.descriptor.document), self.descriptor.json_text.encode())
        # Static answers are framed once, so their cost does not grow with the registry.
        self._static_envelopes[MESH_TOPIC] = response_envelope_bytes(self._mesh_answer)

    @cached_property
    def openapi(self) -> dict[str, Any]:
        return build_openapi(self.registry, title=self.title, version=self.api_version, prefix=self.prefix)

    async def invoke(self, invocation: Invocation) -> Outcome:
        """One invocation: reserved topics first, then the version selected, then exactly one pipeline run."""
        topic = invocation.topic
        reserved = self._reserved.get(topic)
        if reserved is not None:
            if self.guard is not None and topic != HEALTHCHECK_TOPIC:
                checked = await self.guard.check(self.guard.security.well_known, invocation.credentials)
                if isinstance(checked, Result):
                    return self._encode(checked, None, topic)
            return await reserved()
        requested = requested_version(invocation)
        selected = self._versions.select(topic, requested)
        registration = selected if isinstance(selected, Registration) else None
        principal: Principal | None = None
        guard = self.guard
        if guard is not None:  # before the pipeline, so before the body is decoded
            checked = await guard.check(guard.requirements(registration), invocation.credentials)
            if isinstance(checked, Result):
                return self._encode(checked, None, topic)
            principal = checked
        if registration is not None and not registration.idempotent:
            key = invocation.headers.get(IDEMPOTENCY_KEY_HEADER)
            if key is not None:
                scope = self._scopes.get(id(registration)) or self._scope(registration)
                if principal is not None:  # one caller's key never answers another's call
                    scope = f"{scope} {principal.scheme}:{principal.subject}"
                request = fingerprint(topic, requested, invocation.fields, invocation.body)
                run = lambda: self.run_selected(invocation, registration, requested, principal)  # noqa: E731
                outcome = await run_once(self.idempotency, scope, key, request, run)
                if not outcome.fixed:  # a replayed or refused answer (built anew) carries the version's own too
                    outcome.fixed = registration.answer_headers
                return outcome
        return await self.run_selected(invocation, registration, requested, principal)

    def route_runner(self, topic: str, static_version: str) -> Runner | None:
        """The runner of a route's calls when the route alone decides what `invoke` looks at per call: no guard, and
        a topic and version the service has. A call with one of `ADMITTED_PER_CALL`'s headers still goes through
        `invoke`; None: every call does."""
        if self.guard is not None:
            return None
        selected = self._versions.select(topic, static_version)
        return self.runner(selected) if isinstance(selected, Registration) else None

    def _scope(self, registration: Registration) -> str:
        """Where a registration's idempotency keys live: service and (topic, version), named once."""
        scope = self._scopes[id(registration)] = f"{self.identity.service} {registration.key}"
        return scope

    async def run_selected(
        self,
        invocation: Invocation,
        registration: Registration | None,
        requested: str = "",
        principal: Principal | None = None,
    ) -> Outcome:
        """One pipeline run of a call already admitted: its registration selected (None: the pipeline answers
        the miss), its caller checked, its idempotency key honoured. What `invoke` ends with."""
        limits = invocation.json_limits or self.json_limits
        if registration is not None:
            run = self.runner(registration)
            return await run(invocation.headers, invocation.body, invocation.fields, invocation.transport, limits,
                             principal)  # fmt: skip
        topic = invocation.topic
        context = Context(topic, requested, invocation.headers, self.dependencies.open_scope(), invocation.body,
                          invocation.fields, invocation.transport, limits)  # fmt: skip
        try:
            result = await self.pipeline.run(context)
        finally:
            if context.scope.holds_instances:
                await _close_scope(context)
        return self._encode(result, None, topic)

    def runner(self, registration: Registration) -> Runner:
        """What runs one admitted call of `registration`, made once per registration with what it reads bound:
        the call's deadline (the caller's `svc-deadline` or the topic's `timeout`, whichever comes first), its
        `Context`, the pipeline and the `Outcome`. A binding that admits a call itself calls it directly. It binds
        the service's pipeline, dependencies and clock as they are when it is made (at the app's build)."""
        made = self._runners.get(id(registration))
        if made is not None:
            return made
        run_pipeline = self.pipeline.chain(registration)
        open_scope = self.dependencies.open_scope
        clock = self.clock
        encode = self._encode
        topic, version, timeout = registration.topic, registration.version, registration.timeout
        fixed = registration.answer_headers

        async def run(
            headers: Mapping[str, str],
            body: str | bytes | None,
            fields: TextFields | None,
            transport: str,
            json_limits: JsonLimits,
            principal: Principal | None = None,
        ) -> Outcome:
            deadline = None
            if timeout is not None or DEADLINE_HEADER in headers:
                now = clock()
                deadline = caller_deadline(headers, now)
                if timeout is not None and (deadline is None or now + timeout < deadline):
                    deadline = now + timeout
            context = Context(topic, version, headers, open_scope(), body, fields, transport, json_limits,
                              registration, principal, deadline)  # fmt: skip
            try:
                result = await run_pipeline(context)
            finally:
                if context.scope.holds_instances:
                    await _close_scope(context)
            encoded = context.encoded
            if encoded is not None and encoded[0] is result:
                return Outcome(result, encoded[1], version, fixed)
            return encode(result, registration, topic)

        self._runners[id(registration)] = run
        return run

    async def invoke_envelope(
        self,
        raw: bytes | str | Mapping[str, Any],
        *,
        json_limits: JsonLimits | None = None,
        credentials: Mapping[str, str] | None = None,
    ) -> bytes:
        """Apply a message envelope; returns the response envelope's JSON. Raises EnvelopeError when malformed.

        `json_limits` hold for the envelope and for the payload inside its `body` alike. `credentials` are the
        transport's own headers (lower-cased): the envelope's inner headers never authenticate.
        """
        limits = json_limits or self.json_limits
        envelope = envelope_from(raw) if isinstance(raw, Mapping) else parse_envelope(raw, limits)
        static = self._static_envelopes.get(envelope.topic)
        if static is not None and (self.guard is None or not self.guard.security.well_known):
            return static
        invocation = Invocation(envelope.topic, lowered(envelope.headers), envelope.body, json_limits=limits,
                                credentials=credentials or NO_HEADERS)  # fmt: skip
        return response_envelope_bytes(await self.invoke(invocation))

    async def check_health(self) -> HealthReport:
        return await self.health.run() if self.health is not None else HealthReport({})

    def _encode(self, result: Result[Any], registration: Registration | None, topic: str) -> Outcome:
        """The payload's JSON text for every transport alike; which answers carry no body is HTTP's business. The
        pipeline encodes a handler's success itself; this encodes what a middleware answered instead."""
        version = registration.version if registration is not None else ""
        fixed = registration.answer_headers if registration is not None else ()
        if not result.is_successful:
            return Outcome(result, orjson.dumps(result.failure_body()), version, fixed)
        payload = result.payload
        if payload is None and result.status in st.PAYLOAD_OPTIONAL:
            return Outcome(result, b"", version, fixed)
        encode = self._encoders.get(id(registration)) or self._encoder(registration)
        try:
            body = orjson.dumps(encode(payload), default=float_subclass)
        except Exception as exc:
            logger.error("response of %s does not encode: %s", topic, type(exc).__name__)
            failure = Result.unexpected_error(f"{topic} produced a response that could not be encoded")
            return Outcome(failure, orjson.dumps(failure.failure_body()), version, fixed)
        return Outcome(result, body, version, fixed)

    def _encoder(self, registration: Registration | None) -> Callable[[Any], Any]:
        """The response encoder of a registration, looked up once (by `id`: it lives as long as the registry)."""
        encode = codec_for(registration.response_type if registration is not None else Any).encode
        self._encoders[id(registration)] = encode
        return encode

    async def _answer_mesh(self) -> Outcome:
        return self._mesh_answer

    async def _answer_spec(self) -> Outcome:
        return self._spec_answer

    async def _answer_health(self) -> Outcome:
        report = await self.check_health()
        if report.is_healthy:
            document = report.document()
            return Outcome(Result.ok(document), orjson.dumps(document))
        failure = Result.service_unavailable(f"unhealthy: {', '.join(report.failing)}")
        return Outcome(failure, orjson.dumps(failure.failure_body()))


async def _close_scope(context: Context) -> None:
    try:
        await context.scope.close()
    except Exception:
        logger.exception("closing the dependency scope of %s failed", context.topic)
