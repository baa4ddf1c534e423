"""EnqueueRequest.parse and the edge's other parsers: each bad input -> the error that names it."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from aiqueue.errors import BadHeader, Invalid, NotFound
from aiqueue.wire import EnqueueRequest
from aiqueue.wire.rules import (
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    parse_idempotency_key,
    parse_status,
    parse_uuid,
)

SUB = "0b7f5c4e-6f0e-4f59-9a4e-2f1d8b9c3a10"
GOOD: dict[str, Any] = {"assignment_id": "hw-7", "submission_ids": [SUB]}


def nested(depth: int) -> dict[str, Any]:
    """A payload object `depth` levels deep (the payload itself is level 1)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(("body", "expected"), [
    (GOOD, {"priority": 0, "payload": "{}", "group": None, "remark": False}),
    ({**GOOD, "priority": 5, "group": "period-2", "remark": True, "payload": None},
     {"priority": 5, "payload": "{}", "group": "period-2", "remark": True}),
    ({**GOOD, "priority": None, "remark": None}, {"priority": 0, "remark": False}),
    ({**GOOD, "payload": {"rubric": "r", "max_score": 10}},
     {"payload": '{"max_score":10,"rubric":"r"}'}),
    ({**GOOD, "submission_ids": [SUB.upper(), "{" + SUB + "}"]},
     {"submission_ids": [SUB.upper(), SUB]}),
    ({**GOOD, "payload": nested(MAX_DEPTH)}, {}),
    ({**GOOD, "priority": -1_000_000}, {"priority": -1_000_000}),
])
def test_good_bodies_parse(body: dict[str, Any], expected: dict[str, Any]):
    request = EnqueueRequest.parse(body)
    assert request.assignment_id == "hw-7"
    for name, value in expected.items():
        assert getattr(request, name) == value, name


@pytest.mark.parametrize(("body", "message"), [
    ([GOOD], "the body must be a JSON object"),
    ("hw-7", "the body must be a JSON object"),
    ({"submission_ids": [SUB]}, "assignment_id must be a non-empty string"),
    ({**GOOD, "assignment_id": "  "}, "assignment_id must be a non-empty string"),
    ({**GOOD, "assignment_id": "x" * 201}, "assignment_id must be a non-empty string"),
    ({**GOOD, "assignment_id": "a\x00b"}, "assignment_id contains a NUL character"),
    ({**GOOD, "assignment_id": 7}, "assignment_id must be a non-empty string"),
    ({**GOOD, "group": ""}, "group must be a non-empty string"),
    ({**GOOD, "group": "g\ud800"}, "group contains an unpaired surrogate"),
    ({**GOOD, "remark": "yes"}, "remark must be true or false"),
    ({**GOOD, "remark": 1}, "remark must be true or false"),
    ({"assignment_id": "hw-7"}, "submission_ids must be a non-empty array"),
    ({**GOOD, "submission_ids": []}, "submission_ids must be a non-empty array"),
    ({**GOOD, "submission_ids": SUB}, "submission_ids must be a non-empty array"),
    ({**GOOD, "submission_ids": [SUB, "nope"]}, "submission_ids must be UUIDs"),
    ({**GOOD, "submission_ids": [SUB] * 10_001}, "at most 10000 submission_ids"),
    ({**GOOD, "priority": 1.5}, "priority must be an integer"),
    ({**GOOD, "priority": True}, "priority must be an integer"),
    ({**GOOD, "priority": 1_000_001}, "priority must be an integer"),
    ({**GOOD, "payload": []}, "payload must be a JSON object"),
    ({**GOOD, "payload": "rubric"}, "payload must be a JSON object"),
    ({**GOOD, "payload": 0}, "payload must be a JSON object"),
    ({**GOOD, "payload": nested(MAX_DEPTH + 1)}, f"payload is nested deeper than {MAX_DEPTH}"),
    ({**GOOD, "payload": {"a": [[[{"b": nested(MAX_DEPTH - 3)}]]]}},
     f"payload is nested deeper than {MAX_DEPTH}"),
    ({**GOOD, "payload": {"rubric": "a\x00"}}, "payload contains a NUL character"),
    ({**GOOD, "payload": {"k\x00": 1}}, "payload contains a NUL character"),
    ({**GOOD, "payload": {"r": "\udc00"}}, "payload contains an unpaired surrogate"),
    ({**GOOD, "payload": {"x": float("nan")}}, "payload contains NaN or Infinity"),
    ({**GOOD, "payload": {"x": [float("inf")]}}, "payload contains NaN or Infinity"),
    ({**GOOD, "payload": {"r": "x" * MAX_PAYLOAD_BYTES}}, "payload must be at most 64 KiB"),
])
def test_bad_bodies_name_their_problem(body: object, message: str):
    with pytest.raises(Invalid) as caught:
        EnqueueRequest.parse(body)
    assert str(caught.value).startswith(message)


def test_invalid_ids_are_listed_without_echoing_long_values():
    with pytest.raises(Invalid) as caught:
        EnqueueRequest.parse({**GOOD, "submission_ids": [SUB, "nope", 7, "y" * 65]})
    assert caught.value.extra == {"invalid_ids": ["nope", "<not a UUID string>",
                                                  "<not a UUID string>"]}


def test_a_payload_just_under_the_limit_fits():
    filler = MAX_PAYLOAD_BYTES - len('{"r":""}')
    assert len(EnqueueRequest.parse({**GOOD, "payload": {"r": "x" * filler}}).payload) == \
        MAX_PAYLOAD_BYTES


@pytest.mark.parametrize("body", [
    GOOD,
    {**GOOD, "payload": {"rubric": "r\u00e9", "max_score": 10, "nested": {"b": 1, "a": [1, 2]}}},
    {**GOOD, "payload": None, "priority": 3, "remark": False, "group": "g"},
    {**GOOD, "payload": {}, "release_when": {"reviewed": 2, "exact": 0.5},
     "calibrate": {"rows": 2}},
])
def test_the_fingerprint_is_the_hash_of_the_canonical_body(body: dict[str, Any]):
    # The bytes keys saved before the single serialisation were hashed from.
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    assert EnqueueRequest.parse(body).fingerprint == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.parametrize(("extra", "detail"), [
    ({"extra": 1}, "unknown field: extra"),
    ({"calibrate": {"rows": 5, "spread": True}}, "unknown field: calibrate.spread"),
    ({"calibrate": {"rows": 5}, "release_when": {"exact": 0.9, "kappa": 0.8}},
     "unknown field: release_when.kappa"),
])
def test_a_field_the_contract_does_not_name_is_refused(extra: dict[str, Any], detail: str):
    with pytest.raises(Invalid) as caught:
        EnqueueRequest.parse({**GOOD, **extra})
    assert str(caught.value) == detail


def test_every_field_the_contract_names_is_taken():
    #-f: each optional field, at once.
    EnqueueRequest.parse({
        **GOOD, "priority": 1, "payload": {"rubric": "r"}, "group": "g", "remark": True,
        "dry_run": False, "kind": "mark", "lane": "batch",
        "deadline": "2999-01-01T00:00:00Z", "delay_seconds": 5, "expire_after_seconds": 3600,
        "calibrate": {"rows": 1}, "release_when": {"reviewed": 1, "exact": 1, "adjacent": 0},
        "same_answers": "mark_each"})
    soon = datetime.now(UTC) + timedelta(days=1)
    EnqueueRequest.parse({**GOOD, "not_before": soon.isoformat(),
                          "expires_at": (soon + timedelta(hours=1)).isoformat(),
                          "same_answers": "mark_once",
                          "calibrate": {"submission_ids": GOOD["submission_ids"][:1]}})


def test_the_fingerprint_ignores_key_order_and_tells_bodies_apart():
    one = EnqueueRequest.parse({**GOOD, "payload": {"a": 1, "b": 2}})
    again = EnqueueRequest.parse({"payload": {"b": 2, "a": 1}, **GOOD})
    other = EnqueueRequest.parse({**GOOD, "payload": {"a": 1, "b": 3}})
    assert one.fingerprint == again.fingerprint != other.fingerprint


@pytest.mark.parametrize(("value", "ok"), [
    (None, True), ("k-1", True), ("~" * 255, True), ("", False), ("x" * 256, False),
    ("caf\u00e9", False), ("a\nb", False),
])
def test_idempotency_key(value: str | None, ok: bool):
    if ok:
        assert parse_idempotency_key(value) == value
    else:
        with pytest.raises(BadHeader):
            parse_idempotency_key(value)


def test_path_ids_and_status_filters():
    assert str(parse_uuid(SUB, "queue row")) == SUB
    with pytest.raises(NotFound, match="no queue row 'x'"):
        parse_uuid("x", "queue row")
    assert parse_status("") is None and parse_status("failed") == "failed"
    with pytest.raises(Invalid, match="status must be one of"):
        parse_status("done")
