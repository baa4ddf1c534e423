"""Each job's trace (docs/tracing.md): one method per named query of sql/traces.sql."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiqueue.db.gateway import Gateway
from aiqueue.models import QueueId
from aiqueue.tracing import JobTrace


class TraceQueries(Gateway):
    """A job's trace kept with its row, and read back by whoever continues it."""

    async def keep_traces(self, traces: Mapping[QueueId, JobTrace]) -> None:
        """Keep new jobs' traces (a repeat keeps the first)."""
        ids, parents = list(traces), [t.traceparent for t in traces.values()]
        kinds, pools = [t.kind for t in traces.values()], [t.pool for t in traces.values()]
        await self._write("keep_traces", ids, parents, kinds, pools, idempotent=True)

    async def job_traces(self, queue_ids: Sequence[QueueId]) -> dict[QueueId, JobTrace]:
        """The traces of these jobs that have one."""
        rows = await self._fetch("job_traces", list(queue_ids))
        return {QueueId(r["queue_id"]): JobTrace(r["traceparent"], r["kind"], r["pool"])
                for r in rows}
