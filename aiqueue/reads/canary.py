"""Drift canaries as an operator sees them (docs/canaries.md): each kind's last canary."""

from __future__ import annotations

from aiqueue.models.canary import CanaryRun
from aiqueue.runtime import Runtime


async def latest(rt: Runtime) -> tuple[list[str], list[CanaryRun]]:
    """The kinds that declare a canary, and each kind's newest canary run (with its open
    drift); nothing is read when no kind declares one and none ever ran."""
    declared = sorted(k.name for k in rt.settings.queue.kinds.values() if k.canary is not None)
    if not declared:
        return [], []
    runs: list[CanaryRun] = await rt.store.canary_latest()
    return declared, runs
