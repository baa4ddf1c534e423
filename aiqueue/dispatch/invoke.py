"""Outgoing HTTP: dispatching a job to its target, classifying the answer, and the self-chain."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx

from aiqueue.backoff import parse_retry_after
from aiqueue.dispatch import targets
from aiqueue.dispatch.aws import AwsCredentials, CredentialsError
from aiqueue.models import Job
from aiqueue.models.queue import payload_key
from aiqueue.settings import Settings
from aiqueue.settings.targets import KindTarget
from aiqueue.tokens import Tokens


@dataclass(frozen=True)
class Accepted:
    """The function took the job (sync mode: `body` is its result item).

    `ref` is the platform's id for the invocation (DigitalOcean's activation
    id, Lambda's request id), kept in the attempt history.
    """

    body: Any = None
    ref: str | None = None


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
    # False when another attempt cannot succeed (the payload is too large).
    retryable: bool = True


Outcome = Accepted | Busy | Failed

# The prefix of a refusal's code, per target: function_http_500, do_http_401, lambda_http_403.
_PREFIX = {"http": "function", "digitalocean": "do", "lambda": "lambda"}
# Platform ids are opaque but short: keep what looks like one, nothing else.
_REF = re.compile(r"[A-Za-z0-9._:/-]{1,128}")


def dispatch_body(job: Job, target: KindTarget, tokens: Tokens) -> dict[str, Any]:
    """The contract's dispatch payload for one claimed row."""
    return {**_envelope(job, target, tokens), "payload": job.payload}


def dispatch_data(job: Job, target: KindTarget, tokens: Tokens) -> bytes:
    """dispatch_body as the bytes sent: the payload goes in as the database returned it."""
    envelope = json.dumps(_envelope(job, target, tokens))
    return f'{envelope[:-1]}, "payload": {job.payload_json}}}'.encode()


def _envelope(job: Job, target: KindTarget, tokens: Tokens) -> dict[str, Any]:
    return {
        "queue_id": str(job.queue_id),
        "submission_id": str(job.submission_id),
        "assignment_id": job.assignment_id,
        "attempt": job.attempt,
        "callback_url": target.callback_url,
        "callback_token": tokens.callback(job.queue_id, job.dispatch_seq, job.attempt),
        # Rows that share a payload share a prompt prefix (docs/prompt-cache.md).
        "cache_key": job.cache_key or payload_key(job.payload_json),
        "submission": {
            "id": str(job.submission_id),
            "assignment_id": job.assignment_id,
            "content": job.content,
        },
    }


def message_id(queue_id: UUID, dispatch_seq: int) -> str:
    """The dispatch's `webhook-id` (docs/deploying/index.md): `<queue_id>.<dispatch_seq>`.

    Unique for every dispatch: the attempt repeats after a refusal (which gives
    it back) and after a retry, and a re-dispatch signed within the same second
    would then look like a replay to the function.  A probe's is `<probe_id>.1`.
    """
    return f"{queue_id}.{dispatch_seq}"


def too_large(http_status: int | None = None) -> Failed:
    """A dispatch the platform can never take: fail the row, do not retry."""
    return Failed("payload_too_large", http_status, retryable=False)


async def send(http: httpx.AsyncClient, job: Job, target: KindTarget, tokens: Tokens,
               aws: AwsCredentials | None = None, trace: Mapping[str, str] | None = None
               ) -> Outcome:
    """Send the job to its kind's target and classify the answer; never raises.

    `trace`: the dispatch span's W3C headers (docs/tracing.md), sent to an http target.
    """
    try:
        data = dispatch_data(job, target, tokens)
    except Exception:
        return Failed("dispatch_error")
    return await post_data(http, data, target, aws, message_id(job.queue_id, job.dispatch_seq),
                           trace)


def probe_body(probe_id: UUID, target: KindTarget, tokens: Tokens) -> dict[str, Any]:
    """The doctor's probe (docs/operating/doctor.md): no row, no submission, nothing to mark.

    A function that knows probes calls back a `probe` item without calling a
    model; one too old to know them finds no submission and answers as for a
    broken job, which the webhook records and the doctor reports.
    """
    return {
        "probe": True,
        "queue_id": str(probe_id),
        "attempt": 1,
        "callback_url": target.callback_url,
        "callback_token": tokens.probe(probe_id),
    }


async def post(http: httpx.AsyncClient, body: dict[str, Any], target: KindTarget,
               aws: AwsCredentials | None = None, msg_id: str | None = None) -> Outcome:
    """POST one dispatch body to the target and classify the answer; never raises.

    `msg_id`: the signed dispatch's `webhook-id` (default: `<queue_id>.1`, a probe's).
    """
    try:
        data = json.dumps(body).encode()
    except Exception:
        return Failed("dispatch_error")
    return await post_data(http, data, target, aws, msg_id or f"{body['queue_id']}.1")


async def post_data(http: httpx.AsyncClient, data: bytes, target: KindTarget,
                    aws: AwsCredentials | None, msg_id: str,
                    trace: Mapping[str, str] | None = None) -> Outcome:
    """post, of a body already encoded."""
    try:
        limit = targets.body_limit(target)
        if limit is not None and len(data) > limit:
            return too_large()
        credentials = await aws.get(http) if aws is not None else None
        request = targets.build_request(target, data, datetime.now(UTC), credentials, msg_id)
        # A platform invokes the function without our headers: only http carries the trace.
        headers = request.headers | dict(trace) if trace and target.dispatch == "http" \
            else request.headers
        response = await http.post(
            _url(request.url), content=data, headers=headers,
            timeout=httpx.Timeout(target.dispatch_timeout_seconds))
    except CredentialsError as exc:
        return Failed(exc.code)
    except httpx.TimeoutException:
        return Failed("dispatch_timeout")
    except httpx.ConnectError:
        return Failed("dispatch_connect_error")
    except httpx.HTTPError:
        # Reset after the request was written, truncated or malformed answer:
        # the function may or may not have the job; a retry is the contract's answer.
        return Failed("dispatch_transport_error")
    except Exception:
        # Anything else must still end this attempt now, not in stuck recovery.
        return Failed("dispatch_error")
    return classify(response, target)


@functools.lru_cache(maxsize=32)
def _url(url: str) -> httpx.URL:
    """The target's URL parsed once, not on every dispatch (a few URLs per instance)."""
    return httpx.URL(url)


def classify(response: httpx.Response, target: KindTarget) -> Outcome:
    """Map the target's answer to accepted / busy / failed: the one place that decides."""
    status = response.status_code
    platform = target.dispatch
    if status in (429, 503):
        # Up to an hour, like a callback's retry_after (docs/deploying/index.md): the backoff's
        # cap is for our own guesses, not for the model's word.
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        return Busy(retry_after, status)
    if platform == "http" and 200 <= status < 300:
        if target.function_mode == "sync":
            try:
                return Accepted(response.json())
            except ValueError:
                return Failed("sync_answer_not_json", status)
        return Accepted()
    if platform != "http" and status == 202:
        return Accepted(ref=_ref(response, platform))
    if platform != "http" and status == 413:
        return too_large(status)
    return Failed(f"{_PREFIX[platform]}_http_{status}", status)


def _ref(response: httpx.Response, platform: str) -> str | None:
    """DigitalOcean's activationId (body) or Lambda's x-amzn-RequestId (header)."""
    if platform == "lambda":
        ref: object = response.headers.get("x-amzn-requestid")
    else:
        try:
            ref = response.json().get("activationId")
        except (ValueError, AttributeError):
            ref = None
    return ref if isinstance(ref, str) and _REF.fullmatch(ref) else None


async def chain(http: httpx.AsyncClient, settings: Settings) -> bool:
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
