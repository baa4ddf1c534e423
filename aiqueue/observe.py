"""Read-only views of the queue: stats JSON and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from aiqueue import usage
from aiqueue.flow import FlowState
from aiqueue.runtime import Runtime


async def stats_json(rt: Runtime) -> dict[str, Any]:
    """The contract's /api/marking/stats body, plus the dispatch state."""
    stats = await rt.store.stats()
    control = await rt.store.control(rt.settings.breaker_threshold)
    return {
        "pending": stats.pending,
        "processing": stats.processing,
        "completed": stats.completed,
        "failed": stats.failed,
        "cancelled": stats.cancelled,
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
    }


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


def flow_metric_lines(flow: FlowState) -> list[str]:
    """aiqueue_in_flight_limit and aiqueue_refusals_total{kind} (counters never go down)."""
    return [
        "# HELP aiqueue_in_flight_limit The learned in-flight limit L (0 = unlimited).",
        "# TYPE aiqueue_in_flight_limit gauge",
        f"aiqueue_in_flight_limit {flow.in_flight_limit}",
        "# HELP aiqueue_refusals_total Calls the model refused (rate_limited, overloaded).",
        "# TYPE aiqueue_refusals_total counter",
        f'aiqueue_refusals_total{{kind="rate_limited"}} {flow.refusals_rate_limited}',
        f'aiqueue_refusals_total{{kind="overloaded"}} {flow.refusals_overloaded}',
    ]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def metrics_text(rt: Runtime) -> str:
    """Prometheus text exposition computed from the database at scrape time."""
    stats = await rt.store.stats()
    control = await rt.store.control(rt.settings.breaker_threshold)
    lines = [
        "# HELP aiqueue_queue_rows Rows in ai_marking_queue by status.",
        "# TYPE aiqueue_queue_rows gauge",
    ]
    for status in ("pending", "processing", "completed", "failed", "cancelled"):
        lines.append(f'aiqueue_queue_rows{{status="{status}"}} {getattr(stats, status)}')
    lines += [
        "# HELP aiqueue_oldest_pending_seconds Age of the oldest pending row.",
        "# TYPE aiqueue_oldest_pending_seconds gauge",
        f"aiqueue_oldest_pending_seconds {stats.oldest_pending_seconds or 0}",
        "# HELP aiqueue_max_in_flight The configured in-flight cap (0 = unlimited).",
        "# TYPE aiqueue_max_in_flight gauge",
        f"aiqueue_max_in_flight {rt.settings.max_in_flight}",
        "# HELP aiqueue_circuit_open 1 while dispatching is paused by the circuit breaker.",
        "# TYPE aiqueue_circuit_open gauge",
        f"aiqueue_circuit_open {int(control.circuit_open)}",
        "# HELP aiqueue_paused 1 while an operator paused dispatching.",
        "# TYPE aiqueue_paused gauge",
        f"aiqueue_paused {int(control.paused)}",
    ]
    # Counters from the deltas of ai_marking_tally: pruning rows never lowers them
    # (the old 24 h histogram did, which Prometheus reads as a counter reset).
    counters, buckets = await rt.store.counters(), await rt.store.buckets()
    lines += usage.counter_lines(counters, buckets)
    lines += flow_metric_lines(await flow_state(rt))
    return "\n".join(lines) + "\n"
