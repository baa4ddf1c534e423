"""The teacher's results page: the table, its buttons' handlers and the JSON the page polls.

Behind the /ai-queue login. Buttons post CSRF-protected forms (or fetch with the
CSRF token) to these handlers, which call the service layer directly; the page
gets a short-lived, assignment-bound token for live events, never the queue secret.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.errors import Invalid
from aiqueue.models import Status, SubmissionResult
from aiqueue.queue import loop, progress, review
from aiqueue.reads import teacher
from aiqueue.web import gate
from aiqueue.web.auth import Session, check_csrf, read_form
from aiqueue.web.estimate import capped_text, estimate_text, paused_text
from aiqueue.web.state import runtime
from aiqueue.web.templating import render

STATUS_LABELS: dict[Status, str] = {
    "pending": "queued", "processing": "marking…", "completed": "marked",
    "failed": "failed", "cancelled": "cancelled", "expired": "expired",
}


# -- pure view helpers ------------------------------------------------------

def fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return "estimating time left"
    if seconds < 60:
        return "less than a minute left"
    return f"about {round(seconds / 60)} min left"


def fmt_duration(seconds: float) -> str:
    """'under a minute', 'about 12 min', 'about 3 h'."""
    if seconds < 60:
        return "under a minute"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min"
    return f"about {round(seconds / 3600)} h"


def fmt_by(when: datetime) -> str:
    """'Tue 14:00 UTC': when an overnight run is due."""
    return when.astimezone(UTC).strftime("%a %H:%M UTC")


def fmt_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def mark_text(result: dict[str, Any] | None) -> str:
    """'7 / 10' for a stored AI result, '' when there is none."""
    if not result or result.get("score") is None:
        return ""
    text = fmt_number(result["score"])
    if result.get("max_score") is not None:
        text += f" / {fmt_number(result['max_score'])}"
    return text


def usage_text(p: dict[str, Any]) -> str:
    """'2,431 tokens · $0.0123' for the run ('' before any result; cost unknown: said so)."""
    if not p.get("tokens") and not p.get("cost_usd") and not p.get("unpriced_jobs"):
        return ""
    text = f"{p['tokens']:,} tokens"
    if p.get("cost_usd") is not None:
        text += f" · ${p['cost_usd']:.4f}"
    if p.get("unpriced_jobs"):
        text += f" ({p['unpriced_jobs']} without a known price)"
    return text


def review_text(p: dict[str, Any]) -> str:
    """'2 accepted, 1 reverted, 5 to review' over the run's applied results."""
    r = p.get("review") or {}
    parts = [f"{r[k]} {label}" for k, label in (("accepted", "accepted"),
             ("reverted", "reverted"), ("unreviewed", "to review")) if r.get(k)]
    return ", ".join(parts)


def progress_view(p: dict[str, Any]) -> dict[str, Any]:
    """The progress bar: percent finished and '23 of 48 marked — about 2 min left'."""
    total = p["total"]
    finished = p["completed"] + p["failed"] + p["cancelled"] + p.get("expired", 0)
    active = p["pending"] + p["processing"] > 0
    paused = paused_text(p.get("resumes_at"), p.get("paused_by"))
    extra = {"usage_text": usage_text(p), "review_text": review_text(p), "paused": bool(paused)}
    if total == 0:
        return {**p, **extra, "percent": 0, "active": False, "text": "Not marked yet."}
    text = f"{p['completed']} of {total} marked"
    extras = [f"{p[k]} {k}" for k in ("failed", "cancelled", "expired") if p.get(k)]
    if extras:
        text += f" ({', '.join(extras)})"
    if paused:
        text += f" — {paused}"
    if p.get("scheduled"):
        text += f" — {scheduled_text(p['scheduled'], p.get('scheduled_for'))}"
    elif active:
        text += f" — {fmt_eta(p['estimated_remaining_seconds'])}"
    return {**p, **extra, "percent": math.floor(100 * finished / total), "active": active,
            "text": text}


def scheduled_text(n: int, at: str | None) -> str:
    """'12 scheduled for 2026-11-27 16:00 UTC' (the page turns the time into local time)."""
    if not at:
        return f"{n} scheduled"
    moment = datetime.fromisoformat(at).astimezone(UTC)
    return f"{n} scheduled for {moment:%Y-%m-%d %H:%M} UTC"


def row_view(row: SubmissionResult) -> dict[str, Any]:
    status = row.queue_status
    if status == "completed" or (status is None and row.ai_result):
        label = ""
    else:
        label = STATUS_LABELS[status] if status else "not marked"
    adjusted = mark_text(row.adjusted_result)
    return {
        "id": str(row.submission_id),
        "name": row.student_name or f"Submission {str(row.submission_id)[:8]}",
        "content": row.content,
        "mark": mark_text(row.ai_result),
        "adjusted": adjusted,
        "review": row.review or "",
        "reviewable": row.result_queue_id is not None,
        "progress": progress_message(row.progress) if status == "processing" else "",
        "feedback": (row.ai_result or {}).get("feedback") or "",
        "status": status or "none",
        "label": label,
        "marked": row.ai_marked_at is not None or row.ai_result is not None,
    }


MARK_TITLE = "Mark this submission with AI"
REMARK_TITLE = "This submission already has an AI mark: mark it again, replacing that mark"


def progress_message(item: dict[str, Any] | None) -> str:
    """'criterion 2 of 5 (2/5)' from a progress item; '' without one."""
    if not item:
        return ""
    message = str(item.get("message") or "")[:200]
    current, total = item.get("current"), item.get("total")
    if isinstance(current, int) and isinstance(total, int) and total > 0:
        return f"{message} ({current}/{total})" if message else f"{current}/{total}"
    return message


def page_url(assignment_id: str) -> str:
    return f"/results/assignments/{quote(assignment_id, safe='')}"


# -- handlers ---------------------------------------------------------------

def _assignment(request: Request) -> str:
    return wire.parse_assignment_id(request.path_params["assignment_id"])


def _answer(request: Request, assignment_id: str, body: dict[str, Any],
            background: BackgroundTask | None = None) -> Response:
    # fetch() from the page asks for JSON; a plain form post goes back to the page.
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(body, background=background)
    return RedirectResponse(page_url(assignment_id), status_code=303, background=background)


@gate.session()
async def page(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    assignment_id = _assignment(request)
    data = await teacher.load(rt, assignment_id)
    base = page_url(assignment_id)
    payload = data.info.payload if data.info else {}
    rows = [row_view(r) for r in data.rows]
    choices = await teacher.mark_choices(rt, sum(not r["marked"] for r in rows))
    live = {
        "remark_title": REMARK_TITLE,
        "assignment_id": assignment_id,
        "token": rt.tokens.events(assignment_id),
        "cursor": str(data.cursor),
        "urls": {"progress": f"{base}/progress", "token": f"{base}/events-token",
                 "submission": f"{base}/submissions/"},
    }
    return render(
        "results.html",
        assignment_id=assignment_id,
        title=data.info.title if data.info and data.info.title else assignment_id,
        question=payload.get("question"),
        rubric=payload.get("rubric"),
        max_score=payload.get("max_score"),
        can_mark=data.info is not None,
        rows=rows,
        marked_count=sum(r["marked"] for r in rows),
        live_estimate=fmt_duration(choices.live_seconds),
        overnight_by=fmt_by(choices.overnight_by) if choices.overnight_by else None,
        overnight_share=f"{round(choices.overnight_price * 100)} %",
        MARK_TITLE=MARK_TITLE,
        REMARK_TITLE=REMARK_TITLE,
        progress=progress_view(data.progress),
        csrf=session.csrf,
        base=base,
        live=live,
    )


@gate.session(gate.unauthorized)
async def mark(request: Request, session: Session) -> Response:
    form = await read_form(request)
    check_csrf(session, form)
    rt = await runtime(request)
    assignment_id = _assignment(request)
    raw = form.get("submission_id")
    submission_id = wire.parse_uuid(raw, "submission") if raw else None
    remark = form.get("remark") == "true"
    if form.get("dry_run") == "true":
        # The estimate Mark All shows before it sends (CONTRACT §9c).
        d = await teacher.mark(rt, assignment_id, submission_id, remark, dry_run=True)
        return JSONResponse({**d, "text": estimate_text(d), "capped_text": capped_text(d)})
    lane: wire.Lane = "batch" if form.get("lane") == "batch" else "live"
    # "Mark at …": the page sends the browser's local time as UTC RFC 3339 (§9d).
    raw_at = form.get("not_before")
    not_before, _ = wire.parse_times({"not_before": raw_at or None}, datetime.now(UTC))
    if raw_at is not None and not_before is None:
        raise Invalid("choose the date and time to mark at")
    answer = await teacher.mark(rt, assignment_id, submission_id, remark, lane,
                                 not_before)
    if not_before is not None:
        answer = {**answer, "not_before": not_before.isoformat()}
    return _answer(request, assignment_id, answer,
                   BackgroundTask(loop.after_enqueue, rt, answer["enqueued"]))


@gate.session(gate.unauthorized)
async def cancel(request: Request, session: Session) -> Response:
    check_csrf(session, await read_form(request))
    rt = await runtime(request)
    assignment_id = _assignment(request)
    answer = await progress.cancel_assignment(rt, assignment_id, actor="teacher")
    return _answer(request, assignment_id, answer, BackgroundTask(loop.after_cancel, rt))


@gate.session(gate.unauthorized)
async def review_row(request: Request, session: Session) -> Response:
    form = await read_form(request)
    check_csrf(session, form)
    rt = await runtime(request)
    assignment_id = _assignment(request)
    submission_id = wire.parse_uuid(form.get("submission_id", ""), "submission")
    action = "revert" if form.get("review_action") == "revert" else "accept"
    # The operator's login is the actor: the page is behind the /ai-queue sign-in.
    answer = await teacher.review_row(rt, assignment_id, submission_id, action, session.user,
                                      form.get("score"))
    return _answer(request, assignment_id, answer)


@gate.session(gate.unauthorized)
async def accept_all(request: Request, session: Session) -> Response:
    check_csrf(session, await read_form(request))
    rt = await runtime(request)
    assignment_id = _assignment(request)
    answer = await review.review_run(rt, assignment_id, "accept", session.user)
    return _answer(request, assignment_id, answer)


@gate.session(gate.unauthorized)
async def progress_json(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    p = await progress.assignment_progress(rt, _assignment(request))
    return JSONResponse(progress_view(p), headers={"cache-control": "no-store"})


@gate.session(gate.unauthorized)
async def events_token(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    return JSONResponse({"token": rt.tokens.events(_assignment(request))},
                        headers={"cache-control": "no-store"})


@gate.session(gate.unauthorized)
async def submission(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    submission_id = wire.parse_uuid(request.path_params["submission_id"], "submission")
    body = await teacher.submission(rt, _assignment(request), submission_id)
    body["mark"] = mark_text(body)
    body["progress_text"] = progress_message(body["progress"])
    return JSONResponse(body, headers={"cache-control": "no-store"})


ROUTES = [
    Route("/results/assignments/{assignment_id}", page, methods=["GET"]),
    Route("/results/assignments/{assignment_id}/mark", mark, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/cancel", cancel, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/review", review_row, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/accept-all", accept_all, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/progress", progress_json, methods=["GET"]),
    Route("/results/assignments/{assignment_id}/events-token", events_token, methods=["GET"]),
    Route("/results/assignments/{assignment_id}/submissions/{submission_id}", submission,
          methods=["GET"]),
]
