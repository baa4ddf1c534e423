"""A webhook batch: each item's token checked before any is applied, then applied once."""

from __future__ import annotations

from aiqueue import logs
from aiqueue.errors import Invalid, StoreError, Unauthorized
from aiqueue.models import Job
from aiqueue.ports import WebhookStore
from aiqueue.queue import probes
from aiqueue.queue.loop import Receipt
from aiqueue.queue.results import ResultItem, apply_item, parse_item, settle_item
from aiqueue.runtime import Runtime
from aiqueue.tokens import Tokens
from aiqueue.wire.requests import MAX_ITEMS

WebhookItem = ResultItem | probes.ProbeAnswer | None


def _parse_webhook_item(raw: object, tokens: Tokens) -> WebhookItem:
    """A probe's answer (its token is a probe token), else a result item; None: rejected."""
    # The usual item carries a callback token: verify it first and once.  It is then
    # no probe token (their salts differ), so the probe check is only for the rest.
    claim = tokens.verify_callback(raw.get("token")) if isinstance(raw, dict) else None
    if claim is None:
        answer = probes.parse_probe(raw, tokens)
        if answer is not None:
            return answer
    if probes.is_probe_item(raw):
        return None  # a probe item without a valid probe token
    return parse_item(raw, tokens, claim)


def verify_results(tokens: Tokens, body: object) -> list[WebhookItem]:
    """Parse a webhook batch and verify each item's token (None: rejected), without I/O.

    Every item is checked before any is applied: a malformed one fails the
    whole batch (422) with nothing changed; a batch with no valid token is 401.
    """
    items = body if isinstance(body, list) else [body]
    if not items:
        raise Invalid("the body must hold at least one item")
    if len(items) > MAX_ITEMS:
        raise Invalid(f"at most {MAX_ITEMS} items per request")
    parsed = [_parse_webhook_item(raw, tokens) for raw in items]
    if not any(parsed):
        logs.event("webhook", accepted=0, ignored=0, rejected=len(parsed))
        raise Unauthorized("no item carries a valid callback token")
    return parsed


async def receive_results(rt: Runtime[WebhookStore], parsed: list[WebhookItem]) -> Receipt:
    """Apply a verified webhook batch (from verify_results)."""
    counts = {"accepted": 0, "ignored": 0, "rejected": 0}
    freed = 0
    settled, next_job = False, None
    for n, item in enumerate(parsed, 1):
        if item is None:
            counts["rejected"] += 1
            continue
        if isinstance(item, probes.ProbeAnswer):
            # No row, no submission: only the waiting doctor hears of it.
            counts["accepted" if await probes.record(rt, item) else "ignored"] += 1
            continue
        applied = None
        if n == len(parsed) and item.status == "completed":
            # The usual callback (one completed item): apply it and claim the
            # next row in one round trip; every other item has been applied.
            applied, next_job, settled = await _settle(rt, item)
        if applied is None:
            applied = await apply_item(rt, item)
        counts["accepted" if applied else "ignored"] += 1
        freed += applied and item.status != "progress"
    logs.event("webhook", **counts)
    return Receipt(counts, freed, settled, next_job)


async def _settle(rt: Runtime[WebhookStore], item: ResultItem
                  ) -> tuple[bool | None, Job | None, bool]:
    """settle_item, once more when it failed: (applied or None, next job, settled).

    The first failure may be a lost answer of a settle that committed; its
    repeat then hands back the row that settle claimed (CONTRACT §9a) rather
    than leave it claimed with no dispatch.  Should the repeat fail too, the
    result is applied alone by the caller and the step after answering claims.
    """
    for tries_left in (1, 0):
        try:
            applied, job = await settle_item(rt, item)
            return applied, job, True
        except StoreError as exc:
            # The claim shares the result's transaction: whatever failed there
            # must not hold the result back.
            logs.event("settle_failed", code=exc.code, queue_id=item.claim.queue_id,
                       reason="will_repeat" if tries_left else "apply_alone")
    return None, None, False
