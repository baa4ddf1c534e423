"""Result items in the shape `POST /webhooks/ai-mark` expects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .job import Job, Score
from .probe import FUNCTION_VERSION

Item = dict[str, Any]


@dataclass(frozen=True)
class Marking:
    """What a backend produced for one job."""

    score: Score
    feedback: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The provider's prompt cache (parts of prompt_tokens), when it reports them.
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    # Per rubric criterion: (id, score, max_score); empty when the model gave none.
    criteria: tuple[tuple[str, Score, Score], ...] = ()
    # The result needs a teacher (docs/review-holds.md): {"reason", "question"?, "best_guess"}.
    review: Mapping[str, Any] | None = None


def completed_item(job: Job, marking: Marking, provider: str) -> Item:
    """A `completed` item carrying the result, the token usage and who produced it:
    `provider` (the backend's name) and this function's version, which the queue keeps
    with each result (docs/remark.md) and watches for drift (docs/canaries.md)."""
    result: dict[str, Any] = {
        "score": marking.score,
        "max_score": job.max_score,
        "feedback": marking.feedback,
        **marking.extra,
    }
    if marking.criteria:
        result["criteria"] = [{"id": cid, "score": score, "max_score": most}
                              for cid, score, most in marking.criteria]
    usage: dict[str, Any] = {
        "model": marking.model,
        "prompt_tokens": marking.prompt_tokens,
        "completion_tokens": marking.completion_tokens,
    }
    for key in ("cache_read_tokens", "cache_write_tokens"):
        value = getattr(marking, key)
        if value is not None:
            usage[key] = value
    if marking.extra.get("simulated"):
        usage["simulated"] = True  # counts estimated by the simulator, not a model's
    usage.update(made_by(provider))
    item: Item = {
        "queue_id": job.queue_id,
        "token": job.token,
        "status": "completed",
        "result": result,
        "usage": usage,
    }
    if marking.review is not None:
        item["review"] = dict(marking.review)
    return item


def failed_item(
    queue_id: object, token: object, error: str, *, retryable: bool,
    retry_after: float | None = None, reset_after: float | None = None,
) -> Item:
    """A `failed` item; `error` is a short content-free code.

    `retry_after` (seconds) rides along with a refusal (`rate_limited`,
    `overloaded`): the queue holds every dispatch that long.  `reset_after`:
    when the model's whole budget is back, from which the queue learns its window.
    """
    item: Item = {
        "queue_id": queue_id,
        "token": token,
        "status": "failed",
        "error": error,
        "retryable": retryable,
    }
    if retry_after is not None:
        item["retry_after"] = retry_after
    if reset_after is not None:
        item["reset_after"] = reset_after
    return item


def progress_item(queue_id: object, token: object, current: int, total: int, message: str) -> Item:
    """A `progress` heartbeat that postpones the queue's stuck-row recovery."""
    return {
        "queue_id": queue_id,
        "token": token,
        "status": "progress",
        "progress": {"current": current, "total": total, "message": message},
    }


def made_by(provider: str) -> dict[str, str]:
    """The usage fields that say which provider and which function made a result."""
    return {"provider": provider, "function_version": FUNCTION_VERSION}
