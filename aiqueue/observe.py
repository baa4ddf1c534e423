"""Read-only views of the queue: stats JSON and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from aiqueue import usage
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
    }


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
    return "\n".join(lines) + "\n"
