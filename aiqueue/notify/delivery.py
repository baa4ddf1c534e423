"""Notifications to the host app (docs/integrating.md): deliver the outbox's events, signed.

The events themselves are written in the transaction of the status change that
causes them, by the function that makes it (db/sql/functions/90_outbox.sql,
aiqueue_outbox_moved).  Here
they are sent: a few per step, after a response has been sent (webhook,
enqueue, process, cancel) and by the chain, the cron and the in-process
ticker.  Each attempt is signed per Standard Webhooks v1 with the
`standardwebhooks` package; the event's id is its `webhook-id` on every retry,
and a fresh `webhook-timestamp` is signed each time (receivers refuse old ones).
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
from standardwebhooks.webhooks import Webhook

from aiqueue import logs
from aiqueue.errors import StoreError
from aiqueue.models import Delivery, OutboxEntry
from aiqueue.ports import DeliveryStore
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings

# Events one step sends at most (at once): a step stays short and bounded.
BATCH = 5
# Backoff: base·5^(n-1) after the n-th failed attempt, at most 6 h apart;
# with the default base of 5 s: 5 s, 25 s, ~2 min, ~10 min, ~52 min, ~4.3 h,
# then every 6 h, and one last try when the 24 h window ends.
GROWTH, MAX_DELAY = 5.0, 6 * 3600.0
# Pruning the outbox: at most once a minute per instance.
PRUNE_EVERY = 60.0


@dataclass
class Pruning:
    """This instance's outbox pruning timer (kept in Runtime.own)."""

    # event-loop time when this instance next prunes the notification outbox
    due: float = 0.0


def retry_delay(attempt: int, base: float, rand: float | None = None) -> float:
    """Seconds after failed attempt `attempt` (1-based) before the next, ±10 % jitter."""
    if base <= 0:
        return 0.0
    raw = base * GROWTH ** min(max(attempt - 1, 0), 20)
    jitter = 0.9 + 0.2 * (random.random() if rand is None else rand)
    return float(min(raw * jitter, MAX_DELAY))


def lease_seconds(settings: Settings) -> float:
    """How long a claimed attempt stays with its instance: well past its HTTP deadline."""
    return 2 * settings.notify_timeout_seconds + 2.0


def enabled(settings: Settings) -> bool:
    return settings.notify_url is not None and settings.notify_secret is not None


def signed_headers(hook: Webhook, event_id: str, body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks v1 headers of one attempt (the library signs)."""
    return {
        "content-type": "application/json",
        "user-agent": "aiqueue-notify/1",
        "webhook-id": event_id,
        "webhook-timestamp": str(math.floor(now.timestamp())),
        "webhook-signature": hook.sign(event_id, now, body),
    }


async def deliver_due(rt: Runtime[DeliveryStore], *, limit: int = BATCH) -> int:
    """Send up to `limit` due events at once; how many were attempted."""
    s = rt.settings
    await _prune_now_and_then(rt)
    if not enabled(s):
        return 0
    batch = await rt.store.claim_deliveries(limit, lease_seconds(s))
    if batch:
        hook = Webhook(s.notify_secret or "")
        await asyncio.gather(*(_attempt(rt, hook, d) for d in batch))
    return len(batch)


async def deliver_safely(rt: Runtime[DeliveryStore]) -> None:
    """deliver_due after a response or a step: errors are logged, never raised."""
    try:
        await deliver_due(rt)
    except Exception as exc:
        # Runs where nobody could catch it; the next step tries again.
        logs.event("notify_error", code=exc.code if isinstance(exc, StoreError)
                   else type(exc).__name__)


async def _attempt(rt: Runtime[DeliveryStore], hook: Webhook, d: Delivery) -> None:
    """POST one event and record the outcome (content-free: a status or an error code)."""
    s = rt.settings
    assert s.notify_url is not None
    headers = signed_headers(hook, str(d.event_id), d.body, datetime.now(UTC))
    status: int | None = None
    try:
        # A hard deadline for the whole exchange: a receiver that trickles its
        # answer must not outlive the claim's lease.
        async with asyncio.timeout(s.notify_timeout_seconds):
            response = await rt.http.post(s.notify_url, content=d.body.encode(),
                                          headers=headers, timeout=s.notify_timeout_seconds)
        status = response.status_code
        outcome = str(status)
    except (httpx.HTTPError, TimeoutError) as exc:
        outcome = "timeout" if isinstance(exc, TimeoutError | httpx.TimeoutException) \
            else type(exc).__name__
    if status is not None and 200 <= status < 300:
        await rt.store.delivery_succeeded(d.event_id, outcome)
        state: str | None = "delivered"
    else:
        state = await rt.store.delivery_failed(
            d.event_id, d.attempt, outcome,
            delay=retry_delay(d.attempt, s.notify_retry_base_seconds),
            window=s.notify_give_up_seconds, stop=status == 410)
    logs.event("notify", event_id=d.event_id, event_type=d.type, attempt=d.attempt,
               outcome=outcome, status=state or "superseded")


async def _prune_now_and_then(rt: Runtime[DeliveryStore]) -> None:
    """Drop old delivered, given-up and undeliverable events, at most once a minute."""
    now = asyncio.get_running_loop().time()
    timer = rt.own(Pruning)
    if now < timer.due:
        return
    timer.due = now + PRUNE_EVERY
    s = rt.settings
    n = await rt.store.prune_outbox(s.prune_after_days * 86400, s.notify_give_up_seconds)
    if n:
        logs.event("notify_prune", pruned=n)


async def next_due(rt: Runtime[DeliveryStore]) -> float | None:
    """Seconds until an event is due (for the ticker's sleep); None when there is none."""
    if not enabled(rt.settings):
        return None
    return await rt.store.next_delivery_due()


async def panel(rt: Runtime[DeliveryStore], limit: int = 20) -> list[OutboxEntry]:
    """Events waiting or given up, newest first, for /ai-queue."""
    return await rt.store.outbox_entries(limit)
