"""A model API's "slow down" answer: how long it asks us to wait, from its headers.

OpenAI-compatible APIs say it in several ways, tried in this order:
`retry-after-ms` (milliseconds), `retry-after` (seconds or an HTTP date), and
`x-ratelimit-reset-tokens` / `x-ratelimit-reset-requests` (durations such as
`6m0s`, `1.5s`, `20ms`: when that budget is whole again).  The answer goes to
the queue as the failed item's `retry_after`, which holds every dispatch; the
reset alone also goes as `reset_after`, from which the queue learns the window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# The queue takes 0..3600 s (docs/concepts.md).
MAX_RETRY_AFTER = 3600.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI reset duration (`1h2m3.5s`, `6m0s`, `20ms`); None if not one."""
    text = text.strip().lower()
    if not text:
        return None
    parts = list(_DURATION.finditer(text))
    if not parts or "".join(p.group(0) for p in parts) != text:
        return None
    return sum(float(p.group(1)) * _UNIT[p.group(2)] for p in parts)


def _seconds(text: str, now: datetime) -> float | None:
    """`retry-after`: a number of seconds or an HTTP date."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()


def _reset(headers: Mapping[str, str]) -> float | None:
    """The reset of the budget that ran out (remaining 0), else the later of both."""
    found = {}
    for kind in ("tokens", "requests"):
        raw = headers.get(f"x-ratelimit-reset-{kind}")
        value = parse_duration(raw) if raw else None
        if value is not None:
            found[kind] = value
    spent = [v for k, v in found.items()
             if headers.get(f"x-ratelimit-remaining-{k}", "").strip() == "0"]
    candidates = spent or list(found.values())
    return max(candidates) if candidates else None


def reset_after(headers: Mapping[str, str]) -> float | None:
    """Seconds until the model's whole budget is back (`x-ratelimit-reset-*`, 0..3600), or
    None: the queue learns the model's window from it, whatever retry_after says."""
    value = _reset(headers)
    if value is None or not math.isfinite(value):
        return None
    return round(min(max(value, 0.0), MAX_RETRY_AFTER), 3)


def retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the model asks us to wait (0..3600), or None when it says nothing usable."""
    now = now or datetime.now(UTC)
    value: float | None = None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms) / 1000
        except ValueError:
            value = None
    if value is None and headers.get("retry-after"):
        value = _seconds(headers["retry-after"], now)
    if value is None:
        value = _reset(headers)
    if value is None or not math.isfinite(value):
        return None
    return round(min(max(value, 0.0), MAX_RETRY_AFTER), 3)
