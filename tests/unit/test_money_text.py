"""The words for money on the pages (docs/concepts.md): estimate, cap, pause."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from aiqueue.web.estimate import capped_text, estimate_text, fmt_tokens, paused_text
from aiqueue.wire.answers import EnqueueEstimate, SpendCaps


def estimate(rows: int, tokens: int, cost: float | None = None, eta: float | None = None,
             capped: SpendCaps | None = None) -> EnqueueEstimate:
    return EnqueueEstimate(rows=rows, already_marked=0, estimated_tokens=tokens,
                           estimated_cost_usd=cost, eta_seconds=eta, capped=capped)


def test_the_estimate_reads_as_the_issue_shows_it():
    d = estimate(30, 42_000, 0.18, 170)
    assert estimate_text(d) == "30 answers · about 42k tokens · about $0.18 · about 3 min"
    assert capped_text(d) == ""


def test_unknown_cost_is_left_out_unknown_time_said_so_and_tiny_costs_say_so():
    # No mark of the kind yet and no expected_seconds: no guess
    # (docs/concepts.md#an-estimate-first).
    d = estimate(1, 800, 0.001)
    assert estimate_text(d) == ("1 answer · about 800 tokens · about under $0.01 · "
                                "time shown after the first marks")
    assert estimate_text(estimate(0, 0)) == "Nothing new to mark."
    assert fmt_tokens(1_250_000) == "1.2M"


def test_a_cap_the_run_would_reach_is_named_in_words():
    text = capped_text(estimate(9, 9000, 7.0, capped=SpendCaps(group_usd_per_hour=5.0)))
    assert "this hour's marking budget ($5.00)" in text


def test_a_pause_says_which_budget_and_when_it_renews_in_utc():
    at = datetime(2026, 11, 24, 14, 0, tzinfo=UTC)
    assert paused_text(at, "group_usd_per_hour") == \
        "paused: this hour's marking budget is spent; resumes at 14:00 UTC"
    local = at.astimezone(timezone(timedelta(hours=10)))
    assert paused_text(local, "group_usd_per_day") == \
        "paused: today's marking budget is spent; resumes at 14:00 UTC"
    assert paused_text(None, None) == ""
