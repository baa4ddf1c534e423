"""The OpenTelemetry SDK's pieces as aiqueue sets them up (docs/tracing.md): the
sampler the OTEL_* variables name and the instance's resource.  Imported only when
tracing is on, with tracing/otel.py."""

from __future__ import annotations

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import sampling

from aiqueue.settings.tracing import Tracing


def sampler(config: Tracing) -> sampling.Sampler:
    """OTEL_TRACES_SAMPLER (and its ratio) as the SDK's sampler."""
    ratio = sampling.TraceIdRatioBased(config.ratio)
    return {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
        "traceidratio": ratio,
        "parentbased_always_on": sampling.ParentBased(sampling.ALWAYS_ON),
        "parentbased_always_off": sampling.ParentBased(sampling.ALWAYS_OFF),
        "parentbased_traceidratio": sampling.ParentBased(ratio),
    }[config.sampler]


class HashedOnce(Resource):
    """The instance's resource, hashed once.

    The SDK's OTLP encoder (used for a batch tracing/otlp.py does not encode) groups
    each batch's spans by resource, and the SDK's Resource.__hash__ dumps every
    attribute to JSON on each call: once per span.  A resource never changes once
    made, so its hash is kept.
    """

    def __init__(self, made: Resource) -> None:
        super().__init__(made.attributes, made.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return other is self or super().__eq__(other)


def instance_resource(config: Tracing) -> HashedOnce:
    """The instance's resource: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME."""
    return HashedOnce(Resource.create({**dict(config.resource),
                                       SERVICE_NAME: config.service_name}))
