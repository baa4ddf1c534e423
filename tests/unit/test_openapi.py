"""The OpenAPI description: valid 3.1, and exactly the app's JSON routes and methods."""

from __future__ import annotations

import json

import httpx
from openapi_spec_validator import validate
from starlette.routing import Route

from aiqueue.web.app import all_routes, create_app
from aiqueue.web.openapi import document
from aiqueue.web.openapi_paths import PATH
from tests.conftest import make_settings
from tests.unit.openapi_kit import PENDING

# Routes of the app the description leaves out on purpose: HTML pages and their
# form posts (people use them, no integration does).  A new route must be described
# in aiqueue/web/openapi.py or named here.
PAGES = {
    ("/ai-queue/login", "get"), ("/ai-queue/login", "post"), ("/ai-queue/logout", "post"),
    ("/ai-queue", "get"), ("/ai-queue/fragment", "get"), ("/ai-queue/rows/{queue_id}", "get"),
    ("/ai-queue/rows/{queue_id}/retry", "post"), ("/ai-queue/rows/{queue_id}/cancel", "post"),
    ("/ai-queue/rows/{queue_id}/review", "post"), ("/ai-queue/retry-failed", "post"),
    ("/ai-queue/cancel-pending", "post"), ("/ai-queue/pause", "post"),
    ("/ai-queue/resume", "post"), ("/ai-queue/doctor", "get"),
    ("/ai-queue/export.csv", "get"), ("/ai-queue/replay-count", "get"),
    ("/results/assignments/{assignment_id}", "get"),
    ("/results/assignments/{assignment_id}/mark", "post"),
    ("/results/assignments/{assignment_id}/cancel", "post"),
    ("/results/assignments/{assignment_id}/review", "post"),
    ("/results/assignments/{assignment_id}/accept-all", "post"),
    ("/results/assignments/{assignment_id}/release", "post"),
    ("/results/assignments/{assignment_id}/clarify", "post"),
    ("/results/assignments/{assignment_id}/remark", "post"),
    ("/results/assignments/{assignment_id}/progress", "get"),
    ("/results/assignments/{assignment_id}/events-token", "get"),
    ("/results/assignments/{assignment_id}/submissions/{submission_id}", "get"),
}
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


def app_operations() -> set[tuple[str, str]]:
    ops = set()
    for route in all_routes():
        assert isinstance(route, Route), f"{route!r}: only plain routes can be compared"
        # Starlette adds HEAD to every GET route; the description lists GET.
        ops |= {(route.path, m.lower()) for m in route.methods or () if m != "HEAD"}
    return ops


def described_operations() -> set[tuple[str, str]]:
    return {(path, method) for path, item in document()["paths"].items()
            for method in item if method in HTTP_METHODS}


def test_the_description_is_valid_openapi_3_1():
    validate(document())
    assert document()["openapi"].startswith("3.1")


def test_every_json_route_and_method_is_described_and_nothing_else():
    app, described = app_operations(), described_operations()
    assert not app & PENDING, f"merged now: remove from PENDING {app & PENDING}"
    assert not described & PAGES, f"pages are not described: {described & PAGES}"
    assert described - PENDING == app - PAGES, {
        "routes the description lacks": sorted(app - PAGES - described),
        "described but not routes": sorted(described - PENDING - app),
    }


def test_every_operation_answers_json_errors_and_has_an_id():
    ids = []
    for path, item in document()["paths"].items():
        for method, op in item.items():
            ids.append(op["operationId"])
            codes = set(op["responses"])
            assert any(c.startswith("2") for c in codes), (path, method)
            # A route that also answers the public ({} among its schemes) never says 401.
            if op["security"] and {} not in op["security"]:
                assert "401" in codes, (path, method)
            if "{" in path:
                assert "404" in codes, (path, method)
            if "requestBody" in op:
                assert {"400", "413", "422"} <= codes, (path, method)
    assert len(ids) == len(set(ids))


def test_the_notification_events_are_described_as_webhooks():
    hooks = document()["webhooks"]
    assert set(hooks) == {"marking.run_finished", "marking.row_failed", "marking.row_expired",
                          "marking.alert_opened", "marking.alert_resolved",
                          "marking.calibration_ready", "marking.budget_warning",
                          "marking.review_needed"}
    schemas = document()["components"]["schemas"]
    assert set(schemas["RunFinished"]["required"]) == {
        "type", "assignment_id", "completed", "failed", "cancelled", "expired", "tokens",
        "cost_usd", "started_at", "finished_at"}
    alert = {"type", "alert", "pool", "kind", "value", "threshold", "opened_at"}
    assert set(schemas["AlertOpened"]["required"]) == alert
    assert set(schemas["AlertResolved"]["required"]) == alert
    assert set(schemas["RowFailed"]["required"]) == {
        "type", "queue_id", "submission_id", "assignment_id", "error"}


async def test_it_is_served_without_credentials_and_opens_no_connection():
    # No DATABASE_URL at all: serving the description must not need the database.
    app = create_app(make_settings("").with_overrides(database_url=None))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
        r = await client.get(PATH)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert json.loads(r.content) == json.loads(json.dumps(document()))
