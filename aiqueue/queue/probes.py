"""The probe round trip: a dispatch with `"probe": true` and its callback.

The app sends a probe with a signed probe token and no queue row.  The webhook
takes the function's answer to it (`parse_probe`), touches no row and no
submission, and records it in `ai_marking_probes`, where the doctor waiting on
any instance finds it (`run_probe`).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import httpx

from aiqueue import dispatch, logs
from aiqueue.ports import WebhookStore
from aiqueue.queue.results import error_code
from aiqueue.runtime import Runtime
from aiqueue.settings.targets import KindTarget
from aiqueue.tokens import Tokens

PROBE_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.1
_FACT = re.compile(r"[A-Za-z0-9._:/@+-]{1,64}")
JOB_STATUSES = ("completed", "failed", "progress")


@dataclass(frozen=True)
class ProbeAnswer:
    """A webhook item carrying a valid probe token: what the function made of the probe."""

    probe_id: UUID
    # "probe": the function knows probes; a job status: it treated the probe as a job.
    answer: str
    detail: dict[str, Any] = field(default_factory=dict)


def is_probe_item(raw: object) -> bool:
    return isinstance(raw, dict) and raw.get("status") == "probe"


def parse_probe(raw: object, tokens: Tokens) -> ProbeAnswer | None:
    """The answer when `raw` carries a valid probe token for its queue_id, else None."""
    if not isinstance(raw, dict):
        return None
    probe_id = tokens.verify_probe(raw.get("token"))
    queue_id = raw.get("queue_id")
    if probe_id is None or not isinstance(queue_id, str) \
            or queue_id.strip().lower() != str(probe_id):
        return None
    status = raw.get("status")
    if status == "probe":
        facts = raw.get("probe")
        facts = facts if isinstance(facts, dict) else {}
        detail = {k: v for k, v in facts.items()
                  if k in ("function", "version") and isinstance(v, str) and _FACT.fullmatch(v)}
        return ProbeAnswer(probe_id, "probe", detail)
    answer = status if status in JOB_STATUSES else "unknown"
    # Only a content-free code is kept; a result or feedback is never looked at.
    detail = {"error": error_code(raw.get("error"))} if status == "failed" else {}
    return ProbeAnswer(probe_id, answer, detail)


async def record(rt: Runtime[WebhookStore], item: ProbeAnswer) -> bool:
    """Keep the function's answer for the waiting doctor; True if it was the first."""
    first = await rt.store.record_probe_answer(item.probe_id, item.answer, item.detail)
    logs.event("probe_answer", probe_id=item.probe_id, answer=item.answer,
               outcome="recorded" if first else "repeat")
    return first


@dataclass(frozen=True)
class ProbeResult:
    """How a probe went: the dispatch's outcome, then the callback (None: none came)."""

    sent: dispatch.Outcome
    answer: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    # No callback came: what the app said to one signed here (app_takes_callbacks;
    # 0: it could not be reached from here; None: not asked).
    app_status: int | None = None


async def run_probe(rt: Runtime, timeout: float = PROBE_TIMEOUT_SECONDS,
                    target: KindTarget | None = None) -> ProbeResult:
    """Dispatch a probe and wait up to `timeout` for its callback.

    `target`: a kind's (Settings.target), to probe that kind's function (default: the
    default kind's).
    """
    s = target or rt.settings.target()
    probe_id = uuid.uuid4()
    started = time.monotonic()
    await rt.store.prune_probe_answers()
    body = dispatch.probe_body(probe_id, s, rt.tokens)
    sent = await dispatch.post(rt.http, body, s, rt.aws)
    logs.event("probe", probe_id=probe_id, outcome=type(sent).__name__.lower())
    if not isinstance(sent, dispatch.Accepted):
        return ProbeResult(sent, seconds=time.monotonic() - started)
    synced = _sync_answer(sent.body, probe_id, rt.tokens)
    deadline = started + timeout
    while True:
        found = await rt.store.probe_answer(probe_id)
        if found is not None:
            answer, detail = found
            return ProbeResult(sent, answer, detail, time.monotonic() - started)
        if synced is not None and synced.answer != "probe":
            # A sync function answered the probe as a job in its reply; no callback follows.
            return ProbeResult(sent, synced.answer, synced.detail, time.monotonic() - started)
        if time.monotonic() >= deadline:
            waited = time.monotonic() - started
            status = await app_takes_callbacks(rt) or 0
            return ProbeResult(sent, seconds=waited, app_status=status)
        await asyncio.sleep(POLL_SECONDS)


async def app_takes_callbacks(rt: Runtime) -> int | None:
    """After no callback came: does the app behind the callback URL take a callback
    signed with this side's secret?  The HTTP status of a probe item posted there
    (401: the app holds another secret), or None when it can't be reached from here.
    The item names a fresh probe id, so it touches no row and no submission."""
    probe_id = uuid.uuid4()
    item = {"queue_id": str(probe_id), "token": rt.tokens.probe(probe_id), "status": "probe",
            "probe": {"function": "aiqueue-doctor"}}
    try:
        answer = await rt.http.post(rt.settings.callback_url, json=[item], timeout=10.0)
    except httpx.HTTPError:
        return None
    return answer.status_code


def _sync_answer(body: object, probe_id: UUID, tokens: Tokens) -> ProbeAnswer | None:
    """In sync mode the reply body is an item too: what it says about the probe."""
    answer = parse_probe(body, tokens)
    return answer if answer is not None and answer.probe_id == probe_id else None
