"""Read-only views of the queue: the stats JSON (the Prometheus metrics: metrics.py)."""

from __future__ import annotations

from typing import Any

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
