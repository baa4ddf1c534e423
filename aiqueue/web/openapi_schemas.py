"""The OpenAPI description's components: bodies and answers as JSON Schema 2020-12.

Plain data, built once by aiqueue.web.openapi; the names here are the
`#/components/schemas/...` names the client kit's generated types use.
"""

from __future__ import annotations

from typing import Any

from aiqueue.models import STATUSES
from aiqueue.parse import MAX_IDS
from aiqueue.queue.results import MAX_ITEMS

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None,
        *, closed: bool = False, description: str | None = None) -> Schema:
    """An object with these required (and optional) properties."""
    schema: Schema = {"type": "object", "required": list(required),
                      "properties": {**required, **(optional or {})}}
    if closed:
        schema["additionalProperties"] = False
    if description:
        schema["description"] = description
    return schema


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


COUNT: Schema = {"type": "integer", "minimum": 0}
SECONDS: Schema = nullable({"type": "number", "minimum": 0})
UUID_: Schema = {"type": "string", "format": "uuid"}
TIME: Schema = {"type": "string", "format": "date-time"}
SHORT_TEXT: Schema = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S"}
# A JSON object of any fields (said out loud, so generated types let them through).
ANY_OBJECT: Schema = {"type": "object", "additionalProperties": True}
STATUS: Schema = {"type": "string", "enum": list(STATUSES)}
REVIEW: Schema = {"type": "string", "enum": ["unreviewed", "accepted", "reverted"]}
# A task kind or a pool (CONTRACT §9b), as aiqueue.toml names them.
KIND_NAME: Schema = {"type": "string", "pattern": "^[a-z0-9_-]{1,32}$"}
PROGRESS_ITEM: Schema = obj({}, {"current": nullable({"type": "number"}),
                                 "total": nullable({"type": "number"}),
                                 "message": nullable({"type": "string"})})

_STATS_FLOW = {
    # §8a flow control: the learned in-flight limit, the hold after a refusal,
    # and the declared budgets with what the current window has used.
    "in_flight_limit": {"type": "integer", "minimum": 0},
    "hold_until": nullable(TIME),
    # null while no budget is declared (nothing is counted then)
    "tokens_in_window": nullable(COUNT),
    "requests_in_window": nullable(COUNT),
    "tokens_per_minute": nullable(COUNT),
    "requests_per_minute": nullable(COUNT),
    "budget_window_seconds": {"type": "number", "minimum": 0},
}

# CONTRACT §9d: each moment as an RFC 3339 time or as seconds from now, not both.
_TIME_FIELDS: dict[str, Schema] = {
    "not_before": nullable({**TIME, "description": "not due before this time"}),
    "delay_seconds": nullable({"type": "number", "minimum": 0, "maximum": 2_592_000}),
    "expires_at": nullable({**TIME, "description": "expired if not dispatched by then"}),
    "expire_after_seconds": nullable({"type": "number", "minimum": 1,
                                      "maximum": 31_536_000}),
}
_ALERT_FIELDS: dict[str, Schema] = {
    "alert": {"type": "string", "enum": ["backlog_age", "stalled", "failure_spike"]},
    "pool": {"type": "string"}, "kind": nullable({"type": "string"}),
    "value": {"type": "number"}, "threshold": {"type": "number"}, "opened_at": TIME,
}

USAGE_FIELDS: dict[str, Schema] = {
    "jobs": COUNT, "prompt_tokens": COUNT, "completion_tokens": COUNT,
    "cost_usd": nullable({"type": "number", "minimum": 0}), "unpriced_jobs": COUNT,
    "avg_processing_seconds": SECONDS, "p95_processing_seconds": SECONDS,
}

# The spend caps (§9c), by their names in aiqueue.toml.
SPEND_CAPS = ("group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day")
# A pending row paused at a spend cap (§9c): why, until when, and which cap.
PAUSED: dict[str, Schema] = {
    "waiting_for": nullable({"type": "string", "enum": ["spend_cap"]}),
    "resumes_at": nullable(TIME),
    "paused_by": nullable({"type": "string", "enum": list(SPEND_CAPS)}),
}

WEBHOOK_ITEM = obj(
    {"queue_id": {"type": "string"}, "token": {"type": "string"},
     "status": {"type": "string", "enum": ["completed", "failed", "progress"]}},
    {
        "result": {**ANY_OBJECT, "description": "completed: the mark, stored as sent"},
        "usage": obj({}, {"model": {"type": "string"}, "prompt_tokens": COUNT,
                          "completion_tokens": COUNT, "total_tokens": COUNT,
                          "cost_usd": {"type": "number", "minimum": 0}}),
        "error": {"type": "string", "description":
                  "failed: a short code; `rate_limited` and `overloaded` are refusals (§8a) "
                  "that use no attempt"},
        "retry_after": {"type": "number", "minimum": 0, "maximum": 3600, "description":
                        "with a refusal: seconds to hold every dispatch"},
        "retryable": {"type": "boolean"},
        "progress": PROGRESS_ITEM,
    },
    description="One result item from the marking function, with its callback token.",
)
# A completed item carries its result.
WEBHOOK_ITEM["if"] = {"properties": {"status": {"const": "completed"}}}
WEBHOOK_ITEM["then"] = {"required": ["result"]}

SCHEMAS: dict[str, Schema] = {
    "Error": {**obj({"error": {"type": "string"}, "detail": {"type": "string"}},
                    description="Every JSON error; some add fields (invalid_ids, unknown_ids, "
                                "expected, found, kinds)."), "additionalProperties": True},
    "EnqueueRequest": obj(
        {"assignment_id": SHORT_TEXT,
         "submission_ids": {"type": "array", "items": UUID_, "minItems": 1, "maxItems": MAX_IDS}},
        {"priority": nullable({"type": "integer", "minimum": -1_000_000, "maximum": 1_000_000}),
         "payload": nullable({**ANY_OBJECT, "description": "up to 64 KiB, given to the "
                              "function unchanged"}),
         "group": nullable({**SHORT_TEXT, "description": "whose turn and spend cap it is "
                            "(default: the assignment); a host wanting turns and caps per "
                            "teacher sends the teacher's id"}),
         "remark": nullable({"type": "boolean"}),
         "dry_run": nullable({"type": "boolean", "description": "§9c: write nothing and "
                              "answer 200 with an EnqueueEstimate"}),
         "kind": nullable({**KIND_NAME, "description": "what the rows ask for, which names "
                           "their function and pool (aiqueue.toml); default `mark`; a kind "
                           "not declared is refused with 422 `unknown_kind`"}),
         "lane": nullable({"type": "string", "enum": ["live", "batch"],
                           "description": "batch: the provider's batch API at batch prices, "
                           "by `deadline` (needs a pool with a batch API)"}),
         "deadline": nullable({"type": "string", "format": "date-time",
                               "description": "RFC 3339, in the future; lane batch only; "
                               "default now + 24 h"}),
         **_TIME_FIELDS},
    ),
    "EnqueueEstimate": obj(
        {"rows": COUNT, "already_marked": COUNT, "estimated_tokens": COUNT,
         "estimated_cost_usd": nullable({"type": "number", "minimum": 0}),
         "eta_seconds": SECONDS,
         "capped": nullable({**obj({}, {name: {"type": "number", "minimum": 0}
                                        for name in SPEND_CAPS}),
                             "description": "the spend caps this run would reach, with their "
                                            "values; null when none would"})},
        description="A dry run of the enqueue (§9c): what it would add and use; nothing was "
                    "written.",
    ),
    "EnqueueAccepted": obj({"enqueued": COUNT, "skipped": COUNT, "already_marked": COUNT,
                            "queue_ids": {"type": "array", "items": UUID_}}),
    "ProcessStep": obj({"claimed": nullable(UUID_), "dispatched": {"type": "boolean"},
                        "recovered": COUNT, "pruned": COUNT, "chained": {"type": "boolean"}}),
    "WebhookItem": WEBHOOK_ITEM,
    "WebhookBody": {"oneOf": [ref("WebhookItem"), {"type": "array", "items": ref("WebhookItem"),
                                                   "minItems": 1, "maxItems": MAX_ITEMS}]},
    "WebhookReceipt": obj({"accepted": COUNT, "ignored": COUNT, "rejected": COUNT}),
    "QueueRow": obj({"queue_id": UUID_, "submission_id": UUID_, "assignment_id": {"type": "string"},
                     "group": {"type": "string"}, "status": STATUS, "attempts": COUNT,
                     "last_error": nullable({"type": "string"}), "created_at": TIME,
                     "updated_at": TIME},
                    {"kind": KIND_NAME, "pool": KIND_NAME, **PAUSED,
                     "not_before": nullable({**TIME, "description": "not due before (§9d)"}),
                     "expires_at": nullable({**TIME, "description":
                                             "expires if not dispatched by then"})}),
    "QueuePage": obj({"items": {"type": "array", "items": ref("QueueRow")}, "total": COUNT}),
    "Stats": obj(
        {"pending": COUNT, "processing": COUNT, "completed": COUNT, "failed": COUNT,
         "failed_today": COUNT, "completed_today": COUNT,
         "avg_processing_seconds": SECONDS, "p95_processing_seconds": SECONDS,
         "oldest_pending_seconds": SECONDS, **_STATS_FLOW},
        {"cancelled": COUNT, "expired": COUNT,
         "scheduled": {**COUNT, "description": "pending rows not due before their not_before"},
         "alerts": {"type": "array", "items": ref("OpenAlert")},
         "max_in_flight": COUNT, "paused": {"type": "boolean"},
         "circuit": obj({}, {"state": {"type": "string", "enum": ["open", "half_open", "closed"]},
                             "consecutive_failures": COUNT, "next_probe_at": nullable(TIME)}),
         "busy_until": nullable(TIME),
         "kinds": {"type": "object", "additionalProperties": ref("KindStats"),
                   "description": "rows by task kind (CONTRACT §9b)"},
         "pools": {"type": "object", "additionalProperties": ref("PoolStats"),
                   "description": "each pool's limits and flow control; the top-level flow "
                                  "fields are the `default` pool's"}},
    ),
    "KindStats": obj({"pool": KIND_NAME, "max_in_flight": nullable(COUNT), "pending": COUNT,
                      "processing": COUNT, "completed": COUNT, "failed": COUNT,
                      "cancelled": COUNT}, {"expired": COUNT}),
    "PoolStats": obj({"kinds": {"type": "array", "items": KIND_NAME}, "max_in_flight": COUNT,
                      "in_flight": COUNT, "in_flight_limit": {"type": "integer", "minimum": 0},
                      "hold_until": nullable(TIME),
                      "circuit": {"type": "string", "enum": ["open", "half_open", "closed"]},
                      "refusals": obj({"rate_limited": COUNT, "overloaded": COUNT}),
                      "tokens_in_window": nullable(COUNT), "requests_in_window": nullable(COUNT),
                      "tokens_per_minute": nullable(COUNT),
                      "requests_per_minute": nullable(COUNT)}),
    "RetryAnswer": obj({"queue_id": UUID_, "status": {"const": "pending"}}),
    "SubmissionStatus": obj(
        {"status": STATUS, "attempts": COUNT, "queue_position": nullable(COUNT),
         "estimated_wait_seconds": SECONDS},
        {"queue_id": UUID_, "review": nullable(REVIEW), "progress": nullable(PROGRESS_ITEM),
         **PAUSED,
         "scheduled_for": nullable({**TIME, "description": "pending, not due before then"})},
    ),
    "RunProgress": obj(
        {"total": COUNT, "pending": COUNT, "processing": COUNT, "completed": COUNT,
         "failed": COUNT, "cancelled": COUNT, "estimated_remaining_seconds": SECONDS,
         "tokens": COUNT, "cost_usd": nullable({"type": "number", "minimum": 0})},
        {"run_id": nullable(UUID_), "prompt_tokens": COUNT, "completion_tokens": COUNT,
         "unpriced_jobs": COUNT,
         "review": obj({"accepted": COUNT, "reverted": COUNT, "unreviewed": COUNT}),
         **PAUSED,
         "expired": COUNT, "scheduled": COUNT, "scheduled_for": nullable(TIME)},
    ),
    "CancelAnswer": obj({"cancelled": COUNT}),
    "AcceptBody": obj({}, {"result": nullable({**ANY_OBJECT, "description":
                                               "the teacher's adjusted result"})}, closed=True),
    "Accepted": obj({"queue_id": UUID_, "review": {"const": "accepted"}, "accepted_at": TIME}),
    "Reverted": obj({"queue_id": UUID_, "review": {"const": "reverted"}, "reverted_at": TIME}),
    "RunAccepted": obj({"accepted": COUNT}),
    "RunReverted": obj({"reverted": COUNT, "superseded": COUNT}),
    "AppliedResult": obj({"queue_id": UUID_, "applied_at": TIME, "result": ANY_OBJECT,
                          "review": REVIEW, "accepted_at": nullable(TIME),
                          "reverted_at": nullable(TIME), "actor": nullable({"type": "string"})},
                         {"adjusted_result": nullable(ANY_OBJECT)}),
    "ResultHistory": obj({"items": {"type": "array", "items": ref("AppliedResult")}}),
    "UsageLine": obj({"key": {"type": "string"}, **USAGE_FIELDS}),
    "UsageTotal": obj(USAGE_FIELDS),
    "UsageReport": obj({"items": {"type": "array", "items": ref("UsageLine")},
                        "total": ref("UsageTotal")},
                       {"since": {"type": "string", "format": "date"},
                        "until": {"type": "string", "format": "date"},
                        "by": {"type": "string", "enum": ["day", "assignment", "group", "model",
                                                          "kind", "pool", "lane"]}}),
    "MarkingEvent": obj(
        {"queue_id": UUID_, "submission_id": UUID_, "status": STATUS},
        {"result": {**ANY_OBJECT, "description": "completed: the result's summary fields"},
         "review": {"type": "string"}, "progress": PROGRESS_ITEM,
         # pending: the row's group reached a spend cap (§9c).
         **PAUSED},
        description="The `data:` of one `event: marking` on the live stream; its `id:` is "
                    "the cursor to resume from (Last-Event-ID).",
    ),
    # One event of the stream (in OpenAPI 3.1 an event stream's schema describes each event).
    "SseEvent": obj({}, {
        "event": {"const": "marking"},
        "id": {"type": "string", "description": "the cursor to resume from (Last-Event-ID)"},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": ref("MarkingEvent")},
        "retry": {"type": "integer", "minimum": 0},
    }),
    "Health": obj(
        {"status": {"type": "string", "enum": ["ok", "unavailable", "schema_behind"]}},
        {"database": {"type": "boolean"},
         "schema": obj({"expected": COUNT, "found": nullable(COUNT)}),
         "error": {"const": "schema_behind"}, "detail": {"type": "string"},
         "expected": COUNT, "found": COUNT},
        description="Without the bearer only `{\"status\": \"ok\"}` (no database "
                    "connection); with it also `database` and `schema` (§9a), and a 503 "
                    "while the database does not answer or its schema is behind."),
    "DoctorCheck": obj({"name": {"type": "string"},
                        "status": {"type": "string", "enum": ["pass", "warn", "fail", "skip"]},
                        "detail": {"type": "string"},
                        "fix": nullable({"type": "string"})},
                       description="One check. `warn`: worth fixing, nothing broken (the "
                                   "report stays ok); a failure's or a warning's `fix` says "
                                   "what to do."),
    "DoctorReport": obj({"ok": {"type": "boolean"},
                         "checks": {"type": "array", "items": ref("DoctorCheck")}},
                        description="The report of `python -m aiqueue doctor --json` (§8c, "
                                    "§9a): `ok` unless a check failed (warnings keep it ok)."),
    "RunFinished": obj(
        {"type": {"const": "marking.run_finished"}, "assignment_id": {"type": "string"},
         "completed": COUNT, "failed": COUNT, "cancelled": COUNT, "expired": COUNT,
         "tokens": COUNT, "cost_usd": nullable({"type": "number", "minimum": 0}),
         "started_at": TIME, "finished_at": TIME},
        {"run_id": {**UUID_, "description": "the run (an assignment may be marked again)"}},
        description="An assignment's run has no pending or processing rows left.",
    ),
    "RowFailed": obj(
        {"type": {"const": "marking.row_failed"}, "queue_id": UUID_, "submission_id": UUID_,
         "assignment_id": {"type": "string"}, "error": nullable({"type": "string"})},
        description="A row ended failed; `error` is a content-free code.",
    ),
    "RowExpired": obj(
        {"type": {"const": "marking.row_expired"}, "queue_id": UUID_, "submission_id": UUID_,
         "assignment_id": {"type": "string"}, "error": nullable({"type": "string"})},
        description="A row was not dispatched by its expires_at and ended expired (§9d).",
    ),
    "OpenAlert": obj(_ALERT_FIELDS, description="An alert that is open now (§9d)."),
    "AlertOpened": obj({"type": {"const": "marking.alert_opened"}, **_ALERT_FIELDS},
                       description="An alert's condition began (one per incident)."),
    "AlertResolved": obj({"type": {"const": "marking.alert_resolved"}, **_ALERT_FIELDS},
                         {"resolved_at": TIME},
                         description="The incident's condition ended; `value` is the "
                                     "figure at that moment."),
}
