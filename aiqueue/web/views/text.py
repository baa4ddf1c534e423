"""Values in words for /ai-queue: times, durations, the stats header, the pools card."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from aiqueue.models import PageCursor
from aiqueue.settings.calendar import UTC_NAME, local
from aiqueue.wire.reads import CircuitState, NearCap, OpenAlert, Stats

DASH = "—"
Cursor = PageCursor


def fmt_age(seconds: float | None) -> str:
    """How long ago / how old, in at most two units: '42s', '3m 4s', '2h 5m', '3d 4h'."""
    if seconds is None:
        return DASH
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def fmt_duration(seconds: float | None) -> str:
    """A processing time: '850 ms', '12.3 s', '2m 05s', '1h 02m'."""
    if seconds is None:
        return DASH
    s = max(0.0, seconds)
    if round(s * 1000) < 1000:
        return f"{round(s * 1000)} ms"
    if s < 60:
        return f"{s:.1f} s"
    whole = round(s)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


# Where the pages' times are shown (QUEUE_TIMEZONE): set per request by the app
# (web/app.py's DisplayZone), so these pure helpers need no settings.
DISPLAY_ZONE: ContextVar[str] = ContextVar("display_zone", default=UTC_NAME)


def shown(value: datetime) -> datetime:
    """`value` on the wall clock where the pages' times are shown."""
    return local(value, DISPLAY_ZONE.get())


def fmt_time(value: datetime | None) -> str:
    """A timestamp where the school is (QUEUE_TIMEZONE), to the second, with its zone."""
    if value is None:
        return DASH
    return shown(value).strftime("%Y-%m-%d %H:%M:%S %Z")


def fmt_in_flight(processing: int, cap: int) -> str:
    """'1 / 1 in flight'; a cap of 0 means unlimited."""
    return f"{processing} / {cap if cap > 0 else '∞'} in flight"


# -- the stats header -------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """The stats header, already formatted."""

    in_flight: str
    pending: int
    processing: int
    failed: int
    failed_today: int
    completed_today: int
    avg: str
    p95: str
    oldest_pending: str
    paused: bool
    paused_text: str | None
    circuit_state: str
    circuit_text: str | None
    busy_text: str | None
    # Flow control (docs/concepts.md): the learned limit L and the budget window.
    limit: str = "-"
    # (label, value) per declared budget: ("Tokens, last 60 s", "1,200 / 10,000").
    budget: tuple[tuple[str, str], ...] = ()
    #: pending rows not due yet, expired rows, and the open alerts' sentences.
    scheduled: int = 0
    expired: int = 0
    alerts: tuple[str, ...] = ()
    #: the groups near a spend cap, and the kinds running on their fallback.
    near_caps: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()
    # Where "today" is the day (QUEUE_TIMEZONE): the school's.
    zone: str = UTC_NAME


def header(
    stats: Stats, now: datetime, *, paused_by: str | None = None,
    paused_at: datetime | None = None,
) -> Header:
    """Format the stats (reads/stats.py, the JSON twin's same value) for the page."""
    paused_text = None
    if stats.paused:
        who = f" by {paused_by}" if paused_by else ""
        when = f" at {fmt_time(paused_at)}" if paused_at else ""
        paused_text = f"Dispatch paused{who}{when}."
    circuit = stats.circuit or CircuitState(state="closed", consecutive_failures=0,
                                            next_probe_at=None)
    return Header(
        in_flight=fmt_in_flight(stats.processing, stats.max_in_flight),
        pending=stats.pending,
        processing=stats.processing,
        failed=stats.failed,
        failed_today=stats.failed_today,
        completed_today=stats.completed_today,
        zone=DISPLAY_ZONE.get(),
        avg=fmt_duration(stats.avg_processing_seconds),
        p95=fmt_duration(stats.p95_processing_seconds),
        oldest_pending=fmt_age(stats.oldest_pending_seconds),
        paused=stats.paused,
        paused_text=paused_text,
        circuit_state=circuit.state,
        circuit_text=circuit_text(circuit, now),
        busy_text=_busy_text(stats.hold_until or stats.busy_until, now),
        limit=fmt_limit(stats.in_flight_limit, stats.max_in_flight),
        budget=fmt_budget(stats),
        scheduled=stats.scheduled,
        expired=stats.expired,
        alerts=tuple(alert_text(a, now) for a in stats.alerts),
        near_caps=tuple(near_cap_text(n) for n in stats.near_caps),
        fallbacks=tuple(f"Kind {name} is running on its fallback, {k.on_fallback}: its pool "
                        f"{k.pool} is down." for name, k in stats.kinds.items() if k.on_fallback),
    )


def near_cap_text(near: NearCap) -> str:
    """'Group teacher-7 (pool default) has spent $0.46 of its $0.50 group_usd_per_hour (92 %)
    until 14:00.'"""
    who = f"Group {near.group}" if near.group else "The pool"
    share = near.spent_usd / near.limit_usd if near.limit_usd else 0.0
    return (f"{who} (pool {near.pool}) has spent ${near.spent_usd:,.2f} of its "
            f"${near.limit_usd:,.2f} {near.cap} ({share:.0%}) until "
            f"{fmt_time(near.window_ends_at)}.")


_ALERT_WORDS = {
    "backlog_age": "the oldest due row has waited {value} (threshold {threshold})",
    "stalled": "rows are due but nothing has been dispatched for {value} (threshold {threshold})",
    "failure_spike": "{value} of the rows that ended in the last 15 min failed "
                     "(threshold {threshold})",
    "latency": "the p95 processing time of the last 15 min is {value} "
               "(threshold {threshold})",
    "drift": "a canary's agreement with the teachers fell by {value} against the last "
             "passing canary (threshold {threshold}); new enqueues of the kind are gated",
}


def alert_text(alert: OpenAlert, now: datetime) -> str:
    """'Alert stalled (pool default) open for 3m 2s: rows are due but …'."""
    name = alert.alert
    fmt = (lambda v: f"{v:.0%}") if name == "failure_spike" else \
        (lambda v: f"{v:.2f}") if name == "drift" else fmt_age
    words = _ALERT_WORDS.get(name, "{value} (threshold {threshold})").format(
        value=fmt(alert.value), threshold=fmt(alert.threshold))
    since = fmt_age((now - alert.opened_at).total_seconds())
    where = f"kind {alert.kind}, pool {alert.pool}" if name == "drift" else f"pool {alert.pool}"
    return f"Alert {name} ({where}) open for {since}: {words}."


def fmt_limit(limit: int | None, cap: int) -> str:
    """The learned in-flight limit L against the cap: `3 of 8`, `8 of 8`, `∞`."""
    if limit is None:
        return "-"
    if limit == 0:
        return "∞"
    return f"{limit} of {cap}" if cap > 0 else f"{limit} (cap ∞)"


def fmt_budget(stats: Stats) -> tuple[tuple[str, str], ...]:
    """The budget window's use against each declared budget, as (label, value)."""
    window = stats.budget_window_seconds or 60
    parts = []
    for used, rate, unit in ((stats.tokens_in_window, stats.tokens_per_minute, "Tokens"),
                             (stats.requests_in_window, stats.requests_per_minute, "Requests")):
        if rate:
            allowed = int(rate * window // 60)
            parts.append((f"{unit}, last {window:g} s", f"{used or 0:,} / {allowed:,}"))
    return tuple(parts)


def circuit_text(circuit: CircuitState, now: datetime) -> str | None:
    """A sentence about the breaker when it is not closed, with the next probe time."""
    failures = circuit.consecutive_failures
    if circuit.state == "open":
        probe = circuit.next_probe_at
        when = (f"; next probe at {fmt_time(probe)} (in {fmt_age((probe - now).total_seconds())})"
                if probe else "")
        return f"Circuit open after {failures} failed dispatches in a row{when}."
    if circuit.state == "half_open":
        return f"Circuit half-open after {failures} failed dispatches: the next dispatch probes."
    return None


def _busy_text(until: datetime | None, now: datetime) -> str | None:
    if until is None or until <= now:
        return None
    return (f"The model asked to slow down: every dispatch is held until {fmt_time(until)}"
            f" (in {fmt_age((until - now).total_seconds())}).")


@dataclass(frozen=True)
class PoolRow:
    """One pool as the page's pools card prints it (docs/concepts.md)."""

    pool: str
    kinds: str
    in_flight: str
    hold: str
    circuit: str
    refusals: int


def pool_rows(stats: Stats, now: datetime) -> list[PoolRow]:
    """The stats' pools, formatted; none while there is only the default pool."""
    if len(stats.pools) <= 1:
        return []
    return [PoolRow(
        pool=name, kinds=", ".join(p.kinds) or "—",
        in_flight=f"{p.in_flight} / {fmt_limit(p.in_flight_limit, p.max_in_flight)}",
        hold=_hold(p.hold_until, now), circuit=p.circuit,
        refusals=p.refusals.rate_limited + p.refusals.overloaded,
    ) for name, p in sorted(stats.pools.items())]


def _hold(until: datetime | None, now: datetime) -> str:
    return f"until {fmt_time(until)}" if until is not None and until > now else "—"
