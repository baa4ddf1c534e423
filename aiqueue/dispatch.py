"""Outgoing HTTP: dispatching a job to the marking function, and the self-chain."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from aiqueue.backoff import parse_retry_after
from aiqueue.models import Job
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens
from aiqueue.transport import Poster


@dataclass(frozen=True)
class Accepted:
    """2xx: the function took the job (sync mode: `body` is its result item)."""

    body: Any = None


@dataclass(frozen=True)
class Busy:
    """429/503: try again later without using an attempt."""

    retry_after: float | None
    http_status: int


@dataclass(frozen=True)
class Failed:
    """Anything else: a failed attempt, with a short content-free code."""

    code: str
    http_status: int | None = None


Outcome = Accepted | Busy | Failed


def dispatch_body(job: Job, settings: Settings, tokens: Tokens) -> dict[str, Any]:
    """The contract's dispatch payload for one claimed row."""
    return {
        "queue_id": str(job.queue_id),
        "submission_id": str(job.submission_id),
        "assignment_id": job.assignment_id,
        "attempt": job.attempt,
        "callback_url": settings.callback_url,
        "callback_token": tokens.callback(job.queue_id, job.dispatch_seq, job.attempt),
        "payload": job.payload,
        "submission": {
            "id": str(job.submission_id),
            "assignment_id": job.assignment_id,
            "content": job.content,
        },
    }


async def send(http: Poster, job: Job, settings: Settings, tokens: Tokens) -> Outcome:
    """POST the job to the function and classify the answer."""
    headers = {"content-type": "application/json"}
    if settings.function_token:
        headers["authorization"] = f"Bearer {settings.function_token}"
    body = json.dumps(dispatch_body(job, settings, tokens)).encode()
    try:
        response = await http.post(
            settings.function_url,
            content=body,
            headers=headers,
            timeout=httpx.Timeout(settings.dispatch_timeout_seconds),
        )
    except httpx.TimeoutException:
        return Failed("dispatch_timeout")
    except httpx.HTTPError:
        return Failed("dispatch_connect_error")
    return classify(response, settings)


def classify(response: httpx.Response, settings: Settings) -> Outcome:
    """Map a function response to accepted / busy / failed."""
    status = response.status_code
    if status in (429, 503):
        retry_after = parse_retry_after(
            response.headers.get("retry-after"), cap=settings.retry_max_seconds
        )
        return Busy(retry_after, status)
    if 200 <= status < 300:
        if settings.function_mode == "sync":
            try:
                return Accepted(response.json())
            except ValueError:
                return Failed("sync_answer_not_json", status)
        return Accepted()
    return Failed(f"function_http_{status}", status)


async def chain(http: Poster, settings: Settings) -> bool:
    """Ask this app, authenticated, to run one more process step; True if delivered."""
    try:
        response = await http.post(
            f"{settings.app_base_url}/api/marking/process-queue",
            headers={"authorization": f"Bearer {settings.queue_secret}"},
            timeout=httpx.Timeout(5.0, read=settings.chain_read_timeout_seconds),
        )
    except httpx.ReadTimeout:
        # The request went out; the other invocation is working on it.
        return True
    except httpx.HTTPError:
        return False
    return response.is_success
