"""Flow control for a shared paid model (docs/concepts.md): the rule for the learned limit L.

This module is the documented spec; the database runs the same rule in
db/sql/functions/20_flow.sql (aiqueue_flow_after_refusal, aiqueue_flow_after_result,
aiqueue_flow_paced), where
it must live so that every instance moves the one L under a row lock.
tests/integration/test_flow.py runs the unit test's table of cases through both.

L is kept as `None` while it sits at the ceiling: nothing was refused since it
last climbed back, and the hot path then writes nothing.  The ceiling is
QUEUE_MAX_IN_FLIGHT, or UNLIMITED_CEILING when that is 0 (unlimited); with the
cap at 0 the queue stays unlimited until the model first refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiqueue.models.queue import Circuit

# The ceiling of L when QUEUE_MAX_IN_FLIGHT is 0: after a refusal, the queue
# learns a limit between 1 and this many jobs at once.
UNLIMITED_CEILING = 64
# The longest window L is paced by: a per-minute budget's.  A longer reset (a
# daily cap) must not slow L's climb to a step an hour once the day is over.
MAX_LEARNED_WINDOW = 60.0
# The refusal codes a result item may carry; they use no attempt.
REFUSALS = ("rate_limited", "overloaded")


def ceiling(cap: int) -> int:
    """The most L can be: the configured cap, or UNLIMITED_CEILING when it is 0."""
    return cap if cap > 0 else UNLIMITED_CEILING


def after_refusal(limit: int | None, top: int, in_flight: int, same_burst: bool) -> int | None:
    """Multiplicative decrease: halve L, from what was really in flight, never below 1.

    `same_burst`: the refused dispatch was sent before the last cut, which
    already answered its burst, so L stays (at most one cut per burst).
    """
    if same_burst:
        return limit
    base = min(top if limit is None else limit, top, max(in_flight, 1))
    return max(1, base // 2)


def after_result(limit: int | None, clean: int, top: int, paced: bool = False
                 ) -> tuple[int | None, int]:
    """Additive increase: L + 1 after L results without a refusal; None back at the ceiling.

    `paced`: L was cut or raised less than the model's learned window ago, so
    it waits; the results still count, and the first one after the window
    raises it.  Returns the new (L, results counted towards the next step).
    """
    if limit is None:
        return None, 0
    if clean + 1 < limit:
        return limit, clean + 1
    if paced:
        return limit, limit - 1
    return (None if limit + 1 >= top else limit + 1), 0


def paced(changed_at: datetime | None, window: float | None, now: datetime) -> bool:
    """Whether L waits before it climbs: cut or raised (`changed_at`, the later) less than
    the learned window ago.  The window is what refusals tell (`learned_window`); unknown,
    L never waits."""
    if changed_at is None or window is None:
        return False
    return (now - changed_at).total_seconds() < window


def learned_window(retry_after: float | None, reset_after: float | None) -> float | None:
    """The model's window as one refusal tells it: the longer of its retry_after and the
    reset of its whole budget (x-ratelimit-reset-*, when the function relays it), at most
    MAX_LEARNED_WINDOW."""
    told = [s for s in (retry_after, reset_after) if s is not None]
    return min(max(told), MAX_LEARNED_WINDOW) if told else None


@dataclass(frozen=True)
class FlowState:
    """The flow control as it stands: L, the hold, the refusals, the window's use."""

    in_flight_limit: int
    hold_until: datetime | None
    refusals_rate_limited: int
    refusals_overloaded: int
    tokens_in_window: int
    requests_in_window: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FlowState:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class PoolState:
    """One pool's flow control (docs/concepts.md): FlowState's figures, its breaker, its slots."""

    pool: str
    in_flight_limit: int
    hold_until: datetime | None
    circuit_state: Circuit
    consecutive_failures: int
    refusals_rate_limited: int
    refusals_overloaded: int
    tokens_in_window: int
    requests_in_window: int
    in_flight: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PoolState:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class KindCount:
    """Rows of one kind (in one pool) with one status."""

    kind: str
    pool: str
    status: str
    n: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KindCount:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})
