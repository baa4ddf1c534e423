"""Result items from the function (webhook or sync answer): parse, verify, apply once."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from aiqueue import logs, tracing, wire
from aiqueue.backoff import retry_delay
from aiqueue.flow import REFUSALS, learned_window
from aiqueue.models import Completed, Job, QueueId
from aiqueue.queue import cache, fallback, holds, spend
from aiqueue.tokens import CallbackClaim, Tokens
from aiqueue.wire.webhook import WebhookItem

if TYPE_CHECKING:
    from aiqueue.ports import ResultsStore
    from aiqueue.runtime import Runtime

ItemStatus = Literal["completed", "failed", "progress"]
# A stored (and logged) error is one of these codes, never the function's own
# words: those may quote the student's answer.  A fixed vocabulary, not a
# pattern — a one-word answer ("mitochondria", "binary_search",
# "purple-elephant-42") looks just like a code.  functions/ai_mark's codes first.
KNOWN_ERRORS = frozenset({
    "invalid_input", "model_timeout", "model_unreachable", "model_bad_response",
    "malformed_model_output", "simulated_failure", "internal_error",
    "timeout", "rate_limited", "overloaded", "unavailable", "out_of_memory",
    "context_length_exceeded", "content_filtered", "invalid_output", "bad_request",
    "auth_failed",
})
# The most one result may cost, in USD: a larger (or non-finite) cost_usd is refused
# for cost (docs/concepts.md).
MAX_COST_USD = 1000.0
_HTTP_ERROR = re.compile(r"model_http_[1-5][0-9][0-9]")


@dataclass(frozen=True)
class ResultItem:
    """One webhook item whose token was verified against its queue_id."""

    claim: CallbackClaim
    status: ItemStatus
    result: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    retryable: bool = True
    error_code: str = "function_failed"
    progress: dict[str, Any] | None = None
    # A failed item that says the model refused (docs/concepts.md): "rate_limited"
    # or "overloaded", with the model's retry_after in seconds when it gave one.
    refusal: str | None = None
    retry_after: float | None = None
    # With a refusal: when the model's whole budget is back (x-ratelimit-reset-*).
    reset_after: float | None = None


def error_code(error: object) -> str:
    """A short content-free code for a function's error text."""
    if isinstance(error, str):
        code = error.strip().lower()
        if code in KNOWN_ERRORS or _HTTP_ERROR.fullmatch(code):
            return f"function:{code}"
    return "function_failed"


def parse_item(raw: object, tokens: Tokens, claim: CallbackClaim | None = None
               ) -> ResultItem | None:
    """A verified item, or None when its token is missing, forged, expired or for another row.

    `claim`: the item's token already verified by the caller (None: verify it here).
    Raises Invalid (422) for a malformed item (wire.webhook.WebhookItem says what fits).
    """
    item = wire.parse(WebhookItem, raw)
    if claim is None:
        claim = tokens.verify_callback(item.token)
    if claim is None or str(claim.queue_id) != item.queue_id.strip().lower():
        return None
    refusal = _refusal(item.error) if item.status == "failed" else None
    # result, usage and progress are the JSON objects as sent (the type checked them as
    # storable objects); _usage keeps only the cost-tracking fields.
    return ResultItem(
        claim=claim,
        status=item.status,
        result=holds.held(item.result, item.review) if item.review else item.result,
        usage=_usage(item.usage),
        retryable=item.retryable is not False,
        error_code=error_code(item.error),
        progress=item.progress if item.status == "progress" else None,
        refusal=refusal,
        retry_after=float(item.retry_after) if refusal and item.retry_after is not None
        else None,
        reset_after=float(item.reset_after) if refusal and item.reset_after is not None
        else None,
    )


def _refusal(error: object) -> str | None:
    """The refusal code a failed item carries, if it is one."""
    code = error.strip().lower() if isinstance(error, str) else None
    return code if code in REFUSALS else None


def _usage(usage: object) -> dict[str, Any] | None:
    """Keep only the cost-tracking fields, so nothing else rides along into storage.

    A `cost_usd` above MAX_COST_USD or not finite is refused for cost (dropped; the
    tokens, if sound, are still priced): sums of such costs would overflow the spend.
    """
    if isinstance(usage, dict) and not plausible_cost(usage.get("cost_usd")):
        usage = {k: v for k, v in usage.items() if k != "cost_usd"}
    if not isinstance(usage, dict) or not sound_usage(usage):
        return None
    keep: dict[str, Any] = cache.counts(usage)
    for key in ("model", "total_tokens", "cost_usd"):
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            keep[key] = value
        elif key == "model" and isinstance(value, str):
            keep[key] = value[:100]
    for key in ("function_version", "provider"):
        # Kept with each result (docs/remark.md); a drift canary starts when the
        # function's version changes, as when the model does (docs/canaries.md).
        if isinstance(usage.get(key), str):
            keep[key] = usage[key][:100]
    if usage.get("simulated") is True:
        keep["simulated"] = True  # the reference function's simulator: plausible, not real
    return keep or None


def plausible_cost(cost: object) -> bool:
    """Whether a result's cost_usd may be kept: absent or not a number (ignored later),
    or a finite number no larger than MAX_COST_USD (a negative one is unsound usage)."""
    if not isinstance(cost, (int, float)) or isinstance(cost, bool):
        return True
    return math.isfinite(cost) and cost <= MAX_COST_USD


def sound_usage(usage: dict[str, Any]) -> bool:
    """Whether every number of a usage (and of its nested objects, such as
    prompt_tokens_details) is finite and not negative.

    A usage that is not is refused whole for cost and turns (docs/overnight.md),
    not read for its other counts; the result it came with still applies.
    """
    return all(sound_usage(v) if isinstance(v, dict)
               else v >= 0 and (not isinstance(v, float) or math.isfinite(v))
               for v in usage.values()
               if isinstance(v, dict) or isinstance(v, (int, float)) and not isinstance(v, bool))


async def apply_item(rt: Runtime[ResultsStore], item: ResultItem) -> bool:
    """Apply one verified item; True if it changed something."""
    started = rt.tracer.now()
    applied = await _apply(rt, item)
    if rt.tracer.on and item.status != "progress":
        await rt.tracer.applied(rt.store, [told(rt, item, applied)], started)
    return applied


async def _apply(rt: Runtime[ResultsStore], item: ResultItem) -> bool:
    claim = item.claim
    if item.status == "completed":
        assert item.result is not None
        done = await rt.store.complete(completed(item), fallback.plan(rt))
        _completed(claim, done)
        return done
    if item.status == "progress":
        return await rt.store.heartbeat(claim.queue_id, claim.dispatch_seq, item.progress or {})
    if item.refusal is not None:
        status, delay = await refuse(rt, claim.queue_id, claim.dispatch_seq, claim.attempt,
                                     kind=item.refusal, retry_after=item.retry_after,
                                     reset_after=item.reset_after)
        logs.event("callback", queue_id=claim.queue_id, attempt=claim.attempt,
                   outcome="refused", code=item.refusal, status=status or "ignored",
                   delay_s=round(delay, 3))
        return status is not None
    status = await fail_attempt(rt, claim.queue_id, claim.dispatch_seq, claim.attempt,
                                code=item.error_code, retryable=item.retryable,
                                outcome="callback_failed")
    logs.event("callback", queue_id=claim.queue_id, attempt=claim.attempt, outcome="failed",
               code=item.error_code, status=status or "ignored")
    return status is not None


async def refuse(
    rt: Runtime[ResultsStore], queue_id: UUID, dispatch_seq: int, attempt: int, *, kind: str,
    retry_after: float | None, reset_after: float | None = None,
) -> tuple[str | None, float]:
    """The model refused (docs/concepts.md): no attempt used, the row's pool held, its L cut.

    The row's new status (None: a stale dispatch) and the hold in seconds: the
    model's retry_after, else the backoff.  The pool learns the model's window
    from retry_after and `reset_after` (flow.learned_window).
    """
    s = rt.settings
    delay = retry_after if retry_after is not None else retry_delay(
        attempt, s.retry_base_seconds, s.retry_max_seconds)
    status = await rt.store.refused(queue_id, dispatch_seq, kind=kind, delay=delay,
                                    give_up=s.refused_give_up_seconds, cap=s.max_in_flight,
                                    plan=s.queue.plan,
                                    window=learned_window(retry_after, reset_after))
    return status, delay


async def settle_items(rt: Runtime[ResultsStore], items: Sequence[ResultItem], taker: UUID
                       ) -> list[tuple[bool, Job | None]]:
    """Apply completed items, each claiming the next row, in one statement.

    Per item, whether it changed something and the job claimed for it (None
    when the gate is closed or nothing is due), taken by `taker` to send.
    """
    started = rt.tracer.now()
    outcomes = await rt.store.settle([completed(item) for item in items],
                                     fallback.plan(rt), taker)
    for item, (done, _job) in zip(items, outcomes, strict=True):
        _completed(item.claim, done)
    if rt.tracer.on:  # each result's span, and the claims the statement made
        await rt.tracer.applied(rt.store, [told(rt, item, done) for item, (done, _) in
                                           zip(items, outcomes, strict=True)],
                                started, [job for _, job in outcomes if job is not None])
    return outcomes


def told(rt: Runtime[ResultsStore], item: ResultItem, applied: bool) -> tracing.Applied:
    """A result as its span tells it (docs/tracing.md): ids, counts, codes, the cost."""
    claim = item.claim
    outcome = item.refusal or item.status
    return tracing.Applied(
        QueueId(claim.queue_id), claim.attempt, outcome, applied, item.usage,
        cost_usd=spend.cost_usd(item.usage, rt.settings.model_prices),
        error_code=item.error_code if outcome == "failed" else item.refusal)


def completed(item: ResultItem) -> Completed:
    """A completed item as the store applies it; its cost is priced there (spend.py)."""
    assert item.status == "completed" and item.result is not None
    return Completed(item.claim.queue_id, item.claim.dispatch_seq, item.result, item.usage)


def _completed(claim: CallbackClaim, done: bool) -> None:
    logs.event("callback", queue_id=claim.queue_id, attempt=claim.attempt,
               outcome="completed", status="applied" if done else "ignored")


async def fail_attempt(
    rt: Runtime[ResultsStore], queue_id: UUID, dispatch_seq: int, attempt: int, *, code: str,
    retryable: bool,
    outcome: str,
) -> str | None:
    """Fail one dispatch of a row: retry after the backoff or end it as failed.

    The row's new status, or None when that dispatch is no longer the current one.
    """
    s = rt.settings
    delay = retry_delay(attempt, s.retry_base_seconds, s.retry_max_seconds)
    return await rt.store.attempt_failed(
        queue_id, dispatch_seq, delay=delay, retryable=retryable, max_attempts=s.max_attempts,
        error=code, outcome=outcome, attempts=s.queue.attempts,
    )
