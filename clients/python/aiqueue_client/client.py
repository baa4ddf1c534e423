"""AsyncMarkingClient: the marking API over httpx, with safe retries and live events."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any, Literal, cast
from urllib.parse import quote

from aiqueue_client.errors import MarkingError, error_from
from aiqueue_client.events import follow
from aiqueue_client.holds import HoldCalls
from aiqueue_client.transport import actor_header as _actor
from aiqueue_client.types import (
    Accepted,
    AgreementReport,
    CanaryRun,
    CanaryRuns,
    CancelAnswer,
    EnqueueAccepted,
    Enqueued,
    EnqueueEstimate,
    Erased,
    MarkingEvent,
    Released,
    RemarkAccepted,
    RemarkEstimate,
    ReplayAnswer,
    ResultHistory,
    Reverted,
    RowDetail,
    RunAccepted,
    RunProgress,
    RunReverted,
    SubmissionStatus,
    UsageReport,
)


class AsyncMarkingClient(HoldCalls):
    """One app's marking API: `AsyncMarkingClient("https://app.example", secret)`.

    Use it as an async context manager, or pass your own `httpx.AsyncClient`
    (its base URL and auth header are then yours to set).
    """

    async def enqueue(self, assignment_id: str, submission_ids: Sequence[str | uuid.UUID], *,
                      idempotency_key: str | None = None, priority: int | None = None,
                      payload: dict[str, Any] | None = None, group: str | None = None,
                      remark: bool | None = None, kind: str | None = None,
                      not_before: datetime | str | None = None,
                      delay_seconds: float | None = None,
                      expires_at: datetime | str | None = None,
                      expire_after_seconds: float | None = None,
                      same_answers: Literal["mark_once", "mark_each"] | None = None,
                      calibrate: int | Sequence[str | uuid.UUID] | None = None,
                      release_when: dict[str, float] | None = None,
                      lane: Literal["live", "batch"] | None = None,
                      deadline: datetime | str | None = None) -> Enqueued:
        """Enqueue submissions for marking; retried safely under one Idempotency-Key.

        Without a key one is made, so a retry after a lost answer enqueues nothing twice.
        `kind` names the function and pool that mark them (aiqueue.toml; default `mark`).
        `not_before`/`delay_seconds` schedule the rows; `expires_at`/`expire_after_seconds`
        end them `expired` if they are not dispatched by then (an aware datetime or an
        RFC 3339 string).  `same_answers`: "mark_once" (the default) marks answers that
        are the same after normalising once and copies the mark; "mark_each" marks each.
        `calibrate` (a number of rows, or submission ids) marks those first and holds the
        rest until `release` (or `release_when`'s thresholds).  `lane` "batch" sends the
        rows by the pool's batch API (cheaper, marked within `deadline`, an aware datetime or
        an RFC 3339 string); "live" marks them now; unset, the kind's own lane.
        """
        key = idempotency_key or str(uuid.uuid4())
        body: dict[str, Any] = {"assignment_id": assignment_id,
                                "submission_ids": [str(s) for s in submission_ids]}
        for name, value in (("priority", priority), ("payload", payload), ("group", group),
                            ("remark", remark), ("kind", kind),
                            ("not_before", _rfc3339(not_before)),
                            ("delay_seconds", delay_seconds),
                            ("expires_at", _rfc3339(expires_at)),
                            ("expire_after_seconds", expire_after_seconds),
                            ("same_answers", same_answers),
                            ("calibrate", _calibrate(calibrate)),
                            ("release_when", release_when), ("lane", lane),
                            ("deadline", _rfc3339(deadline))):
            if value is not None:
                body[name] = value
        response = await self._call("POST", "/api/marking/enqueue", json=body,
                                    headers={"Idempotency-Key": key}, retry=True)
        return Enqueued(cast(EnqueueAccepted, response.json()), key,
                        response.headers.get("idempotent-replayed") == "true")

    async def estimate(self, assignment_id: str, submission_ids: Sequence[str | uuid.UUID], *,
                       group: str | None = None, remark: bool | None = None,
                       calibrate: int | Sequence[str | uuid.UUID] | None = None
                       ) -> EnqueueEstimate:
        """What an enqueue would add, use and cost, and which spend cap would stop it.

        A dry run: nothing is written.  Show it before a Mark All.
        """
        body: dict[str, Any] = {"assignment_id": assignment_id, "dry_run": True,
                                "submission_ids": [str(s) for s in submission_ids]}
        for name, value in (("group", group), ("remark", remark),
                            ("calibrate", _calibrate(calibrate))):
            if value is not None:
                body[name] = value
        response = await self._call("POST", "/api/marking/enqueue", json=body, retry=True)
        return cast(EnqueueEstimate, response.json())

    async def remark(self, assignment_id: str, payload: dict[str, Any], *,
                     include_reviewed: bool = False, debounce_seconds: float = 60,
                     dry_run: bool = False, actor: str | None = None
                     ) -> RemarkAccepted | RemarkEstimate:
        """A new payload (the edited rubric) for the assignment: only the answers marked
        under another one are marked again; reviewed ones are kept unless
        `include_reviewed`; an edit within `debounce_seconds` replaces the one before.
        `dry_run`: the counts and the estimate, nothing enqueued."""
        body = {"assignment_id": assignment_id, "payload": payload,
                "include_reviewed": include_reviewed, "debounce_seconds": debounce_seconds,
                "dry_run": dry_run}
        response = await self._call("POST", "/api/marking/remark", json=body,
                                    headers=_actor(actor), retry=True)
        if dry_run:
            return cast(RemarkEstimate, response.json())
        return cast(RemarkAccepted, response.json())

    async def release(self, run_id: str | uuid.UUID, *, actor: str | None = None) -> Released:
        """Release a calibrated run's held rows (none left: `released` is 0)."""
        path = f"/api/marking/runs/{_seg(run_id)}/release"
        return cast(Released, (await self._call("POST", path, headers=_actor(actor),
                                                retry=True)).json())

    async def agreement(self, *, assignment_id: str | None = None, group: str | None = None,
                        kind: str | None = None, model: str | None = None,
                        since: datetime | str | None = None) -> AgreementReport:
        """How often the teacher's reviews agree with the AI's scores."""
        params = {k: v for k, v in (("assignment_id", assignment_id), ("group", group),
                                    ("kind", kind), ("model", model),
                                    ("since", _rfc3339(since))) if v is not None}
        answer = await self._call("GET", "/api/marking/agreement", params=params, retry=True)
        return cast(AgreementReport, answer.json())

    async def canary_runs(self, kind: str | None = None) -> CanaryRuns:
        """Drift canary runs, newest first (of one kind, or every kind's)."""
        params = {"kind": kind} if kind is not None else {}
        answer = await self._call("GET", "/api/marking/canary", params=params, retry=True)
        return cast(CanaryRuns, answer.json())

    async def run_canary(self, kind: str) -> CanaryRun:
        """Start a drift canary of the kind now (skipped, saying why, over its max_share)."""
        path = f"/api/marking/canary/{_seg(kind)}/run"
        return cast(CanaryRun, (await self._call("POST", path)).json())

    async def accept_canary(self, kind: str, *, actor: str | None = None) -> CanaryRun:
        """Accept the kind's drift: that canary becomes the yardstick, the gate lifts."""
        path = f"/api/marking/canary/{_seg(kind)}/accept"
        return cast(CanaryRun, (await self._call("POST", path, headers=_actor(actor))).json())

    async def status(self, submission_id: str | uuid.UUID) -> SubmissionStatus:
        """Status, queue position and ETA of the submission's latest row."""
        path = f"/api/marking/submissions/{_seg(submission_id)}/status"
        return cast(SubmissionStatus, (await self._call("GET", path, retry=True)).json())

    async def progress(self, assignment_id: str) -> RunProgress:
        """Counts, ETA, tokens and cost of the assignment's latest run."""
        path = f"/api/marking/assignments/{_seg(assignment_id)}/progress"
        return cast(RunProgress, (await self._call("GET", path, retry=True)).json())

    async def results(self, submission_id: str | uuid.UUID) -> ResultHistory:
        """The submission's applied results, newest first."""
        path = f"/api/marking/submissions/{_seg(submission_id)}/results"
        return cast(ResultHistory, (await self._call("GET", path, retry=True)).json())

    async def accept(self, queue_id: str | uuid.UUID, *, result: dict[str, Any] | None = None,
                     actor: str | None = None) -> Accepted:
        """Accept a row's result, optionally with the teacher's adjusted result."""
        path = f"/api/marking/queue/{_seg(queue_id)}/accept"
        body = {"result": result} if result is not None else None
        answer = await self._call("POST", path, json=body, headers=_actor(actor))
        return cast(Accepted, answer.json())

    async def revert(self, queue_id: str | uuid.UUID, *, actor: str | None = None) -> Reverted:
        """Put the submission's mark back to what it was before this row's result."""
        path = f"/api/marking/queue/{_seg(queue_id)}/revert"
        return cast(Reverted, (await self._call("POST", path, headers=_actor(actor))).json())

    async def accept_run(self, assignment_id: str, *, actor: str | None = None) -> RunAccepted:
        path = f"/api/marking/assignments/{_seg(assignment_id)}/accept"
        return cast(RunAccepted, (await self._call("POST", path, headers=_actor(actor))).json())

    async def revert_run(self, assignment_id: str, *, actor: str | None = None) -> RunReverted:
        path = f"/api/marking/assignments/{_seg(assignment_id)}/revert"
        return cast(RunReverted, (await self._call("POST", path, headers=_actor(actor))).json())

    async def cancel(self, assignment_id: str) -> CancelAnswer:
        """The assignment's pending rows become cancelled."""
        path = f"/api/marking/assignments/{_seg(assignment_id)}/cancel"
        return cast(CancelAnswer, (await self._call("POST", path, retry=True)).json())

    async def row(self, queue_id: str | uuid.UUID) -> RowDetail:
        """One row, its attempts and its result's status (no content)."""
        path = f"/api/marking/rows/{_seg(queue_id)}"
        return cast(RowDetail, (await self._call("GET", path, retry=True)).json())

    async def cancel_row(self, queue_id: str | uuid.UUID) -> RowDetail:
        """Cancel one pending or processing row (its late result is refused)."""
        path = f"/api/marking/rows/{_seg(queue_id)}/cancel"
        return cast(RowDetail, (await self._call("POST", path)).json())

    async def fail_row(self, queue_id: str | uuid.UUID, note: str) -> RowDetail:
        """End one pending row as failed with last_error "operator" (the note is kept on
        /ai-queue)."""
        path = f"/api/marking/rows/{_seg(queue_id)}/fail"
        answer = await self._call("POST", path, json={"note": note})
        return cast(RowDetail, answer.json())

    async def usage(self, *, since: str | None = None, until: str | None = None,
                    by: str = "day") -> UsageReport:
        """Tokens and cost by day, assignment, group, model, kind or pool (YYYY-MM-DD)."""
        params = {"by": by, **({"since": since} if since else {}),
                  **({"until": until} if until else {})}
        answer = await self._call("GET", "/api/marking/usage", params=params, retry=True)
        return cast(UsageReport, answer.json())

    async def erase(self, submission_id: str | uuid.UUID) -> Erased:
        """Erase a submission's data from every queue table (safe to repeat)."""
        path = f"/api/marking/submissions/{_seg(submission_id)}"
        return cast(Erased, (await self._call("DELETE", path, retry=True)).json())

    async def replay(self, *, dry_run: bool = False, idempotency_key: str | None = None,
                     **where: str) -> ReplayAnswer:
        """Failed rows matching the filter back to pending (`assignment_id`, `group`, `kind`,
        `error`, `failed_after`, `failed_before`); retried safely under one Idempotency-Key."""
        key = idempotency_key or str(uuid.uuid4())
        body = {"filter": where, "dry_run": dry_run}
        answer = await self._call("POST", "/api/marking/replay", json=body,
                                  headers={"Idempotency-Key": key}, retry=True)
        return cast(ReplayAnswer, answer.json())

    async def export(self, *, since: str | None = None, until: str | None = None,
                     format: str = "csv", feedback: bool = False) -> AsyncIterator[bytes]:
        """The period's attempts and results as CSV or JSONL bytes, as they stream in."""
        params = {"format": format, **({"from": since} if since else {}),
                  **({"to": until} if until else {}),
                  **({"include": "feedback"} if feedback else {})}
        async with self.http.stream("GET", "/api/marking/export", params=params) as response:
            if response.status_code >= 400:
                await response.aread()
                raise error_from(response)
            async for chunk in response.aiter_bytes():
                yield chunk

    def events(self, assignment_id: str, *, last_event_id: str | None = None,
               read_timeout: float = 45.0) -> AsyncIterator[MarkingEvent]:
        """Live events of the assignment; reconnects and resumes by itself (see `follow`)."""
        return follow(self.http, assignment_id, last_event_id=last_event_id,
                      read_timeout=read_timeout)

    @contextlib.asynccontextmanager
    async def watch(self, assignment_id: str) -> AsyncIterator[AsyncIterator[MarkingEvent]]:
        """Live events from the moment the block starts: enqueue inside it, miss nothing.

        `async with client.watch("hw-7") as events:` returns once the stream is open.
        """
        opened = asyncio.Event()
        stream = follow(self.http, assignment_id, on_open=opened.set)
        first = asyncio.ensure_future(anext(stream))
        is_open = asyncio.ensure_future(opened.wait())
        try:
            await asyncio.wait({first, is_open}, return_when=asyncio.FIRST_COMPLETED)
            if first.done():
                first.result()  # a refusal (401, 422) surfaces here
            yield _chain(first, stream)
        finally:
            for task in (first, is_open):
                task.cancel()
            await asyncio.gather(first, is_open, return_exceptions=True)
            await stream.aclose()


async def _chain(first: asyncio.Future[MarkingEvent],
                 rest: AsyncIterator[MarkingEvent]) -> AsyncIterator[MarkingEvent]:
    yield await first
    async for event in rest:
        yield event


def _rfc3339(value: datetime | str | None) -> str | None:
    """An aware datetime as RFC 3339 (a string passes as given; the server checks it)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("give a time zone-aware datetime (e.g. datetime.now(UTC))")
        return value.isoformat()
    return value


def _calibrate(value: int | Sequence[str | uuid.UUID] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return {"rows": value}
    return {"submission_ids": [str(s) for s in value]}


def _seg(value: object) -> str:
    """A path segment, escaped (an assignment id may hold any character)."""
    return quote(str(value), safe="")


__all__ = ["AsyncMarkingClient", "MarkingError"]
