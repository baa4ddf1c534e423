"""The teacher's results page: its handlers, its buttons' and the JSON the page polls.

Behind the /ai-queue login. Buttons post forms (or fetch with the CSRF token);
the gate checks the token (gate.form), the handlers call the rules in queue/ and
reads/, and teacher_views.py puts the answers into words. The page gets a
short-lived, assignment-bound token for live events, never the queue secret.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.errors import Invalid, NotFound
from aiqueue.models import SubmissionResult
from aiqueue.queue import actions, calibration, loop, progress, review
from aiqueue.queue import remark as remarking
from aiqueue.reads import agreement, holds, teacher
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import Lane
from aiqueue.web import gate
from aiqueue.web.agreement_views import card_view, with_held
from aiqueue.web.auth import Session
from aiqueue.web.estimate import capped_text, estimate_text
from aiqueue.web.holds_views import needs_view
from aiqueue.web.http import respond
from aiqueue.web.state import runtime
from aiqueue.web.teacher_views import (
    CHECK_FIRST,
    HELD_LABEL,
    MARK_TITLE,
    REMARK_TITLE,
    fmt_by,
    fmt_duration,
    mark_text,
    page_url,
    progress_message,
    progress_view,
    remark_button_text,
    remarked_view,
    row_view,
)
from aiqueue.web.templating import render
from aiqueue.web.waits import wait_text
from aiqueue.wire.remark import RemarkEstimate


def _assignment(request: Request) -> str:
    return wire.parse_assignment_id(request.path_params["assignment_id"])


def _answer(request: Request, assignment_id: str, body: dict[str, Any] | wire.Wire,
            background: BackgroundTask | None = None) -> Response:
    # fetch() from the page asks for JSON; a plain form post goes back to the page.
    if "application/json" in request.headers.get("accept", ""):
        if isinstance(body, wire.Wire):
            return respond(body, background=background)
        return JSONResponse(body, background=background)
    return RedirectResponse(page_url(assignment_id), status_code=303, background=background)


@gate.session()
async def page(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    assignment_id = _assignment(request)
    data = await teacher.load(rt, assignment_id)
    base = page_url(assignment_id)
    payload = data.info.payload if data.info else {}
    now = datetime.now(UTC)
    rows = [row_view(r) | {"wait": _wait(rt, r, now)} for r in data.rows]
    unmarked = sum(not r["marked"] for r in rows)
    choices = await teacher.mark_choices(rt, unmarked)
    first = await teacher.mark_choices(rt, min(CHECK_FIRST, unmarked))
    card = await agreement.card(rt, assignment_id, data.progress.run_id)
    needs = needs_view(await holds.held(rt, assignment_id), {r["id"]: r["name"] for r in rows})
    changed = await _what_changed(rt, assignment_id, payload) if data.info else None
    live = {
        "remark_title": REMARK_TITLE,
        "assignment_id": assignment_id,
        "token": rt.tokens.events(assignment_id),
        "cursor": str(data.cursor),
        "urls": {"progress": f"{base}/progress", "token": f"{base}/events-token",
                 "submission": f"{base}/submissions/"},
        "calibration": card_view(card, _max_score(payload)),
        "held_label": HELD_LABEL,
    }
    return render(
        "results.html",
        assignment_id=assignment_id,
        title=data.info.title if data.info and data.info.title else assignment_id,
        question=payload.get("question"),
        rubric=payload.get("rubric"),
        max_score=payload.get("max_score"),
        can_mark=data.info is not None,
        remark_text=remark_button_text(changed.enqueued, changed.estimated_cost_usd)
        if changed else "",
        remark_kept=changed.reviewed_kept if changed else 0,
        rows=rows,
        marked_count=sum(r["marked"] for r in rows),
        live_estimate=fmt_duration(choices.live_seconds),
        check_first=CHECK_FIRST,
        check_first_estimate=f"{fmt_duration(first.live_seconds)}, then the rest once you "
                             "release them",
        overnight_by=fmt_by(choices.overnight_by) if choices.overnight_by else None,
        overnight_share=f"{round(choices.overnight_price * 100)} %",
        MARK_TITLE=MARK_TITLE,
        REMARK_TITLE=REMARK_TITLE,
        progress=with_held(progress_view(data.progress), card),
        csrf=session.csrf,
        base=base,
        live=live,
        needs=needs,
    )


@gate.form(gate.unauthorized)
async def mark(request: Request, session: Session, form: dict[str, str]) -> Response:
    rt = await runtime(request)
    assignment_id = _assignment(request)
    raw = form.get("submission_id")
    submission_id = wire.parse_uuid(raw, "submission") if raw else None
    remark = form.get("remark") == "true"
    # "Check 5 first" (docs/agreement.md): that many marked first, the rest held for the release.
    calibrate = CHECK_FIRST if form.get("calibrate") == str(CHECK_FIRST) else None
    if form.get("dry_run") == "true":
        # The estimate Mark All shows before it sends (docs/concepts.md).
        d = await actions.estimate(rt, assignment_id, submission_id, remark, calibrate)
        return JSONResponse({**wire.dump(d), "text": estimate_text(d),
                             "capped_text": capped_text(d)})
    lane: Lane = "batch" if form.get("lane") == "batch" else "live"
    # "Mark at …": the page sends the browser's local time as UTC RFC 3339.
    raw_at = form.get("not_before")
    not_before, _ = wire.parse_times({"not_before": raw_at or None}, datetime.now(UTC))
    if raw_at is not None and not_before is None:
        raise Invalid("choose the date and time to mark at")
    answer = await actions.mark(rt, assignment_id, submission_id, remark, lane,
                                 not_before, calibrate)
    # The page's answer says when the rows are due, beside the API's 202 body.
    body = wire.dump(answer) | ({} if not_before is None
                                else {"not_before": not_before.isoformat()})
    return _answer(request, assignment_id, body,
                   BackgroundTask(loop.after_enqueue, rt, answer.enqueued))


async def _what_changed(rt: Runtime, assignment_id: str, payload: dict[str, Any]
                        ) -> RemarkEstimate:
    """What "Re-mark what changed" would send: the saved payload's re-mark, dry."""
    return await remarking.estimate(rt, remarking.Remark(assignment_id,
                                                         wire.payload_json(payload)))


@gate.form(gate.unauthorized)
async def remark(request: Request, session: Session, form: dict[str, str]) -> Response:
    """"Re-mark what changed": the saved payload (the host edits it) becomes the current
    one, and only the marks made under another are sent again (docs/remark.md)."""
    rt = await runtime(request)
    assignment_id = _assignment(request)
    info = await teacher.info(rt, assignment_id)
    if info is None:
        raise NotFound("this assignment has no payload to re-mark under")
    done = await remarking.remark(
        rt, remarking.Remark(assignment_id, wire.payload_json(info.payload)),
        actor=session.user)
    return _answer(request, assignment_id, remarking.accepted(done),
                   BackgroundTask(loop.after_enqueue, rt, len(done.queue_ids)))


@gate.form(gate.unauthorized)
async def cancel(request: Request, session: Session, form: dict[str, str]) -> Response:
    rt = await runtime(request)
    assignment_id = _assignment(request)
    answer = await actions.cancel_assignment(rt, assignment_id, actor="teacher")
    return _answer(request, assignment_id, answer, BackgroundTask(loop.after_cancel, rt))


@gate.form(gate.unauthorized)
async def review_row(request: Request, session: Session, form: dict[str, str]) -> Response:
    rt = await runtime(request)
    assignment_id = _assignment(request)
    submission_id = wire.parse_uuid(form.get("submission_id", ""), "submission")
    action = "revert" if form.get("review_action") == "revert" else "accept"
    # The operator's login is the actor: the page is behind the /ai-queue sign-in.
    answer = await actions.review_row(rt, assignment_id, submission_id, action, session.user,
                                      form.get("score"))
    return _answer(request, assignment_id, answer, BackgroundTask(loop.after_review, rt))


@gate.form(gate.unauthorized)
async def accept_all(request: Request, session: Session, form: dict[str, str]) -> Response:
    rt = await runtime(request)
    assignment_id = _assignment(request)
    answer = await review.review_run(rt, assignment_id, "accept", session.user)
    return _answer(request, assignment_id, answer, BackgroundTask(loop.after_review, rt))


@gate.form(gate.unauthorized)
async def release(request: Request, session: Session, form: dict[str, str]) -> Response:
    """The card's "Release the other 25": the latest run's held rows (docs/agreement.md)."""
    rt = await runtime(request)
    assignment_id = _assignment(request)
    p = await progress.assignment_progress(rt, assignment_id)
    if p.run_id is None:
        raise NotFound("this assignment has no run to release")
    answer = await calibration.release(rt, p.run_id, session.user)
    return _answer(request, assignment_id, answer, BackgroundTask(loop.after_action, rt))


@gate.session(gate.unauthorized)
async def progress_json(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    assignment_id = _assignment(request)
    p = await progress.assignment_progress(rt, assignment_id)
    info = await teacher.info(rt, assignment_id)
    card = await agreement.card(rt, assignment_id, p.run_id)
    body = {**with_held(progress_view(p), card),
            "calibration": card_view(card, _max_score(info.payload if info else {}))}
    return JSONResponse(body, headers={"cache-control": "no-store"})


def _max_score(payload: dict[str, Any]) -> float | None:
    value = payload.get("max_score")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


@gate.session(gate.unauthorized)
async def events_token(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    return JSONResponse({"token": rt.tokens.events(_assignment(request))},
                        headers={"cache-control": "no-store"})


def _wait(rt: Runtime, row: SubmissionResult, now: datetime) -> str:
    """Why the row's mark waits and until when, and which attempt it is on ('' if none)."""
    limit = teacher.max_attempts(rt, row.wait.kind) if row.wait else rt.settings.max_attempts
    return wait_text(row.queue_status, row.held, row.wait, now, limit)


@gate.session(gate.unauthorized)
async def submission(request: Request, session: Session) -> Response:
    rt = await runtime(request)
    submission_id = wire.parse_uuid(request.path_params["submission_id"], "submission")
    body, row = await teacher.submission(rt, _assignment(request), submission_id)
    body["mark"] = mark_text(body)
    body["progress_text"] = progress_message(body["progress"])
    body["wait"] = _wait(rt, row, datetime.now(UTC))
    body.update(remarked_view(body, body.pop("previous_result"), body.pop("older_rubric")))
    return JSONResponse(body, headers={"cache-control": "no-store"})


ROUTES = [
    Route("/results/assignments/{assignment_id}", page, methods=["GET"]),
    Route("/results/assignments/{assignment_id}/mark", mark, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/cancel", cancel, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/remark", remark, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/review", review_row, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/accept-all", accept_all, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/release", release, methods=["POST"]),
    Route("/results/assignments/{assignment_id}/progress", progress_json, methods=["GET"]),
    Route("/results/assignments/{assignment_id}/events-token", events_token, methods=["GET"]),
    Route("/results/assignments/{assignment_id}/submissions/{submission_id}", submission,
          methods=["GET"]),
]
