"""A webhook batch: each item's token checked before any is applied, then applied once."""

from __future__ import annotations

from uuid import uuid4

from aiqueue import logs
from aiqueue.errors import Invalid, StoreError, Unauthorized
from aiqueue.models import Job
from aiqueue.ports import WebhookStore
from aiqueue.queue import canary, canary_send, probes
from aiqueue.queue.loop import Receipt
from aiqueue.queue.results import ResultItem, apply_item, parse_item, settle_items
from aiqueue.runtime import Runtime
from aiqueue.tokens import Tokens
from aiqueue.wire.webhook import MAX_ITEMS

WebhookItem = ResultItem | probes.ProbeAnswer | canary_send.CanaryAnswer | None


def _parse_webhook_item(raw: object, tokens: Tokens) -> WebhookItem:
    """A probe's answer (its token is a probe token), else a result item; None: rejected."""
    # The usual item carries a callback token: verify it first and once.  It is then
    # no probe token (their salts differ), so the probe check is only for the rest.
    claim = tokens.verify_callback(raw.get("token")) if isinstance(raw, dict) else None
    if claim is None:
        answer = probes.parse_probe(raw, tokens)
        if answer is not None:
            return answer
        # A canary's answer (docs/canaries.md): never a queue row's result.
        marks = canary_send.parse_answer(raw, tokens)
        if marks is not None:
            return marks
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
    """Apply a verified webhook batch (from verify_results): its completed items settle
    together at the end, in one statement that also claims the rows they free."""
    counts = {"accepted": 0, "ignored": 0, "rejected": 0}
    freed = canaries = 0
    completed: list[ResultItem] = []
    for item in parsed:
        if item is None:
            counts["rejected"] += 1
            continue
        if isinstance(item, probes.ProbeAnswer):
            # No row, no submission: only the waiting doctor hears of it.
            counts["accepted" if await probes.record(rt, item) else "ignored"] += 1
            continue
        if isinstance(item, canary_send.CanaryAnswer):
            counts["accepted" if await canary.on_answer(rt, item) else "ignored"] += 1
            canaries += 1
            continue
        if item.status == "completed":
            completed.append(item)
            continue
        applied = await apply_item(rt, item)
        counts["accepted" if applied else "ignored"] += 1
        freed += applied and item.status != "progress"
    outcomes, settled = await _settle(rt, completed) if completed else ([], False)
    for applied, _job in outcomes:
        counts["accepted" if applied else "ignored"] += 1
        freed += applied
    logs.event("webhook", **counts)
    return Receipt(counts, freed, settled, tuple(job for _, job in outcomes if job),
                   canaries)


async def _settle(rt: Runtime[WebhookStore], items: list[ResultItem]
                  ) -> tuple[list[tuple[bool, Job | None]], bool]:
    """settle_items, once more when it failed: (per item applied and job, settled).

    The first failure may be a lost answer of a settle that committed; its
    repeat, with the same token, then hands back the rows that settle claimed
    (docs/deploying/index.md) rather than leave them claimed with no dispatch.  Should the
    repeat fail too, the results are applied alone and the step after answering
    claims.
    """
    taker = uuid4()
    for tries_left in (1, 0):
        try:
            return await settle_items(rt, items, taker), True
        except StoreError as exc:
            # The claim shares the results' transaction: whatever failed there
            # must not hold the results back.
            logs.event("settle_failed", code=exc.code, count=len(items),
                       reason="will_repeat" if tries_left else "apply_alone")
    return [(await apply_item(rt, item), None) for item in items], False
