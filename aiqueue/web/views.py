"""Pure view helpers for /ai-queue: formatting, the table, paging links (the chart: chart.py).

No I/O here: the page handlers fetch, these turn values into what the
templates print, and the tests import them directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit
from uuid import UUID

from aiqueue.models import Attempt, PageCursor, QueueRow
from aiqueue.wire.reads import CircuitState, OpenAlert, Stats

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


def fmt_time(value: datetime | None) -> str:
    """A timestamp in UTC, to the second."""
    if value is None:
        return DASH
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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
    # Flow control (CONTRACT §8a): the learned limit L and the budget window.
    limit: str = "-"
    # (label, value) per declared budget: ("Tokens, last 60 s", "1,200 / 10,000").
    budget: tuple[tuple[str, str], ...] = ()
    # CONTRACT §9d: pending rows not due yet, expired rows, and the open alerts' sentences.
    scheduled: int = 0
    expired: int = 0
    alerts: tuple[str, ...] = ()


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
    )


_ALERT_WORDS = {
    "backlog_age": "the oldest due row has waited {value} (threshold {threshold})",
    "stalled": "rows are due but nothing has been dispatched for {value} (threshold {threshold})",
    "failure_spike": "{value} of the rows that ended in the last 15 min failed "
                     "(threshold {threshold})",
}


def alert_text(alert: OpenAlert, now: datetime) -> str:
    """'Alert stalled (pool default) open for 3m 2s: rows are due but …'."""
    name = alert.alert
    fmt = (lambda v: f"{v:.0%}") if name == "failure_spike" else fmt_age
    words = _ALERT_WORDS.get(name, "{value} (threshold {threshold})").format(
        value=fmt(alert.value), threshold=fmt(alert.threshold))
    since = fmt_age((now - alert.opened_at).total_seconds())
    return f"Alert {name} (pool {alert.pool}) open for {since}: {words}."


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


# -- the queue table --------------------------------------------------------


@dataclass(frozen=True)
class TableRow:
    """One queue row as the table prints it: identifiers, status, timings, error code."""

    queue_id: str
    submission_id: str
    assignment_id: str
    group: str
    kind: str
    status: str
    attempts: str
    age: str
    processing: str
    last_error: str
    can_retry: bool
    can_cancel: bool
    # A pending row paused at a spend cap (CONTRACT §9c): 'paused: budget until 14:00 UTC'.
    waiting: str = ""
    # "scheduled for …" while a pending row waits for its not_before (CONTRACT §9d).
    scheduled: str = ""


def waiting_text(row: QueueRow) -> str:
    """Why a pending row is not dispatched yet, in words ('' when nothing holds it)."""
    if row.resumes_at is None:
        return ""
    return f"paused: budget until {row.resumes_at.astimezone(UTC):%H:%M} UTC"


def processing_seconds(row: QueueRow, now: datetime) -> float | None:
    """Dispatch to end for finished rows, dispatch to now while processing."""
    if row.started_at is None:
        return None
    if row.status == "processing":
        return (now - row.started_at).total_seconds()
    if row.status in ("completed", "failed") and row.finished_at is not None:
        return (row.finished_at - row.started_at).total_seconds()
    return None


def table_row(row: QueueRow, now: datetime, max_attempts: int) -> TableRow:
    return TableRow(
        queue_id=str(row.queue_id),
        submission_id=str(row.submission_id),
        assignment_id=row.assignment_id,
        group=row.group_key,
        kind=row.kind,
        status=row.status,
        attempts=f"{row.attempts}/{max_attempts}",
        age=fmt_age((now - row.created_at).total_seconds()),
        processing=fmt_duration(processing_seconds(row, now)),
        last_error=row.last_error or "",
        can_retry=row.status == "failed",
        can_cancel=row.status == "pending",
        waiting=waiting_text(row),
        scheduled=fmt_scheduled(row.scheduled_for(now)),
    )


@dataclass(frozen=True)
class PoolRow:
    """One pool as the page's pools card prints it (CONTRACT §9b)."""

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


def fmt_scheduled(at: datetime | None) -> str:
    return f"scheduled for {fmt_time(at)}" if at else ""


def row_times(row: QueueRow) -> dict[str, str]:
    """The row's timestamps, formatted, for the detail page."""
    return {"created": fmt_time(row.created_at), "updated": fmt_time(row.updated_at),
            "started": fmt_time(row.started_at), "finished": fmt_time(row.finished_at)}


@dataclass(frozen=True)
class HistoryEntry:
    """One line of a row's history: a dispatch and how it ended, or an operator action."""

    kind: str
    attempt: str
    started: str
    ended: str
    outcome: str
    duration: str
    error: str
    model: str
    tokens: str
    actor: str
    ref: str
    # What the platform said about the invocation (CONTRACT §8e), or "".
    platform: str = ""


# The attempt's `platform` note, as the history shows it.
PLATFORM_SAID = {
    "still_running": "still running (no activation record yet)",
    "applied_from_activation": "applied from the activation",
    "activation_failed": "activation failed",
    "timed_out": "timed out",
    "lookup_failed": "platform not reachable; asking again",
}


def history_entry(a: Attempt) -> HistoryEntry:
    """Format an attempt; of its usage only the model name and token counts are shown."""
    usage = a.usage or {}
    model = usage.get("model")
    counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens")]
    tokens = " + ".join(str(c) for c in counts if isinstance(c, int)) if any(
        isinstance(c, int) for c in counts) else ""
    total = usage.get("total_tokens")
    if not tokens and isinstance(total, int):
        tokens = str(total)
    if a.kind == "action":
        outcome = a.outcome or ""
    else:
        outcome = a.outcome or ("in flight" if a.ended_at is None else "")
    duration = (a.ended_at - a.started_at).total_seconds() if a.ended_at else None
    return HistoryEntry(
        kind=a.kind,
        attempt=str(a.attempt) if a.kind == "dispatch" else "",
        started=fmt_time(a.started_at),
        ended=fmt_time(a.ended_at) if a.kind == "dispatch" else "",
        outcome=outcome,
        duration=fmt_duration(duration) if a.kind == "dispatch" else "",
        error=a.error or "",
        model=model[:100] if isinstance(model, str) else "",
        tokens=tokens,
        actor=a.actor or "",
        ref=a.dispatch_ref or "",
        platform=PLATFORM_SAID.get(a.platform or "", ""),
    )


# -- keyset paging ----------------------------------------------------------


def encode_cursor(row: QueueRow) -> str:
    """A row's position in newest-first order, for ?after= / ?before=."""
    # Exact microseconds, not the float: the cursor must compare equal to the row.
    delta = row.created_at - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{micros}_{row.queue_id}"


def decode_cursor(value: str | None) -> Cursor | None:
    """The (created_at, queue_id) of a cursor, or None when absent or malformed."""
    if not value or len(value) > 80:
        return None
    micros, _, queue_id = value.partition("_")
    try:
        at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(micros))
        return at, UUID(queue_id)
    except (ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class Paging:
    """Links to the newest page, the newer page and the older page (None: no such page)."""

    newest: str | None
    newer: str | None
    older: str | None


def page_url(path: str, params: Mapping[str, str | None]) -> str:
    """`path` with the non-empty params as a query string."""
    kept = {k: v for k, v in params.items() if v}
    return f"{path}?{urlencode(kept)}" if kept else path


def with_params(url: str, params: Mapping[str, str]) -> str:
    """`url` with `params` set (replacing any notice of an earlier action)."""
    parts = urlsplit(url)
    drop = {"notice", "n", "row", *params}
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in drop]
    query = urlencode([*kept, *((k, v) for k, v in params.items() if v)])
    return f"{parts.path}?{query}" if query else parts.path


def paging(
    path: str,
    filters: Mapping[str, str | None],
    rows: Sequence[QueueRow],
    *,
    has_newer: bool,
    has_older: bool,
) -> Paging:
    """Keyset links around the rows shown (newest first)."""
    if not rows:
        return Paging(newest=page_url(path, filters) if has_newer else None, newer=None,
                      older=None)
    newer = page_url(path, {**filters, "before": encode_cursor(rows[0])}) if has_newer else None
    older = page_url(path, {**filters, "after": encode_cursor(rows[-1])}) if has_older else None
    return Paging(newest=page_url(path, filters) if has_newer else None, newer=newer,
                  older=older)


# -- notices after an action --------------------------------------------------

_NOTICES = {
    "retried": "Row {id} is pending again with fresh attempts.",
    "not_failed": "Row {id} is not failed any more; nothing to retry.",
    "retried_all": "{n} failed row(s) are pending again.",
    "cancelled": "Row {id} is cancelled.",
    "not_pending": "Row {id} is not pending; nothing to cancel.",
    "cancelled_all": "{n} pending row(s) cancelled.",
    "paused": "Dispatch paused. Rows stay pending until you resume.",
    "resumed": "Dispatch resumed.",
    "missing_assignment": "Name an assignment to cancel its pending rows.",
    "missing": "That row no longer exists.",
    "accepted": "Row {id}'s result is accepted.",
    "reverted": "Row {id}'s result is reverted: the submission has its earlier mark again.",
    "superseded": "Row {id} was not reverted: a later result has been applied since.",
    "not_completed": "Row {id} has no applied result to review (or it was reverted).",
}


def notice_text(code: str | None, *, n: str | None = None, row: str | None = None) -> str | None:
    """The sentence for a notice code in the redirect after an action."""
    template = _NOTICES.get(code or "")
    if template is None:
        return None
    count = n if n and n.isdigit() else "0"
    short = (row or "")[:8] if row and all(c in "0123456789abcdef-" for c in row) else "?"
    return template.format(n=count, id=short)
