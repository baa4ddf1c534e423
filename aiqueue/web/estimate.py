"""Words for the money on the teacher's page (docs/concepts.md): the estimate before Mark All,
and a run paused at a spend cap.  Pure helpers; the tests import them."""

from __future__ import annotations

from datetime import UTC, datetime

from aiqueue.wire import dump
from aiqueue.wire.answers import EnqueueEstimate

# Which window a cap's pause waits out, in the teacher's words.
_SPENT = {
    "group_usd_per_hour": "this hour's marking budget is spent",
    "group_usd_per_day": "today's marking budget is spent",
    "pool_usd_per_day": "today's budget for this model is spent",
}
_REACHES = {
    "group_usd_per_hour": "this hour's marking budget",
    "group_usd_per_day": "today's marking budget",
    "pool_usd_per_day": "today's budget for this model",
}


def fmt_tokens(n: int) -> str:
    """'800', '42k', '1.2M'."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{round(n / 1000)}k"
    return f"{n / 1_000_000:.1f}M"


def fmt_usd(usd: float) -> str:
    return "under $0.01" if usd < 0.01 else f"${usd:,.2f}"


def fmt_duration(seconds: float) -> str:
    if seconds < 60:
        return "under a minute"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def estimate_text(d: EnqueueEstimate) -> str:
    """'30 answers · about 42k tokens · about $0.18 · about 3 min' from a dry run's answer;
    with a calibration, each part priced: '5 to check first (about $0.03), then the other
    25 once you release them (about $0.15) · ...'."""
    if not d.rows:
        return "Nothing new to mark."
    if d.calibration is not None and d.rest is not None:
        return " · ".join([_parts_text(d.calibration.rows, d.calibration.estimated_cost_usd,
                                       d.rest.rows, d.rest.estimated_cost_usd),
                           *_totals(d)[1:]])
    return " · ".join(_totals(d))


def _about(usd: float | None) -> str:
    return f" (about {fmt_usd(usd)})" if usd is not None else ""


def _parts_text(first: int, first_usd: float | None, rest: int, rest_usd: float | None) -> str:
    text = f"{first} to check first{_about(first_usd)}"
    return text + (f", then the other {rest} once you release them{_about(rest_usd)}"
                   if rest else "")


def _totals(d: EnqueueEstimate) -> list[str]:
    parts = [f"{d.rows} answer{'s' if d.rows != 1 else ''}",
             f"about {fmt_tokens(d.estimated_tokens)} tokens"]
    if d.estimated_cost_usd is not None:
        parts.append(f"about {fmt_usd(d.estimated_cost_usd)}")
    # No recent mark of the kind and no expectation: no guess
    # (docs/concepts.md#an-estimate-first).
    parts.append(f"about {fmt_duration(d.eta_seconds)}" if d.eta_seconds is not None
                 else "time shown after the first marks")
    return parts


def capped_text(d: EnqueueEstimate) -> str:
    """What a cap the run would reach means for it ('' when none would)."""
    # Only the caps the run would reach are set in `capped`.
    capped = dump(d.capped) if d.capped is not None else {}
    if not capped:
        return ""
    name, usd = next(iter(capped.items()))
    return (f"This run would go past {_REACHES.get(name, name)} ({fmt_usd(usd)}): "
            "the rest waits, paused, until the budget renews.")


def paused_text(resumes_at: datetime | None, cap: str | None) -> str:
    """'paused: this hour's marking budget is spent; resumes at 14:00 UTC' ('' unpaused)."""
    if resumes_at is None:
        return ""
    spent = _SPENT.get(cap or "", "the marking budget is spent")
    return f"paused: {spent}; resumes at {resumes_at.astimezone(UTC):%H:%M} UTC"
