"""Read-only views of the queue: the stats, typed (the Prometheus metrics: metrics.py)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiqueue.flow import FlowState, KindCount, PoolState
from aiqueue.models import Control, OpenAlert
from aiqueue.notify import budget
from aiqueue.queue import fallback
from aiqueue.runtime import Runtime
from aiqueue.wire import reads
from aiqueue.wire.fields import SpendCap
from aiqueue.wire.reads import CircuitState, KindStats, PoolStats, Refusals, Stats


async def read_stats(rt: Runtime) -> Stats:
    """The contract's /api/marking/stats answer, plus the dispatch state (the page's too)."""
    stats, _ = await stats_and_control(rt)
    return stats


async def stats_and_control(rt: Runtime) -> tuple[Stats, Control]:
    """The stats and the control row they were made from (the page shows who paused).

    Their reads are independent of each other and run at once, each on a pooled
    connection of its own (docs/performance.md).
    """
    stats, control, (kinds, pools), flow, alerts, near = await asyncio.gather(
        rt.store.stats(rt.clock(), rt.settings.timezone),
        rt.store.control(rt.settings.breaker_threshold),
        breakdown(rt), flow_state(rt), rt.store.open_alerts(), budget.near_caps(rt))
    return Stats(
        pending=stats.pending,
        processing=stats.processing,
        completed=stats.completed,
        failed=stats.failed,
        cancelled=stats.cancelled,
        expired=stats.expired,
        scheduled=stats.scheduled,
        failed_today=stats.failed_today,
        completed_today=stats.completed_today,
        avg_processing_seconds=_round(stats.avg_processing_seconds),
        p95_processing_seconds=_round(stats.p95_processing_seconds),
        oldest_pending_seconds=_round(stats.oldest_pending_seconds),
        max_in_flight=rt.settings.max_in_flight,
        paused=control.paused,
        circuit=CircuitState(
            state=control.circuit_state,
            consecutive_failures=control.consecutive_failures,
            next_probe_at=control.circuit_open_until
            if control.circuit_open and control.circuit_open_until else None),
        busy_until=control.busy_until,
        **flow_fields(rt, flow),
        kinds=kinds,
        pools=pools,
        alerts=[open_alert(a) for a in alerts],
        near_caps=[reads.NearCap(cap=cast(SpendCap, n.cap), pool=n.pool, group=n.group,
                                 spent_usd=n.spent_usd, limit_usd=n.limit_usd,
                                 window_ends_at=n.window_ends_at)
                   for n in near],
    ), control


async def breakdown(rt: Runtime) -> tuple[dict[str, KindStats], dict[str, PoolStats]]:
    """The stats by kind and by pool (docs/concepts.md).

    The top-level flow fields above are the default pool's (the only one
    without aiqueue.toml); `pools` has every pool's, `kinds` every kind's rows.
    """
    s = rt.settings
    pools, counts, falling_back = await asyncio.gather(
        rt.store.pool_states(s.queue.plan, s.breaker_threshold, s.budget_window_seconds),
        rt.store.kind_counts(), fallback.on_fallback(rt))
    kinds = kind_stats(rt, counts)
    for name, other in falling_back.items():
        kinds[name] = kinds[name].model_copy(update={"on_fallback": other})
    return kinds, {p.pool: pool_stats(rt, p) for p in pools}


def kind_stats(rt: Runtime, counts: list[KindCount]) -> dict[str, KindStats]:
    """Each declared kind (and any kind rows still carry): its pool, cap and rows by status."""
    q = rt.settings.queue
    pools = {k.name: (k.pool, k.max_in_flight or None) for k in q.kinds.values()}
    rows: dict[str, dict[str, int]] = {name: dict.fromkeys(_STATUSES, 0) for name in pools}
    for c in counts:
        pools.setdefault(c.kind, (c.pool, None))
        by_status = rows.setdefault(c.kind, dict.fromkeys(_STATUSES, 0))
        if c.status in _STATUSES:
            by_status[c.status] += c.n
    counted: dict[str, dict[str, Any]] = dict(rows)
    return {name: KindStats(pool=pool, max_in_flight=cap, **counted[name])
            for name, (pool, cap) in pools.items()}


def pool_stats(rt: Runtime, state: PoolState) -> PoolStats:
    """One pool's limits and flow control as they stand."""
    pool = rt.settings.queue.pools[state.pool]
    return PoolStats(
        kinds=[k.name for k in rt.settings.queue.kinds_of(pool.name)],
        max_in_flight=pool.max_in_flight,
        in_flight=state.in_flight,
        in_flight_limit=state.in_flight_limit,
        hold_until=state.hold_until,
        circuit=state.circuit_state,
        refusals=Refusals(rate_limited=state.refusals_rate_limited,
                          overloaded=state.refusals_overloaded),
        tokens_in_window=state.tokens_in_window if pool.budget_declared else None,
        requests_in_window=state.requests_in_window if pool.budget_declared else None,
        tokens_per_minute=pool.tokens_per_minute or None,
        requests_per_minute=pool.requests_per_minute or None,
    )


_STATUSES = ("pending", "processing", "completed", "failed", "cancelled", "expired")


def open_alert(a: OpenAlert) -> reads.OpenAlert:
    """An open alert as the stats list it (the fields of its marking.alert_opened)."""
    return reads.OpenAlert(alert=a.alert, pool=a.pool, kind=a.kind, value=round(a.value, 3),
                           threshold=a.threshold, opened_at=a.opened_at)


async def flow_state(rt: Runtime) -> FlowState:
    """The flow control's figures (docs/concepts.md), read once for stats, page and metrics."""
    s = rt.settings
    return await rt.store.flow_state(s.max_in_flight, s.budget_window_seconds)


def flow_fields(rt: Runtime, flow: FlowState) -> dict[str, Any]:
    """The stats' flow fields: L (0 = unlimited), the hold, the window's use, the budgets.

    The window's use is null while no budget is declared (nothing is counted then).
    """
    s = rt.settings
    declared = s.tokens_per_minute > 0 or s.requests_per_minute > 0
    return {
        "in_flight_limit": flow.in_flight_limit,
        "hold_until": flow.hold_until,
        "tokens_in_window": flow.tokens_in_window if declared else None,
        "requests_in_window": flow.requests_in_window if declared else None,
        "tokens_per_minute": s.tokens_per_minute or None,
        "requests_per_minute": s.requests_per_minute or None,
        "budget_window_seconds": s.budget_window_seconds,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
