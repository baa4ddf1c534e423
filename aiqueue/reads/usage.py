"""The usage report (pricing a result: queue/spend.py; counters: metrics.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any, cast

from aiqueue.errors import Invalid
from aiqueue.models import UsageRow
from aiqueue.runtime import Runtime
from aiqueue.settings.calendar import UTC_NAME, local, zone
from aiqueue.wire import dump
from aiqueue.wire.fields import UsageBy
from aiqueue.wire.reads import UsageLine, UsageReport, UsageTotal

GROUPINGS = ("day", "assignment", "group", "model", "kind", "pool", "lane")
MAX_DAYS = 366


def parse_day(value: str | None, name: str, default: date) -> date:
    if value is None or value == "":
        return default
    try:
        if len(value) != 10:
            raise ValueError
        return date.fromisoformat(value)
    except ValueError:
        raise Invalid(f"{name} must be a date (YYYY-MM-DD)") from None


def usage_range(since: str | None, until: str | None, today: date,
                timezone: str = UTC_NAME) -> tuple[datetime, datetime]:
    """[since 00:00, the day after until) where `timezone` is (QUEUE_TIMEZONE) — both days
    included; default: the last 30 days."""
    end = parse_day(until, "until", today)
    start = parse_day(since, "since", end - timedelta(days=29))
    if start > end:
        raise Invalid("since must not be after until")
    if (end - start).days >= MAX_DAYS:
        raise Invalid(f"the range may span at most {MAX_DAYS} days")
    there = zone(timezone)
    return (datetime.combine(start, time(), there),
            datetime.combine(end + timedelta(days=1), time(), there))


def parse_by(value: str | None) -> UsageBy:
    by = value or "day"
    if by not in GROUPINGS:
        raise Invalid(f"by must be one of {', '.join(GROUPINGS)}")
    return cast(UsageBy, by)


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _usage_fields(row: UsageRow) -> dict[str, Any]:
    cost = row.cost_usd if row.cost_usd is not None or row.jobs > row.unpriced_jobs else None
    if cost is None and row.jobs == 0:
        cost = 0.0
    return {"jobs": row.jobs, "prompt_tokens": row.prompt_tokens,
            "completion_tokens": row.completion_tokens, "cost_usd": _r(cost, 6),
            "unpriced_jobs": row.unpriced_jobs, "avg_processing_seconds": _r(row.avg_seconds, 3),
            "p95_processing_seconds": _r(row.p95_seconds, 3),
            "cache_read_tokens": row.cache_read_tokens,
            "cache_write_tokens": row.cache_write_tokens,
            "cache_saved_tokens": row.cache_saved_tokens,
            "cache_saved_usd": _r(row.cache_saved_usd, 6)}


def usage_total(row: UsageRow) -> UsageTotal:
    """The total of /api/marking/usage (a row without key)."""
    return UsageTotal(**_usage_fields(row))


def usage_item(row: UsageRow, key: str) -> UsageLine:
    """One item of /api/marking/usage: the usage under `key`."""
    return UsageLine(key=key, **_usage_fields(row))


def usage_json(row: UsageRow) -> dict[str, Any]:
    """A usage line as the operator's page reads it."""
    return dump(usage_total(row) if row.key is None else usage_item(row, row.key))


async def report(rt: Runtime, since: str | None, until: str | None, by: str | None
                 ) -> UsageReport:
    """The body of GET /api/marking/usage."""
    tz = rt.settings.timezone
    start, end = usage_range(since, until, local(datetime.now(UTC), tz).date(), tz)
    grouping = parse_by(by)
    rows = await rt.store.usage_report(start, end, grouping, tz)
    items = [usage_item(r, r.key) for r in rows if r.key is not None]
    total = next(usage_total(r) for r in rows if r.key is None)
    last = (end - timedelta(days=1)).date()
    return UsageReport(since=start.date(), until=last, by=grouping, items=items, total=total)


async def cost_summary(rt: Runtime) -> dict[str, Any]:
    """What /ai-queue shows: cost and tokens today (QUEUE_TIMEZONE's day), over 30 days, by
    model and by lane (closed hours from their hourly sums: sql/usage.sql usage_card)."""
    tz = rt.settings.timezone
    today = local(datetime.now(UTC), tz).date()
    start, end = usage_range(None, None, today, tz)
    day_start, _ = usage_range(today.isoformat(), None, today, tz)
    card = await rt.store.usage_card(start, day_start, end,
                                     rt.settings.retain_history_days * 86400)
    return {
        "today": usage_json(card.today),
        "month": usage_json(card.month),
        "by_model": [usage_json(r) for r in card.by_model],
        # Shown only once the overnight lane or a drift canary has marked something.
        "by_lane": [usage_json(r) for r in card.by_lane]
        if any(r.key in ("batch", "canary") for r in card.by_lane) else [],
    }
