"""Every JSON route that changes something either takes a body (with its type) or takes
none and says so through the one gate (web.gate.no_body); a new route must pick one."""

from __future__ import annotations

from starlette.routing import Route

from aiqueue.web.app import all_routes

# Routes whose body is parsed by its own type (each 422s an unknown field itself).
TAKES_A_BODY = {
    "/api/marking/enqueue", "/webhooks/ai-mark", "/api/marking/queue/{queue_id}/accept",
    "/api/marking/rows/{queue_id}/fail", "/api/marking/replay", "/api/marking/remark",
    "/api/marking/clarify",
    # The chain's and a scheduler's trigger: whatever a platform's cron sends is ignored.
    "/api/marking/process-queue",
}
NO_BODY = {
    "/api/marking/rows/{queue_id}/cancel", "/api/marking/queue/{queue_id}/retry",
    "/api/marking/queue/{queue_id}/revert", "/api/marking/assignments/{assignment_id}/accept",
    "/api/marking/assignments/{assignment_id}/revert",
    "/api/marking/assignments/{assignment_id}/cancel", "/api/marking/runs/{run_id}/release",
    "/api/marking/submissions/{submission_id}",
    "/api/marking/canary/{kind}/run", "/api/marking/canary/{kind}/accept",
}


def _writes() -> dict[str, Route]:
    return {r.path: r for r in all_routes() if isinstance(r, Route)
            and r.path.startswith(("/api/", "/webhooks/"))
            and (r.methods or set()) & {"POST", "PUT", "PATCH", "DELETE"}}


def test_every_writing_route_is_either_typed_or_takes_no_body():
    writes = _writes()
    assert set(writes) == TAKES_A_BODY | NO_BODY, "classify the new route here"
    for path in NO_BODY:
        assert getattr(writes[path].endpoint, "takes_no_body", False), path
    for path in TAKES_A_BODY:
        assert not getattr(writes[path].endpoint, "takes_no_body", False), path
