"""wire/: one type per request and answer, parsed under one error convention, described once."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from aiqueue.errors import Invalid
from aiqueue.models import EventCursor, QueueId, RunProgress, SubmissionId, SubmissionStatus
from aiqueue.models import MarkingEvent as ModelEvent
from aiqueue.models.records import ReplayOutcome
from aiqueue.models.review import UsageRow
from aiqueue.queue.progress import progress_json, status_json
from aiqueue.reads.usage import usage_item, usage_total
from aiqueue.web.openapi import document
from aiqueue.wire import answers, dump, parse, reads
from aiqueue.wire.answers import ProcessStep, QueuePage, QueueRow, RetryAnswer
from aiqueue.wire.reads import CircuitState, OpenAlert, PoolStats, Refusals, Stats
from aiqueue.wire.requests import AcceptBody, EnqueueBody, ReplayRequest
from aiqueue.wire.schema import ANSWERS, REQUESTS
from aiqueue.wire.webhook import WebhookItem

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
# Text a student might have written: it must never come back in an error.
ANSWER = "The mitochondria is the powerhouse of the cell"


def conforms(name: str, body: Any) -> list[str]:
    """The description's complaints about `body` as its component `name`."""
    root = {"$ref": f"#/components/schemas/{name}", **document()}
    return [e.message for e in Draft202012Validator(root).iter_errors(body)]


def test_the_description_names_every_wire_type_and_nothing_hand_written() -> None:
    schemas = document()["components"]["schemas"]
    names = {"EnqueueRequest" if m is EnqueueBody else m.__name__ for m in (*REQUESTS, *ANSWERS)}
    assert names <= set(schemas)
    # What is not a listed type is one of theirs (nested), or the webhook's one-or-many.
    assert all(schemas[n].get("properties") or n == "WebhookBody" for n in schemas)


@pytest.mark.parametrize(("model", "body", "detail"), [
    (EnqueueBody, [1], "the body must be a JSON object"),
    (EnqueueBody, {"submission_ids": [str(uuid.uuid4())]}, "assignment_id must be a non-empty"),
    # The ids a client sent are its own, not content: the 422 lists the bad ones (invalid_ids).
    (EnqueueBody, {"assignment_id": "hw", "submission_ids": ["0b7f5c4e"]},
     "submission_ids must be UUIDs"),
    (EnqueueBody, {"assignment_id": "hw", "submission_ids": [str(uuid.uuid4())],
                   "priority": ANSWER}, "priority must be an integer"),
    (WebhookItem, ANSWER, "each item must be a JSON object"),
    (WebhookItem, {"queue_id": "q", "status": "completed"}, "a completed item needs a result"),
    (WebhookItem, {"queue_id": "q", "status": "failed", "retry_after": 4000},
     "retry_after must be a number of seconds from 0 to 3600"),
    (WebhookItem, {"queue_id": "q", "status": "done", "error": ANSWER}, "status must be"),
    (WebhookItem, {"queue_id": "q", "status": "completed", "result": ANSWER},
     "result must be an object"),
    (AcceptBody, {"result": ANSWER}, "result must be a JSON object"),
    (AcceptBody, {"result": {}, ANSWER[:20]: 1}, "unknown field"),
    (ReplayRequest, {"dry_run": ANSWER}, "dry_run must be true or false"),
    (ReplayRequest, {"filter": {"failed_after": ANSWER}}, "failed_after must be an RFC 3339"),
    (ReplayRequest, {"filter": ANSWER}, "filter must be a JSON object"),
    (ReplayRequest, {"filter": {"failed_after": "2026-11-02", "failed_before": "2026-11-01"}},
     "failed_after must be before failed_before"),
])
def test_a_bad_body_is_one_invalid_naming_the_field_and_never_the_value(
        model: Any, body: object, detail: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse(model, body)
    assert caught.value.status_code == 422
    assert detail in caught.value.detail
    assert ANSWER not in caught.value.detail and "mitochondria" not in str(caught.value.extra)


def test_an_item_without_a_token_parses_and_is_left_to_the_token_check() -> None:
    item = parse(WebhookItem, {"queue_id": "q", "status": "progress",
                               "progress": {"current": 1}})
    assert item.token is None and item.progress == {"current": 1}


def stats(**changes: Any) -> Stats:
    pool = PoolStats(kinds=["mark"], max_in_flight=4, in_flight=1, in_flight_limit=2,
                     hold_until=NOW, circuit="closed",
                     refusals=Refusals(rate_limited=1, overloaded=0), tokens_in_window=None,
                     requests_in_window=None, tokens_per_minute=None, requests_per_minute=None)
    base: dict[str, Any] = dict(
        pending=1, processing=1, completed=2, failed=0, failed_today=0, completed_today=2,
        avg_processing_seconds=1.5, p95_processing_seconds=None, oldest_pending_seconds=3.0,
        in_flight_limit=2, hold_until=None, tokens_in_window=None, requests_in_window=None,
        tokens_per_minute=None, requests_per_minute=None, budget_window_seconds=60,
        circuit=CircuitState(state="open", consecutive_failures=5,
                             next_probe_at=NOW + timedelta(seconds=30)),
        alerts=[OpenAlert(alert="stalled", pool="default", kind=None, value=312.0,
                          threshold=300.0, opened_at=NOW)],
        pools={"default": pool, "openai": pool})
    return Stats(**{**base, **changes})


def test_answers_built_as_types_are_what_the_description_says() -> None:
    row = QueueRow(queue_id=uuid.uuid4(), submission_id=uuid.uuid4(), assignment_id="hw",
                   group="hw", status="pending", attempts=0, last_error=None, created_at=NOW,
                   updated_at=NOW, waiting_for="spend_cap", resumes_at=NOW)
    for name, answer in [
        ("Stats", stats()), ("QueuePage", QueuePage(items=[row], total=1)),
        ("ProcessStep", ProcessStep(claimed=None, dispatched=False, recovered=0, pruned=0,
                                    chained=False)),
        ("RetryAnswer", RetryAnswer(queue_id=uuid.uuid4(), status="pending")),
    ]:
        assert conforms(name, dump(answer)) == [], name


def test_times_keep_the_spelling_the_api_always_sent() -> None:
    body = dump(stats())
    assert body["circuit"]["next_probe_at"] == "2026-11-24T09:00:30+00:00"
    assert body["alerts"][0]["opened_at"] == NOW.isoformat()


def test_an_answer_sends_only_what_it_set() -> None:
    # Optional fields never set are left out: the public health answer is just its status.
    from aiqueue.wire.reads import Health
    assert dump(Health(status="ok")) == {"status": "ok"}
    assert conforms("Health", {"status": "ok"}) == []


def test_the_description_refuses_what_the_types_refuse() -> None:
    assert conforms("EnqueueRequest", {"assignment_id": "hw", "submission_ids": []})
    assert conforms("WebhookItem", {"queue_id": "q", "token": "t", "status": "completed"})
    assert conforms("AcceptBody", {"extra": 1})


def test_the_replay_answer_sends_what_the_store_keeps() -> None:
    # The store keeps the mapping for an Idempotency-Key's repeats; the type sends it as is.
    for outcome, body in [
        (ReplayOutcome(3, 3, 0, True),
         {"matched": 3, "replayed": 0, "dry_run": True, "would_replay": 3}),
        (ReplayOutcome(3, 2, 2, False), {"matched": 3, "replayed": 2}),
    ]:
        stored = json.loads(json.dumps(outcome.answer()))
        assert stored == body
        sent = json.loads(json.dumps(dump(answers.ReplayAnswer.model_validate(stored))))
        assert sent == body and conforms("ReplayAnswer", sent) == []


def test_the_usage_report_sends_its_lines_and_total() -> None:
    line = UsageRow("hw", 2, 100, 20, None, 1, 1.5, 2.0)
    total = UsageRow(None, 2, 100, 20, 0.25, 0, None, None, 60, 20, 34, 0.000035)
    cache = {"cache_read_tokens": 0, "cache_write_tokens": 0, "cache_saved_tokens": 0,
             "cache_saved_usd": None}
    report = reads.UsageReport(since=NOW.date(), until=NOW.date(), by="assignment",
                               items=[usage_item(line, "hw")], total=usage_total(total))
    sent = json.loads(json.dumps(dump(report)))
    assert sent == {
        "items": [{"jobs": 2, "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": None,
                   "unpriced_jobs": 1, "avg_processing_seconds": 1.5,
                   "p95_processing_seconds": 2.0, **cache, "key": "hw"}],
        "total": {"jobs": 2, "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.25,
                  "unpriced_jobs": 0, "avg_processing_seconds": None,
                  "p95_processing_seconds": None, "cache_read_tokens": 60,
                  "cache_write_tokens": 20, "cache_saved_tokens": 34,
                  "cache_saved_usd": 0.000035},
        "since": "2026-11-24", "until": "2026-11-24", "by": "assignment"}
    assert conforms("UsageReport", sent) == []


def test_status_and_progress_send_every_field_they_always_sent() -> None:
    # The rules build the types; what goes out is the shape the mappings had: the same
    # fields (null where nothing applies, `progress` only while processing), times
    # spelled by isoformat.
    pending = SubmissionStatus(QueueId(uuid.uuid4()), "pending", 1, 2, None, in_flight=1,
                               resumes_at=NOW, paused_by="group_usd_per_hour",
                               scheduled_for=NOW)
    running = SubmissionStatus(QueueId(uuid.uuid4()), "processing", 1, None, 2.0, in_flight=1,
                               progress={"current": 1, "total": 2, "message": "m"})
    run = RunProgress(uuid.uuid4(), total=4, pending=1, processing=1, completed=2, failed=0,
                      cancelled=0, last_position=1, youngest_running_seconds=1.0, in_flight=1,
                      cost_usd=0.5, resumes_at=NOW, paused_by="pool_usd_per_day")
    status_fields = {"queue_id", "status", "attempts", "queue_position", "review",
                     "estimated_wait_seconds", "scheduled_for", "waiting_for", "resumes_at",
                     "paused_by", "lane", "deadline"}
    sent = json.loads(json.dumps(dump(status_json(pending, 1, 5.0))))
    assert set(sent) == status_fields and sent["review"] is None
    assert sent["resumes_at"] == sent["scheduled_for"] == "2026-11-24T09:00:00+00:00"
    assert sent["waiting_for"] == "spend_cap" and sent["queue_position"] == 3
    sent_running = json.loads(json.dumps(dump(status_json(running, 1, 5.0))))
    assert set(sent_running) == status_fields | {"progress"}
    assert sent_running["progress"] == {"current": 1, "total": 2, "message": "m"}
    assert sent_running["resumes_at"] is None and sent_running["scheduled_for"] is None
    sent_run = json.loads(json.dumps(dump(progress_json(run, 1, 5.0))))
    assert set(sent_run) == set(answers.RunProgress.model_fields)
    assert sent_run["resumes_at"] == "2026-11-24T09:00:00+00:00"
    assert sent_run["review"] == {"accepted": 0, "reverted": 0, "unreviewed": 0}
    assert sent_run["run_id"] == str(run.run_id) and sent_run["scheduled_for"] is None
    for name, body in [("SubmissionStatus", sent), ("SubmissionStatus", sent_running),
                       ("RunProgress", sent_run)]:
        assert conforms(name, body) == [], name


def test_live_events_are_what_the_description_says() -> None:
    def event(status: str, summary: dict[str, Any]) -> dict[str, Any]:
        return ModelEvent(EventCursor(1, 1), QueueId(uuid.uuid4()), SubmissionId(uuid.uuid4()),
                          status, summary).to_json()  # type: ignore[arg-type]

    for body in (event("processing", {"progress": {"current": 1, "total": 2, "message": "m"}}),
                 event("completed", {"score": 3, "review": "reverted"}),
                 event("pending", {"resumes_at": NOW.isoformat(),
                                   "paused_by": "group_usd_per_day"})):
        assert conforms("MarkingEvent", body) == [], body
