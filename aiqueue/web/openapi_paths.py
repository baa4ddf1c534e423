"""The OpenAPI description's paths: each route's operation, parameters and answers.

The bodies and answers they name are generated from the wire types
(aiqueue.wire.schema); this module only says which route takes and answers
which, with what parameters, auth and errors (openapi_ops.py builds each).
"""

from __future__ import annotations

from typing import Any

from aiqueue.models import STATUSES
from aiqueue.models.records import ExportLine
from aiqueue.web.openapi_ops import PUBLIC, op, parameter, reply
from aiqueue.wire.schema import Schema, ref

# This description's own route.
PATH = "/api/marking/openapi.json"

QUEUE_ID = parameter("queue_id", "path", {"type": "string", "format": "uuid"})
SUBMISSION_ID = parameter("submission_id", "path", {"type": "string", "format": "uuid"})
ASSIGNMENT_ID = parameter("assignment_id", "path", {"type": "string", "minLength": 1,
                                                  "maxLength": 200, "pattern": r"\S"})
ACTOR = parameter("X-Actor", "header", {"type": "string", "maxLength": 200},
               "who reviews (the host app's user id); recorded with the action")
# Only an `id:` this server sent (a cursor into the change feed), else 422; empty = absent.
EVENT_ID = {"type": "string", "pattern": r"^\s*([0-9]{1,20}-[0-9]{1,20}(-[0-9]{1,9})?\s*)?$"}
DAY = {"type": "string", "format": "date"}

_REVIEW_ERRORS = (401, 404, 409, 422, 503)


def _enqueue_links() -> dict[str, Schema]:
    """What a client does next with an enqueue's answer (also schemathesis's stateful phase)."""
    row = {"queue_id": "$response.body#/queue_ids/0"}
    submission = {"submission_id": "$request.body#/submission_ids/0"}
    run = {"assignment_id": "$request.body#/assignment_id"}
    return {
        "SubmissionStatus": {"operationId": "submissionStatus", "parameters": submission},
        "ResultHistory": {"operationId": "resultHistory", "parameters": submission},
        "AssignmentProgress": {"operationId": "assignmentProgress", "parameters": run},
        "CancelAssignment": {"operationId": "cancelAssignment", "parameters": run},
        "AcceptRow": {"operationId": "acceptRow", "parameters": row},
        "RevertRow": {"operationId": "revertRow", "parameters": row},
        "RetryRow": {"operationId": "retryRow", "parameters": row},
        "ReleaseRun": {"operationId": "releaseRun",
                       "parameters": {"run_id": "$response.body#/run_id"}},
    }


def paths() -> dict[str, dict[str, Schema]]:
    """Every JSON route of the app, by path and method."""
    enqueue = op(
        "enqueue", "Enqueue submissions for marking (one pending row each)",
        {202: reply("EnqueueAccepted", "Enqueued; a repeated Idempotency-Key replays the first "
                    "answer", **{"Idempotent-Replayed": {"schema": {"const": "true"},
                                 "description": "present on a replayed answer"}}),
         200: reply("EnqueueEstimate", "A dry run (`dry_run: true`): nothing was written")},
        (400, 401, 413, 422, 503), body="EnqueueRequest",
        params=(parameter("Idempotency-Key", "header",
                       {"type": "string", "minLength": 1, "maxLength": 255,
                        "pattern": "^[ -~]+$"},
                       "24 h: the same key and body replay the answer; another body is 422 "
                       "idempotency_key_reused"),))
    enqueue["responses"]["202"]["links"] = _enqueue_links()
    step = reply("ProcessStep")
    process_get = op("processQueueCron", "One process step (the cron; CRON_SECRET accepted)",
                     {200: step}, (401, 503), tag="process")
    process_post = op("processQueue", "One process step: recover, prune, claim one row, "
                      "dispatch, chain", {200: step}, (401, 503), tag="process")
    events = op(
        "events", "Live events of an assignment (Server-Sent Events)",
        {200: {"description": "`event: marking` per status change, `data:` a MarkingEvent, "
               "`id:` its cursor; heartbeat comments; the stream ends before the platform's "
               "limit (reconnect with Last-Event-ID)",
               "content": {"text/event-stream": {"schema": ref("SseEvent")}}}},
        (401, 422, 503), security=[{"bearer": []}, {"eventsToken": []}],
        params=(parameter("assignment_id", "query", {"type": "string", "minLength": 1,
                                                  "maxLength": 200}, required=True),
                parameter("Last-Event-ID", "header", EVENT_ID,
                       "resume after this event id (sent by EventSource on reconnect)"),
                parameter("last_event_id", "query", EVENT_ID,
                       "as Last-Event-ID, for the first connection; the header wins")))
    return {
        "/api/marking/enqueue": {"post": enqueue},
        "/api/marking/process-queue": {"get": process_get, "post": process_post},
        "/webhooks/ai-mark": {"post": op(
            "webhook", "Results, failures and progress from the marking function",
            {200: reply("WebhookReceipt")}, (400, 401, 413, 422, 503), security=PUBLIC,
            body="WebhookBody", tag="function")},
        "/api/marking/queue": {"get": op(
            "listQueue", "Queue rows, newest first", {200: reply("QueuePage")}, (401, 422, 503),
            params=(parameter("status", "query", {"type": "string", "enum": list(STATUSES)}),
                    parameter("assignment_id", "query", {"type": "string", "maxLength": 200}),
                    parameter("group", "query", {"type": "string", "maxLength": 200}),
                    parameter("kind", "query", {"type": "string", "maxLength": 32},
                           "only rows of this task kind"),
                    parameter("limit", "query", {"type": "integer", "minimum": 1, "maximum": 500}),
                    parameter("offset", "query", {"type": "integer", "minimum": 0,
                                                "maximum": 10_000_000})))},
        "/api/marking/stats": {"get": op("stats", "Queue stats and flow control",
                                          {200: reply("Stats")}, (401, 503))},
        "/api/marking/queue/{queue_id}/retry": {"post": op(
            "retryRow", "A failed row becomes pending with fresh attempts",
            {200: reply("RetryAnswer")}, (401, 404, 409, 503), no_body=True, params=(QUEUE_ID,))},
        "/api/marking/queue/{queue_id}/accept": {"post": op(
            "acceptRow", "Accept a row's applied result (optionally adjusted)",
            {200: reply("Accepted")}, (400, 413, *_REVIEW_ERRORS), body="AcceptBody",
            optional_body=True, params=(QUEUE_ID, ACTOR), tag="review")},
        "/api/marking/queue/{queue_id}/revert": {"post": op(
            "revertRow", "Put the submission's mark back to what it was before this row",
            {200: reply("Reverted")}, _REVIEW_ERRORS, no_body=True, params=(QUEUE_ID, ACTOR),
            tag="review")},
        "/api/marking/assignments/{assignment_id}/accept": {"post": op(
            "acceptRun", "Accept every unreviewed result of the assignment's latest run",
            {200: reply("RunAccepted")}, (401, 404, 422, 503), no_body=True,
            params=(ASSIGNMENT_ID, ACTOR),
            tag="review")},
        "/api/marking/assignments/{assignment_id}/revert": {"post": op(
            "revertRun", "Revert every unreviewed result of the assignment's latest run",
            {200: reply("RunReverted")}, (401, 404, 422, 503), no_body=True,
            params=(ASSIGNMENT_ID, ACTOR),
            tag="review")},
        "/api/marking/submissions/{submission_id}/results": {"get": op(
            "resultHistory", "A submission's applied results, newest first",
            {200: reply("ResultHistory")}, (401, 404, 503), params=(SUBMISSION_ID,),
            tag="review")},
        "/api/marking/usage": {"get": op(
            "usage", "Tokens and cost by day, assignment, group, model, kind, pool or lane",
            {200: reply("UsageReport")}, (401, 422, 503),
            params=(parameter("since", "query", DAY, "default: 29 days before `until`"),
                    parameter("until", "query", DAY, "default: today (UTC); at most 366 days"),
                    parameter("by", "query", {"type": "string", "enum": [
                        "day", "assignment", "group", "model", "kind", "pool", "lane"]})))},
        "/api/marking/events": {"get": events},
        "/api/marking/submissions/{submission_id}/status": {"get": op(
            "submissionStatus", "Status, queue position and ETA of a submission's latest row",
            {200: reply("SubmissionStatus")}, (401, 404, 503), params=(SUBMISSION_ID,))},
        "/api/marking/assignments/{assignment_id}/progress": {"get": op(
            "assignmentProgress", "Counts, ETA, tokens and cost of the latest run",
            {200: reply("RunProgress")}, (401, 404, 422, 503), params=(ASSIGNMENT_ID,))},
        "/api/marking/assignments/{assignment_id}/cancel": {"post": op(
            "cancelAssignment", "The assignment's pending rows become cancelled",
            {200: reply("CancelAnswer")}, (401, 404, 422, 503), no_body=True,
            params=(ASSIGNMENT_ID,))},
        "/api/marking/doctor": {"get": op(
            "doctor", "The deployment's checks (as `python -m aiqueue doctor --json`)",
            {200: reply("DoctorReport")}, (401, 503), tag="operations")},
        "/healthz": {"get": op(
            "healthz", "Public: 200 `{\"status\": \"ok\"}`, no database connection. With the "
            "bearer: also the database and the schema",
            {200: reply("Health"),
             503: reply("Health", "(bearer) The database does not answer, or its schema is "
                                  "behind the code")}, (),
            security=[{}, {"bearer": []}], tag="operations")},
        "/metrics": {"get": op(
            "metrics", "Prometheus text computed at scrape time (bearer: the queue secret or "
            "METRICS_TOKEN)",
            {200: {"description": "Prometheus text exposition 0.0.4",
                   "content": {"text/plain": {"schema": {"type": "string"}}}}},
            (401, 503), tag="operations")},
        PATH: {"get": op(
            "openapi", "This description (public: it holds no secret and no data)",
            {200: {"description": "OpenAPI 3.1",
                   "content": {"application/json": {"schema": {"type": "object"}}}}},
            (), security=PUBLIC, tag="operations")},
        **_record_paths(),
        **_calibration_paths(),
        **_row_paths(),
        **_canary_paths(),
        "/api/marking/remark": {"post": op(
            "remark", "A new payload for an assignment: it becomes the current one, and only "
            "the submissions whose mark was made under another payload are marked again "
            "(reviewed marks kept unless include_reviewed; an edit within debounce_seconds "
            "supersedes the rows of the one before not yet dispatched)",
            {202: reply("RemarkAccepted", "Enqueued under the new payload"),
             200: reply("RemarkEstimate", "A dry run (`dry_run: true`): nothing was written")},
            (400, 401, 409, 413, 422, 503), body="RemarkRequest", optional_body=False,
            params=(ACTOR,))},
        **_hold_paths(),
    }


def _calibration_paths() -> dict[str, dict[str, Schema]]:
    """Agreement and the calibration gate."""
    text = {"type": "string", "maxLength": 200}
    release = op("releaseRun", "Release a calibrated run's held rows",
                 {200: reply("Released")}, (401, 404, 503), tag="review", no_body=True,
                 params=(parameter("run_id", "path", {"type": "string", "format": "uuid"}),
                         ACTOR))
    return {
        "/api/marking/agreement": {"get": op(
            "agreement", "Agreement between the AI's scores and the teacher's reviews",
            {200: reply("AgreementReport")}, (401, 422, 503), tag="review",
            params=(parameter("assignment_id", "query", text),
                    parameter("group", "query", text),
                    parameter("kind", "query", {"type": "string", "maxLength": 32}),
                    parameter("model", "query", text),
                    parameter("since", "query", {"type": "string", "format": "date-time"},
                              "only reviews made since (RFC 3339)")))},
        "/api/marking/runs/{run_id}/release": {"post": release},
    }


def _row_paths() -> dict[str, dict[str, Schema]]:
    """One row from the outside: its detail, cancel and an operator's fail."""
    return {
        "/api/marking/rows/{queue_id}": {"get": op(
            "getRow", "One row as the queue list shows it, with its attempts (time, outcome, "
            "error code, duration) and its result's status; no content",
            {200: reply("RowDetail")}, (401, 404, 422, 503), params=(QUEUE_ID,))},
        "/api/marking/rows/{queue_id}/cancel": {"post": op(
            "cancelRow", "Cancel a pending or processing row (its late result is refused); "
            "409 once it has ended", {200: reply("RowDetail")}, (401, 404, 409, 422, 503),
            no_body=True, params=(QUEUE_ID,))},
        "/api/marking/rows/{queue_id}/fail": {"post": op(
            "failRow", 'An operator ends a pending row as failed with last_error '
            '"operator" (the note is kept in its history on /ai-queue); 409 when it is not '
            'pending', {200: reply("RowDetail")},
            (400, 401, 404, 409, 413, 422, 503), body="FailRequest", params=(QUEUE_ID,))},
    }


def _record_paths() -> dict[str, dict[str, Schema]]:
    """A school's data: erase, export, replay."""
    submission = parameter("submission_id", "path", {"type": "string", "format": "uuid"})
    key = parameter("Idempotency-Key", "header",
                {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
                "24 h: the same key and body replay the answer; another body is 422 "
                "idempotency_key_reused")
    replayed: Any = {"schema": {"const": "true"}, "description": "present on a replayed answer"}
    columns = ", ".join(ExportLine.COLUMNS)
    export_ok = {"description": f"Streamed. CSV (header: {columns}[, feedback]) or one JSON "
                                "object per line with those keys; attempts first, then results",
                 "content": {"text/csv": {"schema": {"type": "string"}},
                             "application/x-ndjson": {"schema": {"type": "string"}}}}
    moment = {"type": "string", "description": "RFC 3339 time or YYYY-MM-DD (UTC)"}
    return {
        "/api/marking/submissions/{submission_id}": {"delete": op(
            "eraseSubmission", "Erase a submission's data from every queue table and clear "
            "its mark; a row in flight is cancelled and its late result refused",
            {200: reply("Erased")}, (401, 404, 503), no_body=True, params=(submission,),
            tag="records")},
        "/api/marking/export": {"get": op(
            "exportRecords", "The attempts and results of a period, content-free unless "
            "include=feedback", {200: export_ok}, (401, 422, 503), tag="records",
            params=(parameter("from", "query", moment, "default: 30 days before `to`"),
                    parameter("to", "query", moment, "default: now"),
                    parameter("format", "query", {"type": "string", "enum": ["csv", "jsonl"]}),
                    parameter("include", "query", {"type": "string", "enum": ["feedback"]},
                          "feedback: add the AI's feedback to result lines")))},
        "/api/marking/replay": {"post": op(
            "replay", "Failed rows matching a filter back to pending (fresh attempts and "
            "turn); dry_run counts only", {200: reply("ReplayAnswer", **{
                "Idempotent-Replayed": replayed})},
            (400, 401, 409, 413, 422, 503), body="ReplayRequest", optional_body=False,
            params=(key,), tag="records")},
    }


def _canary_paths() -> dict[str, dict[str, Schema]]:
    """Drift canaries (docs/canaries.md): list runs, start one, accept a drift."""
    kind = parameter("kind", "path", {"type": "string", "pattern": "^[a-z0-9_-]{1,32}$"})
    run = op("runCanary", "Start a canary of the kind now (trigger manual); a run it would "
             "take over max_share, or with nothing reviewed to re-mark, is skipped and says "
             "so; 404 when the kind declares no canary, 409 while one is running",
             {202: reply("CanaryRunAnswer")}, (400, 401, 404, 409, 413, 422, 503),
             tag="review", params=(kind,), no_body=True)
    accept = op("acceptCanary", "Accept the kind's drift: the canary that opened it becomes "
                "the yardstick and the drift alert resolves; 409 when no drift is open",
                {200: reply("CanaryRunAnswer")}, (400, 401, 404, 409, 413, 422, 503),
                tag="review", params=(kind, ACTOR), no_body=True)
    return {
        "/api/marking/canary": {"get": op(
            "canaryRuns", "Drift canary runs, newest first (time, trigger, model, rows, "
            "exact, qwk, cost, passed)", {200: reply("CanaryRuns")}, (401, 422, 503),
            tag="review", params=(parameter("kind", "query",
                                            {"type": "string", "maxLength": 32}),))},
        "/api/marking/canary/{kind}/run": {"post": run},
        "/api/marking/canary/{kind}/accept": {"post": accept},
    }


def _hold_paths() -> dict[str, dict[str, Schema]]:
    """Review holds (docs/review-holds.md): the teacher's list and an answer, once."""
    text = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S"}
    return {
        "/api/marking/review_needed": {"get": op(
            "reviewNeeded", "Held results waiting for a teacher, with their reasons; each "
            "question once, with the rows that asked it",
            {200: reply("HeldResults")}, (401, 422, 503), tag="review",
            params=(parameter("assignment_id", "query", text, required=True),))},
        "/api/marking/clarify": {"post": op(
            "clarify", "Answer a marker's question once: a marking note in a new payload; "
            "the rows that asked and the rows not yet dispatched are marked under it",
            {202: reply("Clarified")}, (400, 401, 404, 409, 413, 422, 503),
            body="ClarifyRequest", tag="review", params=(ACTOR,))},
    }
