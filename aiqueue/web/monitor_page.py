"""The operator's /ai-queue page as it reads: stats, throughput, the queue table, a row's history.

Every route needs the login session (gate.py); the page's buttons are
monitor_actions.py. Reading goes through reads/ (monitor, stats, usage), never
the store; nothing here ever reads submission content, results or feedback.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.errors import Invalid, NotFound
from aiqueue.models import STATUSES, Status
from aiqueue.notify import delivery
from aiqueue.queue import review
from aiqueue.reads import agreement, monitor, usage
from aiqueue.reads import batches as batch_reads
from aiqueue.reads import canary as canary_reads
from aiqueue.reads.stats import stats_and_control
from aiqueue.records import retention
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.web import batches, canaries, chart, costs, deliveries, gate, views
from aiqueue.web.agreement_views import model_rows
from aiqueue.web.auth import Session
from aiqueue.web.state import runtime
from aiqueue.web.templating import PAGE_HEADERS, environment, render

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
    (stats, control), (rows, has_newer, has_older) = await asyncio.gather(
        stats_and_control(rt),
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
    # Independent reads, at once (each on a pooled connection of its own).
    buckets, summary, outbox, open_batches, by_model, (declared, last_canaries) = \
        await asyncio.gather(monitor.throughput(rt, WINDOW_SECONDS, BUCKET_SECONDS),
                             usage.cost_summary(rt), delivery.panel(rt),
                             batch_reads.open_batches(rt), agreement.by_model(rt),
                             canary_reads.latest(rt))
    return {"batches": batches.card(open_batches, datetime.now(UTC),
                                    enabled=bool(rt.settings.queue.batch_pools)),
            "canaries": canaries.card(declared, last_canaries, datetime.now(UTC)),
            "chart": chart.chart(buckets, bucket_seconds=BUCKET_SECONDS),
            "costs": costs.cost_card(summary),
            "agreement": model_rows(by_model),
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
        return error_page(400, exc.detail)
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
            return error_page(400, exc.detail)
        html, etag = _render(LIVE, await _live_context(rt, session, request, f))
    headers = {"etag": etag, "cache-control": "no-store"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return HTMLResponse(html, headers={**PAGE_HEADERS, **headers})


@gate.session()
async def row_detail(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    queue_id = queue_id_of(request)
    found = await monitor.row_with_history(rt, queue_id) if queue_id else None
    if found is None or queue_id is None:
        return error_page(404, "There is no queue row with this id (it may have been pruned).")
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


def queue_id_of(request: Request) -> UUID | None:
    """The path's queue row id; None when it is not one (the page answers 404 or a notice)."""
    try:
        return wire.parse_uuid(request.path_params["queue_id"], "queue row")
    except NotFound:
        return None


def error_page(status: int, message: str) -> Response:
    """The page's own error page (HTML), for a person rather than a client."""
    titles = {400: "Bad request", 403: "Forbidden", 404: "Not found"}
    return render("ai_queue_error.html", status_code=status, title=titles.get(status, "Error"),
                  message=message)


ROUTES = [
    Route(PATH, page, methods=["GET"]),
    Route(f"{PATH}/fragment", fragment, methods=["GET"]),
    Route(f"{PATH}/rows/{{queue_id}}", row_detail, methods=["GET"]),
]
