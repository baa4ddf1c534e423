"""Handing a claimed job to the function: send it, keep its ref, put a refused row back."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from aiqueue import dispatch, logs
from aiqueue.errors import Invalid, StoreError
from aiqueue.models import Job
from aiqueue.ports import HandoutStore
from aiqueue.queue import fallback
from aiqueue.queue.results import ResultItem, apply_item, fail_attempt, parse_item, refuse
from aiqueue.runtime import Runtime


async def send(rt: Runtime[HandoutStore], job: Job) -> tuple[dispatch.Outcome, float]:
    """Dispatch a job to its kind's function and time it; an accepted dispatch closes
    its pool's breaker."""
    started = time.perf_counter()
    job = await _sharded(rt, job)
    # A row on its kind's fallback goes to the fallback kind's function.
    target = rt.settings.target(fallback.run_kind(rt.settings, job))
    span = await rt.tracer.dispatching(rt.store, job)
    outcome = await dispatch.send(rt.http, job, target, rt.tokens, rt.aws, span.headers)
    span.end(*_told(outcome))
    ms = round((time.perf_counter() - started) * 1000, 2)
    if isinstance(outcome, dispatch.Accepted) and job.breaker_dirty:
        await rt.store.dispatch_accepted(job.pool)
    return outcome, ms


def _told(outcome: dispatch.Outcome) -> tuple[str, str | None, int | None]:
    """A dispatch's outcome as its span tells it: accepted, busy or failed, code, HTTP status."""
    match outcome:
        case dispatch.Accepted():
            return "accepted", None, None
        case dispatch.Busy(http_status=status):
            return "busy", None, status
        case dispatch.Failed(code=code, http_status=status):
            return "failed", code, status


async def _sharded(rt: Runtime[HandoutStore], job: Job) -> Job:
    """The job with its cache key sharded (":<n>") once its prefix's dispatches this minute
    pass the pool's key_rpm (docs/prompt-cache.md); unchanged without a key_rpm."""
    pool = rt.settings.queue.pools.get(job.pool)
    key_rpm = pool.prompt_cache.key_rpm if pool is not None else None
    if not key_rpm:
        return job
    return replace(job, cache_key=await rt.store.cache_key(job.queue_id, key_rpm))


async def dispatch_async(rt: Runtime[HandoutStore], job: Job) -> dispatch.Outcome:
    """Send a claimed job; on a refusal put the row back as the contract says."""
    outcome, ms = await send(rt, job)
    if isinstance(outcome, dispatch.Accepted):
        if outcome.ref is not None:
            await _keep_ref(rt, job, outcome.ref)
        logs.event("dispatch", queue_id=job.queue_id, attempt=job.attempt, outcome="accepted",
                   ms=ms)
    else:
        await refused(rt, job, outcome, ms)
    return outcome


async def _keep_ref(rt: Runtime[HandoutStore], job: Job, ref: str) -> None:
    """Note the platform's invocation id; the job is out either way, so a lost id is logged."""
    try:
        await rt.store.set_dispatch_ref(job.queue_id, job.dispatch_seq, ref)
    except StoreError as exc:
        logs.event("dispatch_ref_lost", queue_id=job.queue_id, code=exc.code)


async def refused(
    rt: Runtime[HandoutStore], job: Job, outcome: dispatch.Busy | dispatch.Failed, ms: float
) -> None:
    """Busy: a refusal (docs/concepts.md), no attempt used.  Failed: a failed attempt."""
    s = rt.settings
    if isinstance(outcome, dispatch.Busy):
        # 429 is the model's budget; 503 a model (or platform) that is overloaded.
        kind = "rate_limited" if outcome.http_status == 429 else "overloaded"
        _, delay = await refuse(rt, job.queue_id, job.dispatch_seq, job.attempt, kind=kind,
                                retry_after=outcome.retry_after)
        logs.event("dispatch", queue_id=job.queue_id, attempt=job.attempt, outcome="busy",
                   http_status=outcome.http_status, delay_s=round(delay, 3), ms=ms)
        return
    # A payload no platform will take says nothing about the function's health.
    failures = await rt.store.breaker_failure(
        s.breaker_threshold, s.breaker_cooldown_seconds, job.pool) if outcome.retryable else 0
    status = await fail_attempt(rt, job.queue_id, job.dispatch_seq, job.attempt,
                                code=outcome.code, retryable=outcome.retryable,
                                outcome="dispatch_error")
    logs.event("dispatch", queue_id=job.queue_id, attempt=job.attempt, outcome="failed",
               code=outcome.code, http_status=outcome.http_status, status=status,
               failures=failures, ms=ms)
    if failures == s.breaker_threshold:
        logs.event("circuit", status="open", failures=failures)


def sync_item(body: Any, job: Job, rt: Runtime[HandoutStore]) -> ResultItem | None:
    """The function answered for the job we sent it: bind the item to that dispatch."""
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    if not isinstance(body, dict):
        return None
    body = {**body, "queue_id": str(job.queue_id),
            "token": rt.tokens.callback(job.queue_id, job.dispatch_seq, job.attempt)}
    try:
        return parse_item(body, rt.tokens)
    except Invalid:
        return None


async def send_sync(rt: Runtime[HandoutStore], job: Job) -> None:
    """Sync mode: send the job, and apply the function's answer (the result item)
    like a callback."""
    outcome, ms = await send(rt, job)
    if not isinstance(outcome, dispatch.Accepted):
        await refused(rt, job, outcome, ms)
        return
    item = sync_item(outcome.body, job, rt)
    if item is None:
        await fail_attempt(rt, job.queue_id, job.dispatch_seq, job.attempt,
                           code="sync_answer_invalid", retryable=True, outcome="bad_answer")
        logs.event("dispatch", queue_id=job.queue_id, attempt=job.attempt,
                   outcome="bad_answer", mode="sync", ms=ms)
        return
    applied = await apply_item(rt, item)
    logs.event("dispatch", queue_id=job.queue_id, attempt=job.attempt,
               outcome=item.status, status="applied" if applied else "ignored",
               mode="sync", ms=ms)
