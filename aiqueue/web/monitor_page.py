"""The operator's /ai-queue page: stats, throughput, the queue table, row history, actions.

Every route needs the login session (auth.py); every POST also its CSRF token.
Reading and acting go through reads/ and queue/ (monitor, stats, enqueue), never the
store; nothing here ever reads submission content, results or feedback.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from markupsafe import Markup
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.errors import Conflict, Invalid, NotCompleted, NotFound, Superseded, Unauthorized
from aiqueue.models import STATUSES, Status
from aiqueue.models.records import ReplayFilter
from aiqueue.notify import delivery
from aiqueue.queue import enqueue, loop, review
from aiqueue.reads import monitor, usage
from aiqueue.reads.stats import read_stats
from aiqueue.records import replay, retention
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.web import chart, costs, deliveries, gate, views
from aiqueue.web.auth import Session, check_csrf, read_form, safe_next
from aiqueue.web.state import runtime
from aiqueue.web.templating import environment, render

PATH = "/ai-queue"
PAGE_SIZE, MAX_PAGE_SIZE = 50, 200
WINDOW_SECONDS, BUCKET_SECONDS = 24 * 3600, 300
POLL_MS, CHART_POLL_MS = 4000, 60_000
LIVE, CHART = "ai_queue_live.html", "ai_queue_chart.html"


@dataclass(frozen=True)
class Filters:
    """The table's filters and page size, from the query string."""

    status: Status | None
    assignment_id: str | None
    limit: int
    group: str | None = None
    kind: str | None = None

    @classmethod
    def parse(cls, request: Request) -> Filters:
        """Raise Invalid for a status, assignment or limit the page cannot show."""
        q = request.query_params
        raw_assignment = (q.get("assignment_id") or "").strip()
        raw_group = (q.get("group") or "").strip()
        limit_raw = q.get("limit") or str(PAGE_SIZE)
        if not limit_raw.isdigit() or not 1 <= int(limit_raw) <= MAX_PAGE_SIZE:
            raise Invalid(f"limit must be between 1 and {MAX_PAGE_SIZE}")
        return cls(
            status=wire.parse_status(q.get("status")),
            assignment_id=wire.parse_assignment_id(raw_assignment) if raw_assignment else None,
            limit=int(limit_raw),
            group=wire.parse_group(raw_group) if raw_group else None,
            kind=wire.parse_kind(q.get("kind")) if q.get("kind") else None,
        )

    def params(self) -> dict[str, str | None]:
        return {"status": self.status, "assignment_id": self.assignment_id,
                "group": self.group, "kind": self.kind,
                "limit": str(self.limit) if self.limit != PAGE_SIZE else None}


async def _live_context(rt: Runtime, session: Session, request: Request, f: Filters
                        ) -> dict[str, Any]:
    """Everything the live part (stats, table) renders; queries run concurrently."""
    q = request.query_params
    after, before = views.decode_cursor(q.get("after")), views.decode_cursor(q.get("before"))
    s = rt.settings
    stats, control, (rows, has_newer, has_older) = await asyncio.gather(
        read_stats(rt),
        monitor.control(rt),
        monitor.page_rows(rt, status=f.status, assignment_id=f.assignment_id, limit=f.limit,
                          after=after, before=None if after else before, group=f.group,
                          kind=f.kind),
    )
    now = datetime.now(UTC)
    here = views.page_url(PATH, {**f.params(), "after": q.get("after"), "before": q.get("before")})
    return {
        "header": views.header(stats, now, paused_by=control.paused_by,
                               paused_at=control.paused_at),
        "rows": [views.table_row(r, now, _attempts(s, r.kind)) for r in rows],
        "pools": views.pool_rows(stats, now),
        "paging": views.paging(PATH, f.params(), rows, has_newer=has_newer,
                               has_older=has_older),
        "filters": f,
        "csrf": session.csrf,
        "back": here,
    }


def _attempts(s: Settings, kind: str) -> int:
    """The attempts a row of `kind` may use (its own, else QUEUE_MAX_ATTEMPTS)."""
    declared = s.queue.kinds.get(kind)
    return (declared.max_attempts if declared else None) or s.max_attempts


async def _chart_context(rt: Runtime) -> dict[str, Any]:
    buckets = await monitor.throughput(rt, WINDOW_SECONDS, BUCKET_SECONDS)
    summary = await usage.cost_summary(rt)
    outbox = await delivery.panel(rt)
    return {"chart": chart.chart(buckets, bucket_seconds=BUCKET_SECONDS),
            "costs": costs.cost_card(summary),
            "notify": deliveries.panel(outbox, datetime.now(UTC),
                                       enabled=delivery.enabled(rt.settings))}


def _render(template: str, context: dict[str, Any]) -> tuple[Markup, str]:
    """A fragment as HTML and its ETag, so polls can answer 304 when unchanged."""
    html = environment().get_template(template).render(**context)
    return Markup(html), '"' + hashlib.sha256(html.encode()).hexdigest()[:20] + '"'


@gate.session()
async def page(request: Request, session: Session) -> Response:
    try:
        f = Filters.parse(request)
    except Invalid as exc:
        return _error_page(400, exc.detail)
    rt = await runtime(request)
    live, chart, assignments = await asyncio.gather(
        _live_context(rt, session, request, f), _chart_context(rt),
        monitor.assignment_ids(rt, 500))
    live_html, etag = _render(LIVE, live)
    chart_html, chart_etag = _render(CHART, chart)
    q = request.query_params
    fragment_url = views.page_url(f"{PATH}/fragment", {
        **f.params(), "after": q.get("after"), "before": q.get("before")})
    notice = views.notice_text(q.get("notice"), n=q.get("n"), row=q.get("row"))
    return render("ai_queue.html", **live, live_html=live_html, etag=etag,
                  chart_html=chart_html, chart_etag=chart_etag, user=session.user,
                  statuses=STATUSES, assignments=assignments, fragment_url=fragment_url,
                  kinds=sorted(rt.settings.queue.kinds),
                  poll_ms=POLL_MS, chart_poll_ms=CHART_POLL_MS, notice=notice,
                  kept=retention.periods(rt.settings))


@gate.session()
async def fragment(request: Request, session: Session) -> Response:
    """The live stats and table (or, with ?part=chart, the chart) for the page's polls.

    304 when the client already has this version (If-None-Match).
    """
    rt = await runtime(request)
    if request.query_params.get("part") == "chart":
        html, etag = _render(CHART, await _chart_context(rt))
    else:
        try:
            f = Filters.parse(request)
        except Invalid as exc:
            return _error_page(400, exc.detail)
        html, etag = _render(LIVE, await _live_context(rt, session, request, f))
    headers = {"etag": etag, "cache-control": "no-store"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return HTMLResponse(html, headers={**headers, "x-content-type-options": "nosniff"})


@gate.session()
async def row_detail(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    queue_id = _queue_id(request)
    found = await monitor.row_with_history(rt, queue_id) if queue_id else None
    if found is None or queue_id is None:
        return _error_page(404, "There is no queue row with this id (it may have been pruned).")
    row, attempts = found
    review_state = await review.row_review(rt, queue_id)
    now = datetime.now(UTC)
    q = request.query_params
    return render(
        "ai_queue_row.html", user=session.user, csrf=session.csrf,
        row=views.table_row(row, now, rt.settings.max_attempts),
        times=views.row_times(row), priority=row.priority,
        history=[views.history_entry(a) for a in attempts], review=review_state,
        back=f"{PATH}/rows/{queue_id}",
        notice=views.notice_text(q.get("notice"), n=q.get("n"), row=q.get("row")),
    )


# -- actions ------------------------------------------------------------------

Action = Callable[[Runtime, str, Request, dict[str, str]], Awaitable[dict[str, str]]]


async def _to_page_login(request: Request) -> Response:
    # A form post can't be repeated after signing in: back to the page afterwards.
    return RedirectResponse(f"{PATH}/login?next={PATH}", status_code=303)


async def _act(request: Request, session: Session, action: Action) -> Response:
    """CSRF, the action, then back to the page with a notice; kicks the chain."""
    form = await read_form(request)
    try:
        check_csrf(session, form)
    except Unauthorized:
        return _error_page(403, "This form's security token is missing or out of date. "
                                "Nothing was changed; reload the page and try again.")
    rt = await runtime(request)
    notice = await action(rt, session.user, request, form)
    target = views.with_params(safe_next(form.get("back")), notice)
    return RedirectResponse(target, status_code=303,
                            background=BackgroundTask(loop.after_action, rt))


def _queue_id(request: Request) -> UUID | None:
    try:
        return wire.parse_uuid(request.path_params["queue_id"], "queue row")
    except NotFound:
        return None


def _form_assignment(form: dict[str, str]) -> str | None:
    raw = form.get("assignment_id", "").strip()
    try:
        return wire.parse_assignment_id(raw) if raw else None
    except Invalid:
        return None


async def _retry_one(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                     ) -> dict[str, str]:
    queue_id = _queue_id(request)
    if queue_id is None:
        return {"notice": "missing"}
    try:
        await enqueue.retry_row(rt, queue_id, actor)
    except NotFound:
        return {"notice": "missing"}
    except Conflict:
        return {"notice": "not_failed", "row": str(queue_id)}
    return {"notice": "retried", "row": str(queue_id)}


async def _cancel_one(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                      ) -> dict[str, str]:
    queue_id = _queue_id(request)
    if queue_id is None or not await monitor.cancel_row(rt, queue_id, actor):
        return {"notice": "not_pending", "row": str(queue_id or "")}
    return {"notice": "cancelled", "row": str(queue_id)}


async def _review_one(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                      ) -> dict[str, str]:
    queue_id = _queue_id(request)
    if queue_id is None:
        return {"notice": "missing"}
    row = {"row": str(queue_id)}
    try:
        if form.get("review_action") == "revert":
            await review.revert(rt, queue_id, actor)
            return {"notice": "reverted", **row}
        await review.accept(rt, queue_id, actor)
        return {"notice": "accepted", **row}
    except NotFound:
        return {"notice": "missing"}
    except Superseded:
        return {"notice": "superseded", **row}
    except NotCompleted:
        return {"notice": "not_completed", **row}


async def _retry_all(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                     ) -> dict[str, str]:
    # Replay by filter (CONTRACT §9e): one statement, the rows still failed only.
    where = ReplayFilter(assignment_id=_form_assignment(form))
    answer, _ = await replay.replay(rt, replay.ReplayRequest(where, False, ""), actor=actor)
    return {"notice": "retried_all", "n": str(answer["replayed"])}


async def _cancel_pending(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                          ) -> dict[str, str]:
    assignment = _form_assignment(form)
    if assignment is None:
        return {"notice": "missing_assignment"}
    n = await monitor.cancel_pending(rt, assignment, actor)
    return {"notice": "cancelled_all", "n": str(n)}


async def _pause(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                 ) -> dict[str, str]:
    await monitor.set_paused(rt, True, actor)
    return {"notice": "paused"}


async def _resume(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                  ) -> dict[str, str]:
    await monitor.set_paused(rt, False, actor)
    return {"notice": "resumed"}


def _route(action: Action) -> Callable[[Request], Awaitable[Response]]:
    @gate.session(_to_page_login)
    async def endpoint(request: Request, session: Session) -> Response:
        return await _act(request, session, action)

    endpoint.__name__ = action.__name__.lstrip("_")
    return endpoint


def _error_page(status: int, message: str) -> Response:
    titles = {400: "Bad request", 403: "Forbidden", 404: "Not found"}
    return render("ai_queue_error.html", status_code=status, title=titles.get(status, "Error"),
                  message=message)


ROUTES = [
    Route(PATH, page, methods=["GET"]),
    Route(f"{PATH}/fragment", fragment, methods=["GET"]),
    Route(f"{PATH}/rows/{{queue_id}}", row_detail, methods=["GET"]),
    Route(f"{PATH}/rows/{{queue_id}}/retry", _route(_retry_one), methods=["POST"]),
    Route(f"{PATH}/rows/{{queue_id}}/cancel", _route(_cancel_one), methods=["POST"]),
    Route(f"{PATH}/rows/{{queue_id}}/review", _route(_review_one), methods=["POST"]),
    Route(f"{PATH}/retry-failed", _route(_retry_all), methods=["POST"]),
    Route(f"{PATH}/cancel-pending", _route(_cancel_pending), methods=["POST"]),
    Route(f"{PATH}/pause", _route(_pause), methods=["POST"]),
    Route(f"{PATH}/resume", _route(_resume), methods=["POST"]),
]
