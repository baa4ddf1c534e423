"""GET /api/marking/openapi.json: the OpenAPI 3.1 description of the JSON API.

The one source of truth for the client kit (clients/): built once per
process, then served as the same bytes.  Bodies and answers are generated
from their types (aiqueue.wire.schema); the routes' operations are in
openapi_paths.py (each built by openapi_ops.py); the webhooks and the
document's frame are here.  The operator's and teacher's HTML pages
(/ai-queue…, /results…) are not described: they are forms for people, not
an interface to integrate with; tests/unit/test_openapi.py lists them by
name, so a new route must be described or listed there.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue.records.erasure import ANSWER_KEYS
from aiqueue.web.openapi_ops import ERRORS, error_response, parameter
from aiqueue.web.openapi_paths import PATH, paths
from aiqueue.wire.schema import Schema, components, ref


def _webhooks() -> dict[str, Schema]:
    """The notifications POSTed to QUEUE_NOTIFY_URL, signed per Standard Webhooks v1."""
    headers = tuple(parameter(h, "header", {"type": "string"}, d, required=True) for h, d in (
        ("webhook-id", "the event's id: the same on every retry (deduplicate on it)"),
        ("webhook-timestamp", "seconds since the epoch"),
        ("webhook-signature", "`v1,<base64 HMAC-SHA256>` keyed by QUEUE_NOTIFY_SECRET"),
    ))
    answers = {"2XX": {"description": "Delivered"},
               "410": {"description": "Gone: stop delivering this event"},
               "default": {"description": "Anything else: retried with backoff for 24 h"}}

    def event(name: str, schema: str) -> Schema:
        return {"post": {"operationId": name.replace(".", "_"), "summary": name,
                         "parameters": list(headers), "responses": answers,
                         "requestBody": {"required": True, "content": {
                             "application/json": {"schema": ref(schema)}}}}}

    return {"marking.run_finished": event("marking.run_finished", "RunFinished"),
            "marking.row_failed": event("marking.row_failed", "RowFailed"),
            "marking.row_expired": event("marking.row_expired", "RowExpired"),
            "marking.alert_opened": event("marking.alert_opened", "AlertOpened"),
            "marking.alert_resolved": event("marking.alert_resolved", "AlertResolved"),
            "marking.calibration_ready": event("marking.calibration_ready",
                                               "CalibrationReady"),
            "marking.budget_warning": event("marking.budget_warning", "BudgetWarning"),
            "marking.review_needed": event("marking.review_needed", "ReviewNeeded")}


def _schemas() -> dict[str, Schema]:
    schemas = components()
    # The erasure's tables are known only to records/ (each one it covers is required).
    schemas["Erased"]["properties"]["erased"] = {
        **schemas["Erased"]["properties"]["erased"], "required": list(ANSWER_KEYS),
        "properties": {k: {"type": "integer", "minimum": 0} for k in ANSWER_KEYS}}
    return schemas


@functools.cache
def document() -> dict[str, Any]:
    """The whole description (built once per process)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "aiqueue marking API", "version": "3",
                 "description": "AI marking of student submissions through a PostgreSQL queue. "
                 "Every JSON error is {\"error\", \"detail\"}; a method a path does not list "
                 "answers 405 with that body."},
        "servers": [{"url": "/"}],
        "tags": [{"name": t} for t in ("marking", "review", "process", "function", "operations",
                                       "records")],
        "paths": paths(),
        "webhooks": _webhooks(),
        "components": {
            "schemas": _schemas(),
            "responses": {f"E{code}": error_response(code) for code in ERRORS},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "MARKING_QUEUE_SECRET (GET process-queue also "
                                          "CRON_SECRET; /metrics also METRICS_TOKEN)"},
                "eventsToken": {"type": "apiKey", "in": "query", "name": "token",
                                "description": "a short-lived token for one assignment's "
                                               "events, handed by the app to its own pages"},
            },
        },
    }


@functools.cache
def _body() -> bytes:
    return json.dumps(document(), separators=(",", ":")).encode()


async def openapi(request: Request) -> Response:
    # Public, like most API descriptions: it says what the contract already says
    # and opens no connection; a generator needs no secret to read it.
    return Response(_body(), media_type="application/json",
                    headers={"cache-control": "public, max-age=300"})


ROUTES = [Route(PATH, openapi, methods=["GET"])]
