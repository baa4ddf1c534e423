"""Read-only views of the queue: the stats JSON (the Prometheus metrics: metrics.py)."""

from __future__ import annotations

from typing import Any

from aiqueue.flow import FlowState, KindCount, PoolState
from aiqueue.models import OpenAlert
from aiqueue.runtime import Runtime


async def stats_json(rt: Runtime) -> dict[str, Any]:
    """The contract's /api/marking/stats body, plus the dispatch state."""
    stats = await rt.store.stats(rt.clock())
    control = await rt.store.control(rt.settings.breaker_threshold)
    return {
        "pending": stats.pending,
        "processing": stats.processing,
        "completed": stats.completed,
        "failed": stats.failed,
        "cancelled": stats.cancelled,
        "expired": stats.expired,
        "scheduled": stats.scheduled,
        "failed_today": stats.failed_today,
        "completed_today": stats.completed_today,
        "avg_processing_seconds": _round(stats.avg_processing_seconds),
        "p95_processing_seconds": _round(stats.p95_processing_seconds),
        "oldest_pending_seconds": _round(stats.oldest_pending_seconds),
        "max_in_flight": rt.settings.max_in_flight,
        "paused": control.paused,
        "circuit": {
            "state": control.circuit_state,
            "consecutive_failures": control.consecutive_failures,
            "next_probe_at": control.circuit_open_until.isoformat()
            if control.circuit_open and control.circuit_open_until else None,
        },
        "busy_until": control.busy_until.isoformat() if control.busy_until else None,
        **flow_json(rt, await flow_state(rt)),
        **await breakdown(rt),
        "alerts": [alert_json(a) for a in await rt.store.open_alerts()],
    }


async def breakdown(rt: Runtime) -> dict[str, Any]:
    """The stats by kind and by pool (CONTRACT §9b).

    The top-level flow fields above are the default pool's (the only one
    without aiqueue.toml); `pools` has every pool's, `kinds` every kind's rows.
    """
    s = rt.settings
    pools = await rt.store.pool_states(s.queue.plan, s.breaker_threshold,
                                       s.budget_window_seconds)
    return {"kinds": kinds_json(rt, await rt.store.kind_counts()),
            "pools": {p.pool: pool_json(rt, p) for p in pools}}


def kinds_json(rt: Runtime, counts: list[KindCount]) -> dict[str, Any]:
    """Each declared kind (and any kind rows still carry): its pool, cap and rows by status."""
    q = rt.settings.queue
    out: dict[str, Any] = {}
    for kind in q.kinds.values():
        out[kind.name] = {"pool": kind.pool, "max_in_flight": kind.max_in_flight or None,
                          **dict.fromkeys(_STATUSES, 0)}
    for c in counts:
        entry = out.setdefault(c.kind, {"pool": c.pool, "max_in_flight": None,
                                        **dict.fromkeys(_STATUSES, 0)})
        if c.status in _STATUSES:
            entry[c.status] += c.n
    return out


def pool_json(rt: Runtime, state: PoolState) -> dict[str, Any]:
    """One pool's limits and flow control as they stand."""
    pool = rt.settings.queue.pools[state.pool]
    return {
        "kinds": [k.name for k in rt.settings.queue.kinds_of(pool.name)],
        "max_in_flight": pool.max_in_flight,
        "in_flight": state.in_flight,
        "in_flight_limit": state.in_flight_limit,
        "hold_until": state.hold_until.isoformat() if state.hold_until else None,
        "circuit": state.circuit_state,
        "refusals": {"rate_limited": state.refusals_rate_limited,
                     "overloaded": state.refusals_overloaded},
        "tokens_in_window": state.tokens_in_window if pool.budget_declared else None,
        "requests_in_window": state.requests_in_window if pool.budget_declared else None,
        "tokens_per_minute": pool.tokens_per_minute or None,
        "requests_per_minute": pool.requests_per_minute or None,
    }


_STATUSES = ("pending", "processing", "completed", "failed", "cancelled", "expired")


def alert_json(a: OpenAlert) -> dict[str, Any]:
    """An open alert as the stats list it (the fields of its marking.alert_opened)."""
    return {"alert": a.alert, "pool": a.pool, "kind": a.kind, "value": round(a.value, 3),
            "threshold": a.threshold, "opened_at": a.opened_at.isoformat()}


async def flow_state(rt: Runtime) -> FlowState:
    """The flow control's figures (CONTRACT §8a), read once for stats, page and metrics."""
    s = rt.settings
    return await rt.store.flow_state(s.max_in_flight, s.budget_window_seconds)


def flow_json(rt: Runtime, flow: FlowState) -> dict[str, Any]:
    """The stats' flow fields: L (0 = unlimited), the hold, the window's use, the budgets.

    The window's use is null while no budget is declared (nothing is counted then).
    """
    s = rt.settings
    declared = s.tokens_per_minute > 0 or s.requests_per_minute > 0
    return {
        "in_flight_limit": flow.in_flight_limit,
        "hold_until": flow.hold_until.isoformat() if flow.hold_until else None,
        "tokens_in_window": flow.tokens_in_window if declared else None,
        "requests_in_window": flow.requests_in_window if declared else None,
        "tokens_per_minute": s.tokens_per_minute or None,
        "requests_per_minute": s.requests_per_minute or None,
        "budget_window_seconds": s.budget_window_seconds,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
