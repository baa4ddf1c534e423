"""Deliver result items to the callback URL, with retries and heartbeats while marking."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .backends import Backend
from .core import mark
from .items import Item, progress_item
from .job import safe_id
from .probe import is_probe, probe_item

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a callback."""

    tries: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    timeout: float = 10.0

    def delay(self, failures: int) -> float:
        """Backoff before the next try: base, 2·base, 4·base, … capped."""
        return float(min(self.max_delay, self.base_delay * 2 ** (failures - 1)))


DEFAULT_POLICY = RetryPolicy()
# A lost heartbeat is harmless (the next one or the result follows), so it is never retried.
HEARTBEAT_POLICY = RetryPolicy(tries=1, timeout=5.0)


async def post_items(
    client: httpx.AsyncClient,
    url: str,
    items: list[Item],
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Sleep = asyncio.sleep,
) -> bool:
    """POST `items` as a JSON array; retry network errors, 429 and 5xx; True once a 2xx came."""
    qid = safe_id(items[0].get("queue_id")) if items else "-"
    status = items[0].get("status") if items else "-"
    for attempt in range(1, policy.tries + 1):
        try:
            response = await client.post(url, json=items, timeout=policy.timeout)
        except httpx.HTTPError as exc:
            log.warning(
                "callback try %d/%d failed queue_id=%s status=%s error_type=%s",
                attempt,
                policy.tries,
                qid,
                status,
                type(exc).__name__,
            )
        else:
            code = response.status_code
            if code < 300:
                log.info("callback delivered queue_id=%s status=%s", qid, status)
                return True
            if code < 500 and code != 429:
                # The webhook understood and refused (bad token, bad item): repeating won't help.
                log.warning("callback refused queue_id=%s status=%s http=%d", qid, status, code)
                return False
            log.warning(
                "callback try %d/%d failed queue_id=%s status=%s http=%d",
                attempt,
                policy.tries,
                qid,
                status,
                code,
            )
        if attempt < policy.tries:
            await sleep(policy.delay(attempt))
    log.error("callback gave up queue_id=%s status=%s", qid, status)
    return False


async def mark_and_deliver(
    dispatch: Mapping[str, Any],
    backend: Backend,
    client: httpx.AsyncClient,
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    heartbeat_seconds: float = 30.0,
    sleep: Sleep = asyncio.sleep,
) -> tuple[Item, bool]:
    """Mark, sending progress heartbeats meanwhile, then post the result; (item, delivered).

    A probe is answered at once, without the backend.
    """
    url = str(dispatch["callback_url"])
    if is_probe(dispatch):
        item = probe_item(dispatch)
        log.info("probe queue_id=%s", safe_id(item["queue_id"]))
        return item, await post_items(client, url, [item], policy, sleep)
    queue_id, token = dispatch.get("queue_id"), dispatch.get("callback_token")
    work = asyncio.create_task(mark(dispatch, backend))
    started = time.monotonic()
    try:
        while not work.done():
            await asyncio.wait({work}, timeout=heartbeat_seconds)
            if not work.done():
                elapsed = time.monotonic() - started
                beat = progress_item(queue_id, token, 0, 1, f"marking ({elapsed:.0f} s so far)")
                await post_items(client, url, [beat], HEARTBEAT_POLICY, sleep)
    except asyncio.CancelledError:
        work.cancel()
        raise
    item = work.result()
    return item, await post_items(client, url, [item], policy, sleep)
