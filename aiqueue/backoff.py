"""Retry delays: about base·2^(n-1), jittered, capped."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# The longest hold one refusal may ask for, in seconds: a callback's
# `retry_after` (docs/concepts.md) and a dispatch's `Retry-After` (docs/deploying/index.md) alike.
MAX_RETRY_AFTER = 3600


def retry_delay(attempt: int, base: float, cap: float, rand: float | None = None) -> float:
    """Seconds before retry `attempt` (1-based), with ±20 % jitter, at most `cap`."""
    if base <= 0:
        return 0.0
    raw = base * 2 ** max(attempt - 1, 0)
    jitter = 0.8 + 0.4 * (random.random() if rand is None else rand)
    return float(min(raw * jitter, cap))


def parse_retry_after(
    value: str | None, *, cap: float = MAX_RETRY_AFTER, now: datetime | None = None
) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date), capped; None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        now = now or datetime.now(UTC)
        seconds = (when - now).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), cap)
