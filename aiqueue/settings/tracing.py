"""OpenTelemetry traces (docs/tracing.md): the standard `OTEL_*` variables, read once.

Tracing is on when an OTLP endpoint is set, and the SDK is not disabled
(`OTEL_SDK_DISABLED=true`) nor its trace exporter turned off
(`OTEL_TRACES_EXPORTER=none`).  Off, nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from aiqueue.errors import SettingsError
from aiqueue.settings.env import env_int, env_url

SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on",
            "parentbased_always_off", "parentbased_traceidratio")


@dataclass(frozen=True)
class Tracing:
    """Where spans go and how they are named and sampled."""

    # The full traces URL (…/v1/traces).
    endpoint: str
    service_name: str = "aiqueue"
    # OTEL_RESOURCE_ATTRIBUTES as key=value pairs.
    resource: tuple[tuple[str, str], ...] = ()
    sampler: str = "parentbased_always_on"
    ratio: float = 1.0
    # The collector's headers (an API key): a secret, never shown.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Batches (tracing/export.py): a batch leaves when this many spans wait, or this many
    # seconds after its first; at most `queued` wait; one is tried for `timeout` seconds.
    batch: int = 512
    delay: float = 5.0
    queued: int = 8192
    timeout: float = 30.0
    # OTEL_EXPORTER_OTLP_COMPRESSION=gzip
    gzip: bool = False


def env_tracing(env: Mapping[str, str], name: str) -> Tracing | None:
    """an http(s) URL; the sampler one of OpenTelemetry's names"""
    traces_url = env_url(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = env_url(env, name)
    off = (env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
           or env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none")
    if off or (traces_url is None and base is None):
        return None
    # The signal's own endpoint is used as it is; the base one gets the signal's path.
    endpoint = traces_url or f"{str(base).rstrip('/')}/v1/traces"
    sampler = env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    if sampler not in SAMPLERS:
        raise SettingsError(f"OTEL_TRACES_SAMPLER must be one of {', '.join(SAMPLERS)}, "
                            f"got {sampler!r}")
    return Tracing(
        endpoint=endpoint,
        service_name=env.get("OTEL_SERVICE_NAME", "").strip() or "aiqueue",
        resource=_pairs(env, "OTEL_RESOURCE_ATTRIBUTES"),
        sampler=sampler,
        ratio=_ratio(env, "OTEL_TRACES_SAMPLER_ARG") if "ratio" in sampler else 1.0,
        headers=_pairs(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        or _pairs(env, "OTEL_EXPORTER_OTLP_HEADERS"),
        # The SDK's batching variables, as it reads them (milliseconds).
        batch=env_int(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1),
        delay=env_int(env, "OTEL_BSP_SCHEDULE_DELAY", 5000, 0) / 1000,
        queued=env_int(env, "OTEL_BSP_MAX_QUEUE_SIZE", 8192, 1),
        timeout=env_int(env, "OTEL_BSP_EXPORT_TIMEOUT", 30000, 1) / 1000,
        gzip=_compression(env),
    )


def _compression(env: Mapping[str, str]) -> bool:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"):
        raw = env.get(name, "").strip().lower()
        if raw:
            if raw not in ("gzip", "none"):
                raise SettingsError(f"{name} must be gzip or none, got {raw!r}")
            return raw == "gzip"
    return False


def _pairs(env: Mapping[str, str], name: str) -> tuple[tuple[str, str], ...]:
    """`k=v,k2=v2` (values URL-encoded, as the OpenTelemetry spec writes them)."""
    pairs = []
    for part in env.get(name, "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{name} must be key=value pairs separated by commas")
        pairs.append((unquote(key.strip()), unquote(value.strip())))
    return tuple(pairs)


def _ratio(env: Mapping[str, str], name: str) -> float:
    raw = env.get(name, "").strip()
    try:
        ratio = float(raw) if raw else 1.0
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise SettingsError(f"{name} must be a number from 0 to 1, got {raw!r}")
    return ratio
