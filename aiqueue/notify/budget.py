"""Budget warnings: a warning before a spend cap runs out, not after.

Each spend cap (docs/concepts.md) of each pool notifies `marking.budget_warning` with
{"cap", "pool", "group", "threshold", "spent_usd", "limit_usd",
"window_ends_at"} when a window's spend passes 80 % of the cap, and again at
95 %: once per cap, group and window (aiqueue_budget_warnings in
db/sql/functions/55_warnings.sql remembers each in the transaction that writes
it to the outbox).  Evaluated with the alerts (notify/alerts.py), by the chain
and by every cron request, and delivered like every other event.
"""

from __future__ import annotations

from datetime import datetime

from aiqueue import logs
from aiqueue.errors import StoreError
from aiqueue.models import NearCap
from aiqueue.ports import AlertStore
from aiqueue.runtime import Runtime


async def warn(rt: Runtime[AlertStore], at: datetime | None = None) -> int:
    """Send the warnings due now (`at` in tests); how many went."""
    try:
        sent = await rt.store.budget_warnings(rt.settings.money.json(), at)
    except StoreError as exc:
        # Warnings never hold the queue back; the next evaluation sends them.
        logs.event("budget_warning_error", code=exc.code)
        return 0
    for cap, pool, _, threshold in sent:
        logs.event("budget_warning", reason=cap, pool=pool, code=f"{threshold:g}")
    return len(sent)


async def near_caps(rt: Runtime[AlertStore]) -> list[NearCap]:
    """The groups (and pools) at 80 % of a spend cap or more now, nearest first."""
    return await rt.store.budget_near(rt.settings.money.json())
