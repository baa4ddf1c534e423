"""Time without I/O: the enqueue's time fields, the alert settings, the views."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from aiqueue.errors import Invalid, SettingsError
from aiqueue.settings import load_settings
from aiqueue.web.views import alert_text
from aiqueue.wire import EnqueueRequest, parse_times
from aiqueue.wire.reads import OpenAlert
from aiqueue.wire.rules import parse_rfc3339

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
IDS = ["00000000-0000-0000-0000-000000000001"]


def test_times_are_read_in_utc_whatever_their_offset():
    assert parse_rfc3339("2026-11-27T17:00:00+01:00", "x") == datetime(2026, 11, 27, 16,
                                                                       tzinfo=UTC)
    assert parse_rfc3339("2026-11-27t16:00:00.123456789z", "x") == datetime(
        2026, 11, 27, 16, 0, 0, 123456, tzinfo=UTC)


def test_delays_count_from_now_and_nothing_is_scheduled_without_a_field():
    assert parse_times({}, NOW) == (None, None)
    assert parse_times({"delay_seconds": 90, "expire_after_seconds": 3600}, NOW) == (
        NOW + timedelta(seconds=90), NOW + timedelta(hours=1))
    request = EnqueueRequest.parse({"assignment_id": "a", "submission_ids": IDS,
                                    "delay_seconds": 0.5}, NOW)
    assert request.not_before == NOW + timedelta(seconds=0.5) and request.expires_at is None


@pytest.mark.parametrize(("body", "named"), [
    ({"not_before": "2026-11-27T17:00:00Z", "delay_seconds": 1}, "not_before or delay_seconds"),
    ({"delay_seconds": True}, "delay_seconds"),
    ({"delay_seconds": 2_592_000.5}, "delay_seconds"),
    ({"not_before": 1764000000}, "not_before"),
    ({"not_before": "2026-11-27 17:00"}, "not_before"),
    ({"not_before": "9999-12-31T23:59:59-23:59"}, "not_before"),  # overflows in UTC
    ({"not_before": "2026-02-30T00:00:00Z"}, "not_before"),
    ({"not_before": "2028-01-01T00:00:00Z"}, "not_before must be at most 365 days ahead"),
    ({"expires_at": "2026-11-24T08:59:59Z"}, "expires_at must be in the future"),
    ({"expire_after_seconds": 0.5}, "expire_after_seconds"),
    ({"not_before": "2026-11-25T00:00:00Z", "expires_at": "2026-11-25T00:00:00Z"},
     "expires_at must be after not_before"),
])
def test_bad_time_fields_name_the_field(body: dict[str, object], named: str):
    with pytest.raises(Invalid, match=named):
        parse_times(body, NOW)


def test_alert_settings_default_to_the_contract_and_bad_ones_stop_start_up():
    s = load_settings({"MARKING_QUEUE_SECRET": "x" * 32})
    assert (s.alert_backlog_age_seconds, s.alert_stalled_seconds, s.alert_failures_min,
            s.alert_failure_rate) == (900, 300, 5, 0.2)
    for name, bad in (("QUEUE_ALERT_FAILURE_RATE", "1.5"), ("QUEUE_ALERT_FAILURES_MIN", "0"),
                      ("QUEUE_ALERT_STALLED_SECONDS", "soon")):
        with pytest.raises(SettingsError, match=name):
            load_settings({"MARKING_QUEUE_SECRET": "x" * 32, name: bad})


def test_an_open_alert_reads_as_a_sentence():
    opened = (NOW - timedelta(minutes=3)).isoformat()
    stalled = alert_text(OpenAlert.model_validate({
        "alert": "stalled", "pool": "default", "kind": None, "value": 312.0,
        "threshold": 300.0, "opened_at": opened}), NOW)
    assert stalled.startswith("Alert stalled (pool default) open for 3m")
    assert "nothing has been dispatched" in stalled
    spike = alert_text(OpenAlert.model_validate({
        "alert": "failure_spike", "pool": "default", "kind": None, "value": 0.4,
        "threshold": 0.2, "opened_at": opened}), NOW)
    assert "40% of the rows" in spike and "threshold 20%" in spike
