"""The OpenAPI description of a school's data (CONTRACT §9e): erase, export, replay.

Its schemas and paths, merged into the document by aiqueue.web.openapi (which
passes its operation builders in, so this module needs nothing from it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiqueue.models.records import ExportLine
from aiqueue.records.erasure import ANSWER_KEYS
from aiqueue.web.openapi_schemas import COUNT, SHORT_TEXT, TIME, Schema, nullable, obj

RECORD_SCHEMAS: dict[str, Schema] = {
    "Erased": obj({"erased": obj({k: COUNT for k in ANSWER_KEYS},
                                 description="rows removed (or marks cleared) per table; "
                                             "all zero for an id the queue never saw")}),
    "ReplayFilter": obj({}, {
        "assignment_id": nullable(SHORT_TEXT), "group": nullable(SHORT_TEXT),
        "kind": nullable({"type": "string", "pattern": "^[a-z0-9_-]{1,32}$"}),
        "error": nullable({"type": "string", "pattern": "^[a-z0-9_.:-]{1,64}$",
                           "description": "the row's last_error code"}),
        "failed_after": nullable(TIME), "failed_before": nullable(TIME),
    }, closed=True, description="every field optional; absent or null = any"),
    "ReplayRequest": obj({}, {"filter": {"$ref": "#/components/schemas/ReplayFilter"},
                              "dry_run": {"type": "boolean"}}, closed=True),
    "ReplayAnswer": obj({"matched": COUNT, "replayed": COUNT},
                        {"dry_run": {"const": True},
                         "would_replay": COUNT},
                        description="matched: failed rows that match; replayed: moved to "
                                    "pending (0 on a dry run, which also says would_replay)"),
}


def record_paths(op: Callable[..., Schema], json: Callable[..., Schema],
                 param: Callable[..., Schema]) -> dict[str, dict[str, Schema]]:
    """The three routes, built with aiqueue.web.openapi's _op, _json and _param."""
    submission = param("submission_id", "path", {"type": "string", "format": "uuid"})
    key = param("Idempotency-Key", "header",
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
            {200: json("Erased")}, (401, 404, 503), params=(submission,), tag="records")},
        "/api/marking/export": {"get": op(
            "exportRecords", "The attempts and results of a period, content-free unless "
            "include=feedback", {200: export_ok}, (401, 422, 503), tag="records",
            params=(param("from", "query", moment, "default: 30 days before `to`"),
                    param("to", "query", moment, "default: now"),
                    param("format", "query", {"type": "string", "enum": ["csv", "jsonl"]}),
                    param("include", "query", {"type": "string", "enum": ["feedback"]},
                          "feedback: add the AI's feedback to result lines")))},
        "/api/marking/replay": {"post": op(
            "replay", "Failed rows matching a filter back to pending (fresh attempts and "
            "turn); dry_run counts only", {200: json("ReplayAnswer", **{
                "Idempotent-Replayed": replayed})},
            (400, 401, 409, 413, 422, 503), body="ReplayRequest", optional_body=False,
            params=(key,), tag="records")},
    }
