"""The /ai-queue page's buttons: retry, cancel, review, retry all, cancel pending, pause.

Each posts a form through the gate (gate.form: the session, then its CSRF
token, else a 403 page and nothing changes), runs one rule in queue/, reads/ or
records/, and goes back to the page with a notice; the chain is kicked after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.errors import Conflict, Invalid, NotCompleted, NotFound, Superseded
from aiqueue.models.records import ReplayFilter
from aiqueue.queue import actions, loop, review
from aiqueue.records import replay
from aiqueue.runtime import Runtime
from aiqueue.web import gate, views
from aiqueue.web.auth import Session, safe_next
from aiqueue.web.monitor_page import PATH, error_page, queue_id_of
from aiqueue.web.state import runtime

Action = Callable[[Runtime, str, Request, dict[str, str]], Awaitable[dict[str, str]]]


async def _to_page_login(request: Request) -> Response:
    # A form post can't be repeated after signing in: back to the page afterwards.
    return RedirectResponse(f"{PATH}/login?next={PATH}", status_code=303)


async def _forged(request: Request) -> Response:
    return error_page(403, "This form's security token is missing or out of date. "
                            "Nothing was changed; reload the page and try again.")


async def _act(request: Request, session: Session, form: dict[str, str],
               action: Action) -> Response:
    """The action, then back to the page with a notice; kicks the chain."""
    rt = await runtime(request)
    notice = await action(rt, session.user, request, form)
    target = views.with_params(safe_next(form.get("back")), notice)
    return RedirectResponse(target, status_code=303,
                            background=BackgroundTask(loop.after_action, rt))


def _form_assignment(form: dict[str, str]) -> str | None:
    raw = form.get("assignment_id", "").strip()
    try:
        return wire.parse_assignment_id(raw) if raw else None
    except Invalid:
        return None


async def _retry_one(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                     ) -> dict[str, str]:
    queue_id = queue_id_of(request)
    if queue_id is None:
        return {"notice": "missing"}
    try:
        await actions.retry_row(rt, queue_id, actor)
    except NotFound:
        return {"notice": "missing"}
    except Conflict:
        return {"notice": "not_failed", "row": str(queue_id)}
    return {"notice": "retried", "row": str(queue_id)}


async def _cancel_one(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                      ) -> dict[str, str]:
    queue_id = queue_id_of(request)
    if queue_id is None or not await actions.cancel_row(rt, queue_id, actor):
        return {"notice": "not_pending", "row": str(queue_id or "")}
    return {"notice": "cancelled", "row": str(queue_id)}


async def _review_one(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                      ) -> dict[str, str]:
    queue_id = queue_id_of(request)
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
    # Replay by filter: one statement, the rows still failed only.
    where = ReplayFilter(assignment_id=_form_assignment(form))
    answer, _ = await replay.replay(rt, replay.ReplayRequest(where, False, ""), actor=actor)
    return {"notice": "retried_all", "n": str(answer.replayed)}


async def _cancel_pending(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                          ) -> dict[str, str]:
    assignment = _form_assignment(form)
    if assignment is None:
        return {"notice": "missing_assignment"}
    n = await actions.cancel_pending(rt, assignment, actor)
    return {"notice": "cancelled_all", "n": str(n)}


async def _pause(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                 ) -> dict[str, str]:
    await actions.set_paused(rt, True, actor)
    return {"notice": "paused"}


async def _resume(rt: Runtime, actor: str, request: Request, form: dict[str, str]
                  ) -> dict[str, str]:
    await actions.set_paused(rt, False, actor)
    return {"notice": "resumed"}


def _route(action: Action) -> Callable[[Request], Awaitable[Response]]:
    @gate.form(_to_page_login, _forged)
    async def endpoint(request: Request, session: Session, form: dict[str, str]) -> Response:
        return await _act(request, session, form, action)

    endpoint.__name__ = action.__name__.lstrip("_")
    return endpoint


ROUTES = [
    Route(f"{PATH}/rows/{{queue_id}}/retry", _route(_retry_one), methods=["POST"]),
    Route(f"{PATH}/rows/{{queue_id}}/cancel", _route(_cancel_one), methods=["POST"]),
    Route(f"{PATH}/rows/{{queue_id}}/review", _route(_review_one), methods=["POST"]),
    Route(f"{PATH}/retry-failed", _route(_retry_all), methods=["POST"]),
    Route(f"{PATH}/cancel-pending", _route(_cancel_pending), methods=["POST"]),
    Route(f"{PATH}/pause", _route(_pause), methods=["POST"]),
    Route(f"{PATH}/resume", _route(_resume), methods=["POST"]),
]
