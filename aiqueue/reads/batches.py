"""The overnight lane as an operator sees it: open batches and their rows (docs/overnight.md).

Ids, counts, states and times only: never a line's content or a provider's message.
"""

from __future__ import annotations

from aiqueue.models.batch import BatchGauges, OpenBatch
from aiqueue.runtime import Runtime

# The card lists at most this many batches (the oldest first).
CARD_BATCHES = 50


async def open_batches(rt: Runtime) -> list[OpenBatch]:
    """The batches the provider may still keep something of, oldest first."""
    if not rt.settings.queue.batch_pools and not await rt.store.batch_open_count():
        return []
    batches: list[OpenBatch] = await rt.store.batches_open(CARD_BATCHES)
    return batches


async def gauges(rt: Runtime) -> BatchGauges:
    """The lane's rows by pool and state, and its open batches by pool (every pool with a
    batch API listed, at 0 when it has none)."""
    found: BatchGauges = await rt.store.batch_gauges()
    pools = {p.name: 0 for p in rt.settings.queue.batch_pools}
    return BatchGauges(found.rows, {**pools, **found.open})
