"""Live events and queue position: one method per named query of sql/live.sql."""

from __future__ import annotations

from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import EventBatch, EventCursor, MarkingEvent, RunProgress, SubmissionStatus


class LiveQueries(Gateway):
    """The live-events cursor, a submission's place in the queue, a run's progress."""

    async def live_events_head(self) -> EventCursor:
        """Where a new live-events subscriber starts reading."""
        return EventCursor(int(await self._fetchval("live_events_head")), 0)

    async def live_events_after(
        self, assignment_id: str, cursor: EventCursor, limit: int
    ) -> EventBatch:
        """The assignment's events past `cursor` whose transactions have all ended."""
        rows = await self._fetch(
            "live_events_after", assignment_id, str(cursor.tx), cursor.id, cursor.k, limit
        )
        # Rows come in (tx, id) order, so the final ones are a prefix.
        ready = [MarkingEvent.from_row(r) for r in rows if r["final"]]
        return EventBatch(ready, held_back=len(ready) < len(rows), full=len(rows) == limit)

    async def submission_status(self, submission_id: UUID) -> SubmissionStatus | None:
        row = await self._fetchrow("submission_status", submission_id)
        return SubmissionStatus.from_row(row) if row else None

    async def recent_processing_seconds(self, kind: str | None = None) -> float | None:
        """Seconds a recent live row (of `kind`; None: any) took; None without one."""
        value = await self._fetchval("recent_processing_seconds", kind)
        return None if value is None else float(value)

    async def run_progress(self, assignment_id: str) -> RunProgress:
        row = await self._fetchrow("run_progress", assignment_id)
        assert row is not None, "an aggregate always answers one row"
        return RunProgress.from_row(row)
