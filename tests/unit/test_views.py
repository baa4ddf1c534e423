"""The /ai-queue view helpers and the session/CSRF rules, without I/O (frozen clocks)."""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiqueue.errors import Unauthorized
from aiqueue.models import Attempt, QueueId, QueueRow, Status, SubmissionId
from aiqueue.tokens import Tokens
from aiqueue.web import chart, views
from aiqueue.web.auth import SESSION_MAX_AGE, Session, check_csrf, safe_next, session_from_cookie
from aiqueue.wire.reads import Stats

NOW = datetime(2026, 11, 22, 10, 30, 0, tzinfo=UTC)


def row(status: Status = "pending", **changes: Any) -> QueueRow:
    base: dict[str, Any] = {
        "queue_id": QueueId(uuid.UUID(int=7)), "submission_id": SubmissionId(uuid.UUID(int=9)),
        "assignment_id": "hw-1", "status": status, "attempts": 1, "last_error": None,
        "created_at": NOW - timedelta(minutes=3), "updated_at": NOW, "started_at": None,
        "finished_at": None, "priority": 0, "group_key": "hw-1",
    }
    return QueueRow(**{**base, **changes})


# -- formatting ------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "—"), (-5, "0s"), (0, "0s"), (59.9, "59s"), (60, "1m 0s"), (3599, "59m 59s"),
    (3600, "1h 0m"), (86399, "23h 59m"), (86400, "1d 0h"), (3 * 86400 + 4 * 3600 + 59, "3d 4h"),
])
def test_fmt_age(seconds: float | None, text: str):
    assert views.fmt_age(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "—"), (0, "0 ms"), (0.85, "850 ms"), (0.9996, "1.0 s"), (1, "1.0 s"),
    (12.34, "12.3 s"), (59.9, "59.9 s"), (60, "1m 00s"), (125, "2m 05s"), (93.99999, "1m 34s"),
    (3720, "1h 02m"), (-3, "0 ms"),
])
def test_fmt_duration(seconds: float | None, text: str):
    assert views.fmt_duration(seconds) == text


def test_fmt_in_flight_and_time():
    assert views.fmt_in_flight(1, 1) == "1 / 1 in flight"
    assert views.fmt_in_flight(3, 0) == "3 / ∞ in flight"
    plus_two = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC).astimezone(
        timezone(timedelta(hours=2)))
    assert views.fmt_time(plus_two) == "2026-11-22 12:00:05 UTC"
    assert views.fmt_time(None) == "—"


# -- the stats header ------------------------------------------------------------------


def some_stats(**changes: Any) -> Stats:
    """The stats' type from JSON values, as the JSON twin answers them."""
    base = {"pending": 4, "processing": 1, "completed": 0, "failed": 2, "cancelled": 0,
            "failed_today": 1, "completed_today": 9, "avg_processing_seconds": 2.5,
            "p95_processing_seconds": 61.0, "oldest_pending_seconds": 125.0,
            "max_in_flight": 1, "paused": False, "busy_until": None,
            "in_flight_limit": 1, "hold_until": None, "tokens_in_window": None,
            "requests_in_window": None, "tokens_per_minute": None, "requests_per_minute": None,
            "budget_window_seconds": 60,
            "circuit": {"state": "closed", "consecutive_failures": 0, "next_probe_at": None}}
    return Stats.model_validate({**base, **changes})


def test_header_formats_the_shared_stats():
    h = views.header(some_stats(), NOW)
    assert (h.in_flight, h.pending, h.failed_today, h.completed_today) == (
        "1 / 1 in flight", 4, 1, 9)
    assert (h.avg, h.p95, h.oldest_pending) == ("2.5 s", "1m 01s", "2m 5s")
    assert not h.paused and h.paused_text is None and h.circuit_text is None
    assert h.busy_text is None


def test_header_says_who_paused_and_when_the_circuit_probes():
    probe = NOW + timedelta(seconds=42)
    h = views.header(some_stats(
        paused=True, busy_until=(NOW + timedelta(minutes=1)).isoformat(),
        circuit={"state": "open", "consecutive_failures": 5, "next_probe_at": probe.isoformat()},
    ), NOW, paused_by="admin", paused_at=NOW - timedelta(minutes=2))
    assert h.paused_text == "Dispatch paused by admin at 2026-11-22 10:28:00 UTC."
    assert h.circuit_state == "open"
    assert h.circuit_text == ("Circuit open after 5 failed dispatches in a row; next probe at "
                              "2026-11-22 10:30:42 UTC (in 42s).")
    assert h.busy_text is not None and "10:31:00 UTC" in h.busy_text
    half = views.header(some_stats(circuit={"state": "half_open", "consecutive_failures": 5,
                                            "next_probe_at": None}), NOW)
    assert half.circuit_text is not None and "half-open" in half.circuit_text
    past_busy = views.header(some_stats(busy_until=(NOW - timedelta(seconds=1)).isoformat()), NOW)
    assert past_busy.busy_text is None


# -- the chart ----------------------------------------------------------------------------


def day(counts: dict[int, tuple[int, int]]) -> list[tuple[datetime, int, int]]:
    """288 five-minute buckets ending at NOW's bucket; `counts` by bucket index."""
    first = datetime(2026, 11, 21, 10, 35, tzinfo=UTC)
    return [(first + timedelta(minutes=5 * i), *counts.get(i, (0, 0))) for i in range(288)]


@pytest.mark.parametrize(("value", "ceiling"), [
    (0, 1), (1, 1), (2, 2), (3, 5), (5, 5), (7, 10), (10, 10), (11, 20), (250, 500),
    (999, 1000), (1000, 1000), (1001, 2000),
])
def test_nice_ceiling(value: int, ceiling: int):
    assert chart.nice_ceiling(value) == ceiling


def test_chart_of_an_empty_day_has_no_bars():
    c = chart.chart(day({}))
    assert c.bars == [] and c.completed_path == "" and c.failed_path == ""
    assert (c.y_max, c.completed, c.failed, c.width) == (1, 0, 0, 864)


def test_chart_stacks_failed_on_completed_on_one_scale():
    c = chart.chart(day({10: (3, 1), 287: (1, 0)}), plot_height=100)
    assert c.y_max == 5 and (c.completed, c.failed) == (4, 1)
    first, last = c.bars
    base = c.top + c.plot_height
    assert (first.x, first.completed_h, first.failed_h) == (30, 60, 20)
    assert first.completed_y == base - 60 and first.failed_y == base - 80
    assert last.x == 861 and last.completed_h == 20 and last.failed_h == 0
    assert first.title == "11:25–11:30 UTC: 3 completed, 1 failed"
    assert c.completed_path == "M30 48h2.25v60h-2.25z M861 88h2.25v20h-2.25z"
    assert c.failed_path == "M30 28h2.25v20h-2.25z"


def test_chart_ticks_mark_every_third_utc_hour():
    c = chart.chart(day({}))
    assert [label for _, label in c.ticks] == [
        "12:00", "15:00", "18:00", "21:00", "00:00", "03:00", "06:00", "09:00"]
    assert c.ticks[0][0] == 17 * 3  # 10:35 + 17 buckets = 12:00


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)),
                min_size=1, max_size=288))
def test_chart_bars_stay_inside_the_plot_and_keep_proportions(counts: list[tuple[int, int]]):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    buckets = [(start + timedelta(minutes=5 * i), c, f) for i, (c, f) in enumerate(counts)]
    drawn = chart.chart(buckets)
    top, bottom = drawn.top, drawn.top + drawn.plot_height
    assert max(c + f for c, f in counts) <= drawn.y_max
    assert len(drawn.bars) == sum(1 for c, f in counts if c + f)
    for bar in drawn.bars:
        assert top - 0.02 <= bar.failed_y <= bar.completed_y <= bottom
        assert bar.completed_y + bar.completed_h == pytest.approx(bottom, abs=0.02)
        assert bar.completed_h + bar.failed_h <= drawn.plot_height + 0.02
    tallest = max(drawn.bars, key=lambda b: b.completed_h + b.failed_h, default=None)
    if tallest is not None:
        biggest = max(c + f for c, f in counts)
        assert tallest.completed_h + tallest.failed_h == pytest.approx(
            biggest / drawn.y_max * drawn.plot_height, abs=0.03)


# -- the table ------------------------------------------------------------------------


def test_table_row_shows_attempts_of_max_age_and_processing_time():
    r = views.table_row(row("completed", attempts=2, started_at=NOW - timedelta(seconds=70),
                            finished_at=NOW - timedelta(seconds=58), last_error=None), NOW, 3)
    assert (r.attempts, r.age, r.processing, r.last_error) == ("2/3", "3m 0s", "12.0 s", "")
    assert not r.can_retry and not r.can_cancel
    running = views.table_row(row("processing", started_at=NOW - timedelta(seconds=4)), NOW, 3)
    assert running.processing == "4.0 s"
    failed = views.table_row(row("failed", attempts=3, last_error="http_500",
                                 started_at=NOW - timedelta(seconds=2), finished_at=NOW), NOW, 3)
    assert (failed.attempts, failed.last_error, failed.can_retry) == ("3/3", "http_500", True)
    pending = views.table_row(row("pending", started_at=NOW - timedelta(minutes=1)), NOW, 3)
    assert pending.processing == "—" and pending.can_cancel and not pending.can_retry


def test_history_entry_keeps_model_and_tokens_only():
    attempt = Attempt(
        id=1, dispatch_seq=2, attempt=2, kind="dispatch", started_at=NOW,
        ended_at=NOW + timedelta(seconds=2.5), outcome="completed", error=None,
        usage={"model": "llama3.1:8b", "prompt_tokens": 812, "completion_tokens": 164,
               "feedback": "must never show"}, actor=None)
    h = views.history_entry(attempt)
    assert (h.kind, h.attempt, h.outcome, h.duration) == ("dispatch", "2", "completed", "2.5 s")
    assert (h.model, h.tokens) == ("llama3.1:8b", "812 + 164")
    assert "must never show" not in repr(h)
    open_attempt = views.history_entry(Attempt(
        id=2, dispatch_seq=3, attempt=3, kind="dispatch", started_at=NOW, ended_at=None,
        outcome=None, error=None, usage=None, actor=None))
    assert open_attempt.outcome == "in flight" and open_attempt.duration == "—"
    assert open_attempt.ref == ""
    accepted = views.history_entry(Attempt(
        id=4, dispatch_seq=4, attempt=1, kind="dispatch", started_at=NOW, ended_at=None,
        outcome=None, error=None, usage=None, actor=None, dispatch_ref="2f9f0e4c8b6d4c3a"))
    assert accepted.ref == "2f9f0e4c8b6d4c3a" and accepted.platform == ""
    action = views.history_entry(Attempt(
        id=3, dispatch_seq=0, attempt=0, kind="action", started_at=NOW, ended_at=NOW,
        outcome="retry", error=None, usage=None, actor="admin"))
    assert (action.outcome, action.actor, action.attempt, action.duration) == (
        "retry", "admin", "", "")


def test_history_says_what_the_platform_said():
    said = {}
    for note in ("still_running", "applied_from_activation", "activation_failed", "timed_out",
                 "lookup_failed", "something_new"):
        said[note] = views.history_entry(Attempt(
            id=5, dispatch_seq=1, attempt=1, kind="dispatch", started_at=NOW, ended_at=None,
            outcome=None, error=None, usage=None, actor=None, dispatch_ref="a1",
            platform=note)).platform
    assert said == {
        "still_running": "still running (no activation record yet)",
        "applied_from_activation": "applied from the activation",
        "activation_failed": "activation failed", "timed_out": "timed out",
        "lookup_failed": "platform not reachable; asking again", "something_new": ""}


# -- keyset paging ----------------------------------------------------------------------


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                    timezones=st.just(UTC)), st.uuids())
def test_cursor_round_trips_to_the_microsecond(at: datetime, queue_id: uuid.UUID):
    cursor = views.encode_cursor(row(created_at=at, queue_id=QueueId(queue_id)))
    assert views.decode_cursor(cursor) == (at, queue_id)


# Fixed ids: every pytest-xdist worker must collect the same test names.
SOME_ID = "0b6f4a52-6a55-4a8e-9d5e-1f3f1f7c2a10"


@pytest.mark.parametrize("bad", [None, "", "abc", "12_not-a-uuid", "_" + SOME_ID,
                                 "1" * 90, "99999999999999999999999_" + SOME_ID])
def test_malformed_cursors_mean_no_cursor(bad: str | None):
    assert views.decode_cursor(bad) is None


def test_paging_links_keep_the_filters():
    rows = [row(queue_id=QueueId(uuid.UUID(int=k)), created_at=NOW - timedelta(minutes=k))
            for k in range(1, 4)]
    filters = {"status": "failed", "assignment_id": "hw 1", "limit": None}
    first = views.paging("/ai-queue", filters, rows, has_newer=False, has_older=True)
    assert first.newest is None and first.newer is None
    assert first.older == ("/ai-queue?status=failed&assignment_id=hw+1&after="
                           + views.encode_cursor(rows[-1]))
    middle = views.paging("/ai-queue", filters, rows, has_newer=True, has_older=True)
    assert middle.newest == "/ai-queue?status=failed&assignment_id=hw+1"
    assert middle.newer is not None and middle.newer.endswith(
        "before=" + views.encode_cursor(rows[0]))
    last = views.paging("/ai-queue", filters, rows, has_newer=True, has_older=False)
    assert last.older is None
    empty = views.paging("/ai-queue", {}, [], has_newer=True, has_older=False)
    assert empty == views.Paging(newest="/ai-queue", newer=None, older=None)


def test_with_params_replaces_an_earlier_notice():
    url = views.with_params("/ai-queue?status=failed&notice=paused&n=3",
                            {"notice": "retried_all", "n": "5"})
    assert url == "/ai-queue?status=failed&notice=retried_all&n=5"
    assert views.with_params("/ai-queue", {"notice": "paused", "row": ""}) == (
        "/ai-queue?notice=paused")


def test_notice_text_is_fixed_sentences_never_echoed_input():
    assert views.notice_text("retried_all", n="4") == "4 failed row(s) are pending again."
    assert views.notice_text("retried_all", n="<b>") == "0 failed row(s) are pending again."
    assert views.notice_text("retried", row="0b6c2c1e-aaaa") == (
        "Row 0b6c2c1e is pending again with fresh attempts.")
    assert views.notice_text("retried", row="<script>") == "Row ? is pending again with fresh " \
                                                          "attempts."
    assert views.notice_text("anything else") is None and views.notice_text(None) is None


# -- session and CSRF, with a frozen clock -------------------------------------------------

SECRET = "unit-secret-0123456789abcdef"


def test_a_session_cookie_is_valid_until_it_expires():
    tokens = Tokens(SECRET)
    signed_at = time.time()
    cookie = tokens.session("admin", "csrf-token-1")
    fresh = session_from_cookie(tokens, cookie, now=signed_at + 5)
    assert fresh == Session("admin", "csrf-token-1")
    assert session_from_cookie(tokens, cookie, now=signed_at + SESSION_MAX_AGE - 5) == fresh
    assert session_from_cookie(tokens, cookie, now=signed_at + SESSION_MAX_AGE + 5) is None


def test_forged_tampered_or_foreign_cookies_are_no_session():
    tokens = Tokens(SECRET)
    now = time.time()
    cookie = tokens.session("admin", "csrf-token-1")
    assert session_from_cookie(tokens, None, now=now) is None
    assert session_from_cookie(tokens, "", now=now) is None
    assert session_from_cookie(tokens, cookie[:-2] + ("AA" if cookie[-2:] != "AA" else "BB"),
                               now=now) is None
    assert session_from_cookie(Tokens("another-secret-0123456789"), cookie, now=now) is None
    # A callback token is signed with the same secret but another salt: not a session.
    callback = tokens.callback(uuid.uuid4(), 1, 1)
    assert session_from_cookie(tokens, callback, now=now) is None


def test_csrf_token_must_match_the_session():
    session = Session("admin", "csrf-token-1")
    check_csrf(session, {"csrf_token": "csrf-token-1"})
    for form in ({}, {"csrf_token": ""}, {"csrf_token": "csrf-token-2"},
                 {"csrf_token": "csrf-token-1 "}, {"csrf": "csrf-token-1"}):
        with pytest.raises(Unauthorized):
            check_csrf(session, form)


def test_each_login_gets_its_own_csrf_token_and_old_tokens_fail_on_new_sessions():
    tokens = Tokens(SECRET)
    now = time.time()
    a = session_from_cookie(tokens, tokens.session("admin", "token-a"), now=now)
    b = session_from_cookie(tokens, tokens.session("admin", "token-b"), now=now)
    assert a is not None and b is not None
    with pytest.raises(Unauthorized):
        check_csrf(b, {"csrf_token": a.csrf})


@pytest.mark.parametrize(("target", "expected"), [
    ("/ai-queue?status=failed", "/ai-queue?status=failed"),
    ("/ai-queue/rows/abc", "/ai-queue/rows/abc"),
    ("//evil.example/x", "/ai-queue"), ("https://evil.example", "/ai-queue"),
    ("/\\evil.example", "/ai-queue"), ("/\t/evil.example", "/ai-queue"),
    ("/ /evil.example", "/ai-queue"), (None, "/ai-queue"), ("", "/ai-queue"),
])
def test_redirect_targets_stay_on_this_site(target: str | None, expected: str):
    assert safe_next(target) == expected


def test_templates_escape_everything_they_print():
    from aiqueue.web.templating import environment

    html = environment().get_template("ai_queue_error.html").render(
        title="<b>x</b>", message="<script>alert(1)</script>")
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert re.search(r"<h1[^>]*>&lt;b&gt;x&lt;/b&gt;</h1>", html)


def test_header_shows_the_learned_limit_the_hold_and_the_budget_window():
    h = views.header(some_stats(
        max_in_flight=8, in_flight_limit=3, hold_until=(NOW + timedelta(seconds=90)).isoformat(),
        tokens_in_window=12_345, requests_in_window=7, tokens_per_minute=60_000,
        requests_per_minute=120, budget_window_seconds=10), NOW)
    assert h.limit == "3 of 8"
    assert h.busy_text == ("The model asked to slow down: every dispatch is held until "
                           "2026-11-22 10:31:30 UTC (in 1m 30s).")
    assert h.budget == (("Tokens, last 10 s", "12,345 / 10,000"),
                        ("Requests, last 10 s", "7 / 20"))
    plain = views.header(some_stats(in_flight_limit=0, max_in_flight=0), NOW)
    assert (plain.limit, plain.budget, plain.busy_text) == ("∞", (), None)
    assert views.fmt_limit(5, 0) == "5 (cap ∞)" and views.fmt_limit(None, 4) == "-"
