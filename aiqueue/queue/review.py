"""Reviewing applied results: accept (optionally adjusted), revert, a whole run, history."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from aiqueue import logs, wire
from aiqueue.errors import Invalid, NotCompleted, NotFound, Superseded
from aiqueue.models import ReviewOutcome
from aiqueue.runtime import Runtime
from aiqueue.wire import reviews
from aiqueue.wire.requests import AcceptBody

MAX_ACTOR = 200
MAX_HISTORY = 200


def parse_actor(value: str | None) -> str | None:
    """The X-Actor header: at most 200 printable characters (None when absent)."""
    if value is None or not value.strip():
        return None
    actor = value.strip()
    if len(actor) > MAX_ACTOR or not actor.isprintable():
        raise Invalid(f"X-Actor must be at most {MAX_ACTOR} printable characters")
    return actor


def parse_adjusted(body: object) -> dict[str, Any] | None:
    """An accept body: nothing, {} or {"result": {...}} (the teacher's adjusted result)."""
    if body is None:
        return None
    # The result is the JSON object as sent (the type checked it is a storable object).
    return wire.parse(AcceptBody, body).result


def _check(queue_id: UUID, done: ReviewOutcome) -> None:
    if done.outcome == "not_found":
        raise NotFound(f"no queue row {queue_id}")
    if done.outcome == "superseded":
        raise Superseded("a later result has been applied to this submission since")
    if done.outcome == "not_completed":
        raise NotCompleted("this row has no applied result that is not reverted")


async def accept(rt: Runtime, queue_id: UUID, actor: str | None,
                 adjusted: dict[str, Any] | None = None) -> reviews.Accepted:
    """Mark one applied result accepted; the contract's 200 body."""
    done = await rt.store.accept(queue_id, actor, adjusted)
    _check(queue_id, done)
    assert done.at is not None
    logs.event("review", queue_id=queue_id, outcome="accepted")
    return reviews.Accepted(queue_id=queue_id, review="accepted", accepted_at=done.at)


async def revert(rt: Runtime, queue_id: UUID, actor: str | None) -> reviews.Reverted:
    """Put the submission's mark back to what it was before this row's result."""
    done = await rt.store.revert(queue_id, actor)
    _check(queue_id, done)
    assert done.at is not None
    logs.event("review", queue_id=queue_id, outcome="reverted")
    return reviews.Reverted(queue_id=queue_id, review="reverted", reverted_at=done.at)


async def review_run(rt: Runtime, assignment_id: str, action: str,
                     actor: str | None) -> reviews.RunAccepted | reviews.RunReverted:
    """Accept or revert every unreviewed result of the assignment's latest run."""
    done, superseded = await rt.store.review_run(assignment_id, action, actor)
    logs.event("review", assignment_id=assignment_id, outcome=action, count=done)
    if action == "accept":
        return reviews.RunAccepted(accepted=done)
    return reviews.RunReverted(reverted=done, superseded=superseded)


async def row_review(rt: Runtime, queue_id: UUID) -> str | None:
    """'accepted by admin at 2026-11-22 10:00:00 UTC' for the operator's row page."""
    found = await rt.store.review_of(queue_id)
    if found is None:
        return None
    at = found["accepted_at"] if found["review"] == "accepted" else found["reverted_at"]
    if at is None:
        return str(found["review"])
    by = f" by {found['actor']}" if found["actor"] else ""
    return f"{found['review']}{by} at {at.strftime('%Y-%m-%d %H:%M:%S UTC')}"


async def history(rt: Runtime, submission_id: UUID) -> reviews.ResultHistory:
    """A submission's applied results, newest first; NotFound for an unknown submission."""
    items = await rt.store.result_history(submission_id, MAX_HISTORY)
    if not items and not await rt.store.submission_exists(submission_id):
        raise NotFound(f"no submission {submission_id}")
    return reviews.ResultHistory(items=[reviews.AppliedResult.of(r) for r in items])
