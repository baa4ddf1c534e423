"""Structured JSON log lines: ids, counts, durations and codes only, never content."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any
from uuid import UUID

log = logging.getLogger("aiqueue")
# The only fields a log line may carry: identifiers, numbers and short codes.
# Results, feedback, submission text, error texts from the function and secrets
# can never reach a log because there is no field to put them in.
ALLOWED = frozenset({
    "queue_id", "submission_id", "assignment_id", "attempt", "dispatch_seq", "status",
    "outcome", "code", "http_status", "ms", "count", "enqueued", "skipped", "already_marked",
    "recovered", "pruned", "claimed", "chained", "accepted", "ignored", "rejected", "failures",
    "delay_s", "method", "path", "mode", "instance", "version", "reason", "logger", "level",
    "event_id", "event_type",
    # the schema check and the doctor (docs/operating/doctor.md)
    "expected", "found", "probe_id", "answer", "check",
    # the overnight lane (docs/overnight.md): counts per step, an exception's type
    "packed", "applied", "failed_lines", "fell_back", "released", "deleted", "error_type",
    # model pools and task kinds (docs/concepts.md): names from aiqueue.toml
    "kind", "pool",
    # a school's data (docs/operating/data-protection.md): counts only, never an erased id
    "matched", "replayed", "erased",
    # alerts (docs/operating/alerts.md): the alert's name and "opened" or "resolved"
    "alert", "change",
    # the same answer (docs/same-answer.md): a count of rows, never an answer or its key
    "same_answers",
    # the calibration gate (docs/agreement.md): the run released
    "run_id",
    # drift canaries (docs/canaries.md): a run's trigger, state and figures, a canary row's id
    "trigger", "state", "rows", "passed", "answered", "exact", "qwk", "drift", "row_id",
    # a re-mark (docs/remark.md): counts of submissions and rows
    "unchanged", "reviewed_kept", "superseded",
    # review holds (docs/review-holds.md): a question's id and counts, never its words
    "question_id", "remarked", "moved",
})


def event(name: str, **fields: Any) -> None:
    """Log one event as a JSON line; unknown field names are a programming error."""
    if not log.isEnabledFor(logging.INFO):
        return
    bad = set(fields) - ALLOWED
    if bad:
        raise ValueError(f"log fields not allowed: {sorted(bad)}")
    record: dict[str, Any] = {"ts": round(time.time(), 3), "event": name}
    for key, value in fields.items():
        record[key] = str(value) if isinstance(value, UUID) else value
    # The record made directly: Logger.info would walk the stack for a caller
    # (file, line) no formatter here prints, on every line of the per-job path.
    log.handle(log.makeRecord(log.name, logging.INFO, "", 0, json.dumps(record, default=str),
                              (), None))


class LibraryFormatter(logging.Formatter):
    """Other loggers' records (uvicorn, asyncpg, …) as content-free JSON lines.

    Their messages and tracebacks can quote data — an exception's text may hold
    a row's content or a token — so only the logger, the level and the
    exception's type are kept.
    """

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"ts": round(record.created, 3), "event": "library",
                                "logger": record.name, "level": record.levelname}
        if record.exc_info and record.exc_info[0] is not None:
            line["code"] = record.exc_info[0].__name__
        return json.dumps(line)


def setup(level: int = logging.INFO) -> None:
    """Send aiqueue's JSON lines to stderr, bare; every other logger through LibraryFormatter."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False
    library = logging.StreamHandler(sys.stderr)
    library.setFormatter(LibraryFormatter())
    root = logging.getLogger()
    root.handlers[:] = [library]
    root.setLevel(logging.WARNING)
