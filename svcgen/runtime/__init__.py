"""The svcgen runtime: the one public namespace generated services, handlers and wiring import.

`__all__` is the whole supported API; every `_`-prefixed module below it is private and may change
without notice. `API_LEVEL` rises when generated code needs something this namespace did not offer
before; a generated package checks it at import (docs/runtime.md, "API level").
"""

from ._assembly import ServiceDefinition, ServiceOptions
from ._clients import ClientCall, ClientsBase
from ._codec import Codec, DecodeError, codec_for
from ._context import Context
from ._credentials import ApiKey, BearerToken
from ._deadline import deadline
from ._dependencies import Dependencies, DependencyError, Scope
from ._deprecation import Deprecation
from ._descriptor import Identity, ProducedTopic
from ._events import (
    Delivered,
    Delivery,
    DeliveryInfo,
    EventBroker,
    EventBus,
    EventHandler,
    EventsError,
    EventSpec,
    Retention,
    Subscription,
    Subscriptions,
    Verdict,
)
from ._health import HealthCheck, HealthCheckResult, HealthChecks
from ._http.app import AppOptions, HttpApp, create_app
from ._http.cors import Cors
from ._http.limits import Limits
from ._http.routing import Route
from ._http.sender import HttpSender
from ._idempotency import IdempotencyStore, MemoryIdempotencyStore, PostgresIdempotencyStore
from ._jsonlimits import JsonLimits
from ._mesh.host import MeshHost, MeshSettings
from ._mesh.profile import declare_profile, self_check
from ._mesh.tracecontext import TraceContext, current_trace, propagation_headers
from ._meta import Meta
from ._nats.events import JetStreamBroker
from ._nats.requester import NatsSender
from ._nats.responder import NatsBinding
from ._pipeline import Middleware, Next
from ._registry import Handler, HandlerBindingError, Registry, RegistryError, TopicKey
from ._result import Result
from ._retry import Retry, RetryingSender
from ._security import ApiKeyScheme, Guard, JwtScheme, Principal, Security, SecurityError
from ._service import Service
from ._version import API_LEVEL, RuntimeMismatch, require_api_level
from ._wiring import Sender, Wiring, WiringError, open_sender, target_variable

__all__ = [
    "API_LEVEL",
    "ApiKey",
    "ApiKeyScheme",
    "AppOptions",
    "BearerToken",
    "ClientCall",
    "ClientsBase",
    "Codec",
    "Context",
    "Cors",
    "DecodeError",
    "Delivered",
    "Delivery",
    "DeliveryInfo",
    "Dependencies",
    "DependencyError",
    "Deprecation",
    "EventBroker",
    "EventBus",
    "EventHandler",
    "EventSpec",
    "EventsError",
    "Guard",
    "Handler",
    "HandlerBindingError",
    "HealthCheck",
    "HealthCheckResult",
    "HealthChecks",
    "HttpApp",
    "HttpSender",
    "IdempotencyStore",
    "Identity",
    "JetStreamBroker",
    "JsonLimits",
    "JwtScheme",
    "Limits",
    "MemoryIdempotencyStore",
    "MeshHost",
    "MeshSettings",
    "Meta",
    "Middleware",
    "NatsBinding",
    "NatsSender",
    "Next",
    "PostgresIdempotencyStore",
    "Principal",
    "ProducedTopic",
    "Registry",
    "RegistryError",
    "Result",
    "Retention",
    "Retry",
    "RetryingSender",
    "Route",
    "RuntimeMismatch",
    "Scope",
    "Security",
    "SecurityError",
    "Sender",
    "Service",
    "ServiceDefinition",
    "ServiceOptions",
    "Subscription",
    "Subscriptions",
    "TopicKey",
    "TraceContext",
    "Verdict",
    "Wiring",
    "WiringError",
    "codec_for",
    "create_app",
    "current_trace",
    "deadline",
    "declare_profile",
    "open_sender",
    "propagation_headers",
    "require_api_level",
    "self_check",
    "target_variable",
]
