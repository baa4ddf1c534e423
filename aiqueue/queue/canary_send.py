"""A canary's rows going out and their answers coming back (docs/canaries.md).

A canary row is sent like a job (the dispatch body of a row, its reviewed
submission under the payload it was marked with) but with a canary token
(tokens.py): the webhook takes its answer here (`parse_answer`), records
only its marks and usage in the canary's own table, and never touches a
queue row, a submission or a notification.  It goes at the back of the fair
turns: only while no row of its pool is due, into the slots the pool has free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from aiqueue import dispatch, logs
from aiqueue.models.canary import CanaryJob
from aiqueue.models.queue import payload_key
from aiqueue.ports import CanaryStore
from aiqueue.queue.results import error_code, sound_usage
from aiqueue.runtime import Runtime
from aiqueue.settings.targets import KindTarget
from aiqueue.tokens import Tokens

# The slots a pool without a cap (max_in_flight 0) lends canaries at a time.
UNCAPPED_ROOM = 4


@dataclass(frozen=True)
class CanaryAnswer:
    """A webhook item carrying a valid canary token: the canary row's marks or failure."""

    row_id: UUID
    status: str  # completed | failed | progress
    marks: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    error: str | None = None


def _marks(result: object) -> dict[str, Any] | None:
    """Only the marks of a result (score, max_score, criteria' ids and scores): no feedback."""
    if not isinstance(result, dict):
        return None
    found: dict[str, Any] = {k: result[k] for k in ("score", "max_score")
                             if isinstance(result.get(k), int | float)
                             and not isinstance(result.get(k), bool)}
    criteria = result.get("criteria")
    if isinstance(criteria, list):
        found["criteria"] = [{k: c[k] for k in ("id", "score", "max_score") if k in c}
                             for c in criteria[:100] if isinstance(c, dict)]
    return found


def _usage(usage: object, version: object) -> dict[str, Any] | None:
    """The cost-tracking counts, the model and the function's version (short strings)."""
    if not isinstance(usage, dict) or not sound_usage(usage):
        usage = {}
    keep: dict[str, Any] = {k: v for k, v in usage.items()
            if k in ("prompt_tokens", "completion_tokens", "cache_read_tokens",
                     "cache_write_tokens", "cost_usd")
            and isinstance(v, int | float) and not isinstance(v, bool)}
    for key, value in (("model", usage.get("model")),
                       ("function_version", usage.get("function_version", version))):
        if isinstance(value, str) and value:
            keep[key] = value[:100]
    return keep or None


def parse_answer(raw: object, tokens: Tokens) -> CanaryAnswer | None:
    """The answer when `raw` carries a valid canary token for its queue_id, else None."""
    if not isinstance(raw, dict):
        return None
    row_id = tokens.verify_canary(raw.get("token"))
    queue_id = raw.get("queue_id")
    if row_id is None or not isinstance(queue_id, str) \
            or queue_id.strip().lower() != str(row_id):
        return None
    status = raw.get("status")
    if status == "completed":
        return CanaryAnswer(row_id, "completed", _marks(raw.get("result")),
                            _usage(raw.get("usage"), raw.get("function_version")))
    if status == "failed":
        return CanaryAnswer(row_id, "failed", error=error_code(raw.get("error")))
    return CanaryAnswer(row_id, "progress")


async def record(rt: Runtime[CanaryStore], item: CanaryAnswer) -> UUID | None:
    """Keep a canary row's answer once (priced at its run's lane's price); its run's id
    when it was new (progress: None)."""
    if item.status == "progress":
        return None
    run_id = await rt.store.canary_answer(item.row_id, item.marks, item.usage, item.error,
                                          rt.settings.money.json())
    logs.event("canary_answer", row_id=item.row_id, status=item.status,
               outcome="recorded" if run_id else "repeat")
    return run_id


def body(job: CanaryJob, target: KindTarget, tokens: Tokens) -> dict[str, Any]:
    """The dispatch body of a canary row: a job's, with a canary token and `canary: true`."""
    return {
        "queue_id": str(job.id),
        "submission_id": str(job.submission_id),
        "assignment_id": job.assignment_id,
        "attempt": 1,
        "callback_url": target.callback_url,
        "callback_token": tokens.canary(job.id),
        "cache_key": payload_key(job.payload_json),
        "canary": True,
        "submission": {"id": str(job.submission_id), "assignment_id": job.assignment_id,
                       "content": job.content},
        "payload": json.loads(job.payload_json),
    }


async def send(rt: Runtime[CanaryStore], kind: str) -> set[UUID]:
    """Send the kind's canary rows its pool has room for; the runs a failed send touched."""
    pool = rt.settings.queue.pool_of(kind)
    room = pool.max_in_flight or UNCAPPED_ROOM
    kinds = [k.name for k in rt.settings.queue.kinds_of(pool.name)]
    jobs = await rt.store.canary_take(kind, pool.name, room, kinds, rt.settings.claim_plan,
                                      pool.max_in_flight > 0)
    target = rt.settings.target(kind)
    touched: set[UUID] = set()
    for job in jobs:
        sent = await dispatch.post(rt.http, body(job, target, rt.tokens), target, rt.aws,
                                   f"{job.id}.1")
        logs.event("canary_dispatch", row_id=job.id, kind=kind,
                   outcome=type(sent).__name__.lower())
        if isinstance(sent, dispatch.Accepted):
            # A sync function's reply is the item itself.
            answer = parse_answer(sent.body, rt.tokens)
            if answer is not None and answer.row_id == job.id:
                if await record(rt, answer):
                    touched.add(job.run_id)
            continue
        code = sent.code if isinstance(sent, dispatch.Failed) else "busy"
        if await record(rt, CanaryAnswer(job.id, "failed", error=code)):
            touched.add(job.run_id)
    return touched
