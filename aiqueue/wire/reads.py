"""What readers are answered: stats, usage, health and the doctor's report."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import ConfigDict, Field

from aiqueue.wire.base import Wire
from aiqueue.wire.fields import (
    AlertName,
    Circuit,
    Count,
    KindName,
    Seconds,
    SpendCap,
    Time,
    UsageBy,
    Usd,
    described,
)


class CircuitState(Wire):
    state: Circuit
    consecutive_failures: Count
    next_probe_at: Time | None


class OpenAlert(Wire):
    """An alert that is open now."""

    alert: AlertName
    pool: str
    kind: str | None
    value: float
    threshold: float
    opened_at: Time


class NearCap(Wire):
    """A group (or, group null, a pool) whose spend is at 80 % of a cap or more."""

    cap: SpendCap
    pool: str
    group: str | None
    spent_usd: Usd
    limit_usd: Usd
    window_ends_at: Time


class KindStats(Wire):
    pool: KindName
    max_in_flight: Count | None
    pending: Count
    processing: Count
    completed: Count
    failed: Count
    cancelled: Count
    expired: Count = 0
    on_fallback: KindName | None = described(
        "the kind whose function takes this kind's due rows now (its pool is down)",
        default=None)


class Refusals(Wire):
    rate_limited: Count
    overloaded: Count


class PoolStats(Wire):
    kinds: list[KindName]
    max_in_flight: Count
    in_flight: Count
    in_flight_limit: int = Field(ge=0)
    hold_until: Time | None
    circuit: Circuit
    refusals: Refusals
    tokens_in_window: Count | None
    requests_in_window: Count | None
    tokens_per_minute: Count | None
    requests_per_minute: Count | None


class Stats(Wire):
    """The queue's counts, times and flow control; the page formats the same value."""

    pending: Count
    processing: Count
    completed: Count
    failed: Count
    failed_today: Count
    completed_today: Count
    avg_processing_seconds: Seconds
    p95_processing_seconds: Seconds
    oldest_pending_seconds: Seconds
    # flow control: the learned in-flight limit, the hold after a refusal, and the
    # declared budgets with what the current window has used (null while none is declared).
    in_flight_limit: int = Field(ge=0)
    hold_until: Time | None
    tokens_in_window: Count | None
    requests_in_window: Count | None
    tokens_per_minute: Count | None
    requests_per_minute: Count | None
    budget_window_seconds: float = Field(ge=0)
    cancelled: Count = 0
    expired: Count = 0
    scheduled: Count = described("pending rows not due before their not_before", default=0)
    alerts: list[OpenAlert] = []
    near_caps: list[NearCap] = described("spend at 80 % of a cap or more, nearest first",
                                         default=[])
    max_in_flight: Count = 0
    paused: bool = False
    circuit: CircuitState | None = None
    busy_until: Time | None = None
    kinds: dict[str, KindStats] = described("rows by task kind", default={})
    pools: dict[str, PoolStats] = described(
        "each pool's limits and flow control; the top-level flow fields are the `default` "
        "pool's", default={})


class UsageTotal(Wire):
    jobs: Count
    prompt_tokens: Count
    completion_tokens: Count
    cost_usd: Usd | None
    unpriced_jobs: Count
    avg_processing_seconds: Seconds
    p95_processing_seconds: Seconds
    # The provider's prompt cache: input tokens read from and written
    # to it, and what it saved (input tokens, then USD when priced).
    cache_read_tokens: Count = 0
    cache_write_tokens: Count = 0
    cache_saved_tokens: int = 0
    cache_saved_usd: float | None = None


class UsageLine(UsageTotal):
    key: str


class UsageReport(Wire):
    items: list[UsageLine]
    total: UsageTotal
    since: date | None = None
    until: date | None = None
    by: UsageBy | None = None


class SchemaVersions(Wire):
    expected: Count
    found: Count | None


class Health(Wire):
    """Without the bearer only `{"status": "ok"}` (no database connection); with it also
    `database` and `schema`, and a 503 while the database does not answer or its
    schema is behind."""

    # `schema` would shadow BaseModel's own attribute: the field is schema_, sent as schema.
    model_config = ConfigDict(serialize_by_alias=True, validate_by_alias=True,
                              validate_by_name=True)

    status: Literal["ok", "unavailable", "schema_behind"]
    database: bool = False
    schema_: SchemaVersions | None = Field(default=None, alias="schema")
    error: Literal["schema_behind"] = "schema_behind"
    detail: str = ""
    expected: Count = 0
    found: Count = 0


class DoctorCheck(Wire):
    """One check. `warn`: worth fixing, nothing broken (the report stays ok); a failure's or a
    warning's `fix` says what to do."""

    name: str
    status: Literal["pass", "warn", "fail", "skip"]
    detail: str
    fix: str | None


class DoctorReport(Wire):
    """The report of `python -m aiqueue doctor --json`: `ok` unless a check failed
    (warnings keep it ok)."""

    ok: bool
    checks: list[DoctorCheck]
