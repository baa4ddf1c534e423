"""Mark one dispatch and return the webhook result item; never raises for bad input or models."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .backends import Backend
from .errors import InvalidDispatch, MarkingError
from .items import Item, completed_item, failed_item
from .job import parse_dispatch, safe_id
from .probe import is_probe, probe_item
from .review import reviewed
from .screen import screen, visible

log = logging.getLogger(__name__)


async def mark(dispatch: Mapping[str, Any], backend: Backend) -> Item:
    """Mark `dispatch` with `backend`; the item is `completed` or `failed` (with `retryable`)."""
    if is_probe(dispatch):
        return probe_item(dispatch)  # never a model call
    queue_id = dispatch.get("queue_id") if isinstance(dispatch, Mapping) else None
    token = dispatch.get("callback_token") if isinstance(dispatch, Mapping) else None
    try:
        job = parse_dispatch(dispatch)
    except InvalidDispatch as exc:
        # Retrying the same dispatch cannot fix its fields.
        log.warning("invalid dispatch queue_id=%s field=%s", safe_id(queue_id), exc.field)
        return failed_item(queue_id, token, "invalid_input", retryable=False)
    qid = safe_id(job.queue_id)
    log.info(
        "marking queue_id=%s submission_id=%s attempt=%d backend=%s",
        qid,
        safe_id(job.submission_id),
        job.attempt,
        backend.name,
    )
    # An answer that speaks to the marker is marked as a reader sees it, then held.
    suspected = screen(job.content)
    try:
        marking = await backend.mark(replace(job, content=visible(job.content))
                                     if suspected else job)
    except MarkingError as exc:
        log.warning("marking failed queue_id=%s code=%s retryable=%s", qid, exc.code, exc.retryable)
        return failed_item(job.queue_id, job.token, exc.code, retryable=exc.retryable,
                           retry_after=exc.retry_after, reset_after=exc.reset_after)
    except Exception as exc:
        # The queue must hear back whatever broke; only the type is logged, because an
        # exception's text may quote the answer or the model's reply.
        log.error("marking crashed queue_id=%s error_type=%s", qid, type(exc).__name__)
        return failed_item(job.queue_id, job.token, "internal_error", retryable=True)
    marking = reviewed(job, marking, suspected)
    log.info("marked queue_id=%s model=%s held=%s", qid, safe_id(marking.model),
             marking.review["reason"] if marking.review else "-")
    return completed_item(job, marking, backend.name)
