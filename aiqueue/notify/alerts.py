"""Alerts: backlog age, a stall, a failure spike, slow marking (latency),
opened and resolved once.

The conditions are measured per pool in the database (aiqueue_alert_values in
db/sql/functions/99_alerts.sql; a backlog names the kind of its oldest row, and a pool
held by a refusal or a spend cap is not stalled) and each change is written
to the notification outbox
in the same transaction as the alert's own row (`ai_queue_alerts`), so an
incident gives exactly one `marking.alert_opened` and one
`marking.alert_resolved`, across restarts and instances, delivered and
retried like every other event (notify/delivery.py).

Evaluated by the chain (its housekeeping, at most every EVERY seconds per
instance, so the hot path rarely pays) and by every cron request, so alerts
fire when the chain is dead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from aiqueue import logs
from aiqueue.errors import StoreError
from aiqueue.models import OpenAlert
from aiqueue.notify import budget
from aiqueue.ports import AlertStore
from aiqueue.runtime import Runtime

# At most one evaluation this often per instance, unless forced (the cron).
EVERY = 5.0


@dataclass
class AlertTimer:
    """This instance's alert timer (kept in Runtime.own)."""

    # monotonic time when this instance next evaluates the alerts
    due: float = 0.0


async def evaluate(rt: Runtime[AlertStore], *, force: bool = False) -> list[tuple[str, str]]:
    """Open and resolve alerts now; the changes as (alert, 'opened' | 'resolved')."""
    now = time.monotonic()
    timer = rt.own(AlertTimer)
    if not force and now < timer.due:
        return []
    timer.due = now + EVERY
    s = rt.settings
    try:
        changes = await rt.store.evaluate_alerts(
            backlog=s.alert_backlog_age_seconds, stalled=s.alert_stalled_seconds,
            failures_min=s.alert_failures_min, failure_rate=s.alert_failure_rate,
            p95=s.alert_p95_seconds)
    except StoreError as exc:
        # Alerts never hold the queue back; the next step evaluates again.
        logs.event("alert_error", code=exc.code)
        return []
    for alert, change in changes:
        logs.event("alert", alert=alert, change=change)
    await budget.warn(rt)
    return changes


async def open_alerts(rt: Runtime[AlertStore]) -> list[OpenAlert]:
    """The alerts open now, oldest first (for /ai-queue)."""
    return await rt.store.open_alerts()
