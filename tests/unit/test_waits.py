"""Why a mark waits and until when, in the teacher's words (aiqueue/web/waits.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from aiqueue.models import RowWait
from aiqueue.web.views.text import DISPLAY_ZONE
from aiqueue.web.waits import wait_text

NOW = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
SOON = NOW + timedelta(minutes=5)  # 14:05 in Berlin
ROW = RowWait(attempts=0, kind="mark", last_error=None, run_after=None, resumes_at=None,
              not_before=None, lane="live", deadline=None, copies_leader=False,
              breaker_until=None, busy_until=None)


@pytest.fixture(autouse=True)
def berlin():
    token = DISPLAY_ZONE.set("Europe/Berlin")
    yield
    DISPLAY_ZONE.reset(token)


CASES = [
    ("next in line", "pending", ROW, ""),
    ("the model refused", "pending", replace(ROW, last_error="rate_limited", run_after=SOON),
     "the model is busy (retrying at 14:05)"),
    ("the pool is held after a refusal", "pending", replace(ROW, busy_until=SOON),
     "the model is busy (retrying at 14:05)"),
    ("the function is unreachable", "pending",
     replace(ROW, attempts=1, last_error="dispatch_connect_error", run_after=SOON),
     "the marking service is down (retrying at 14:05) · attempt 2 of 3"),
    ("the function answered 502", "pending",
     replace(ROW, attempts=1, last_error="function_http_502", run_after=SOON),
     "the marking service is down (retrying at 14:05) · attempt 2 of 3"),
    ("the breaker is open", "pending", replace(ROW, breaker_until=SOON),
     "the marking service is down (retrying at 14:05)"),
    ("a failed mark is retried", "pending",
     replace(ROW, attempts=2, last_error="function:invalid_json", run_after=SOON),
     "the last try failed (retrying at 14:05) · attempt 3 of 3"),
    ("the same answer", "pending", replace(ROW, copies_leader=True),
     "waiting for the same answer: it gets that mark"),
    ("a spend cap", "pending", replace(ROW, resumes_at=SOON, copies_leader=True),
     "paused by a spend cap until 14:05"),
    ("scheduled days ahead", "pending",
     replace(ROW, not_before=NOW + timedelta(days=3)), "scheduled for Wed 14:00"),
    ("the overnight batch", "pending",
     replace(ROW, lane="batch", deadline=NOW + timedelta(hours=3)),
     "in the overnight batch, marked by 17:00"),
    ("an error whose retry is due", "pending",
     replace(ROW, attempts=1, last_error="dispatch_timeout", run_after=NOW),
     "attempt 2 of 3"),
    ("marking, second attempt", "processing", replace(ROW, attempts=2, run_after=SOON,
                                                      last_error="dispatch_timeout"),
     "attempt 2 of 3"),
    ("marking, first attempt", "processing", replace(ROW, attempts=1), ""),
    ("marked", "completed", replace(ROW, attempts=2), ""),
]


@pytest.mark.parametrize(("status", "row", "said"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_the_page_says_why_a_mark_waits(status: str, row: RowWait, said: str):
    assert wait_text(status, False, row, NOW, 3) == said  # type: ignore[arg-type]


def test_a_held_row_and_no_row_say_nothing_here():
    assert wait_text("pending", True, replace(ROW, copies_leader=True), NOW, 3) == ""
    assert wait_text(None, False, None, NOW, 3) == ""
