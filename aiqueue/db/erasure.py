"""Erasure of one student's data: one method per named query of sql/erasure.sql."""

from __future__ import annotations

import json
from collections.abc import Sequence
from uuid import UUID

import asyncpg

from aiqueue.db.gateway import Gateway


class ErasureQueries(Gateway):
    """What the queue holds of some submissions, erased in one transaction."""

    async def erase(self, submission_ids: Sequence[UUID], via: str) -> dict[str, int]:
        """Erase what the queue holds of these submissions; rows per table."""
        ids = list(submission_ids)

        async def work(conn: asyncpg.Connection) -> dict[str, int]:
            await conn.execute(self.sql["erase_generic_plan"])
            await conn.execute(self.sql["erase_lock_rows"], ids)
            await conn.execute(self.sql["erase_lock_submissions"], ids)
            row = await conn.fetchrow(self.sql["erase"], ids, via)
            assert row is not None  # an aggregate answers one row
            counts: dict[str, int] = json.loads(row["erased"])
            return counts
        # Idempotent: a repeat finds nothing left and records zero counts.
        return await self.db.write(work, page=True, idempotent=True)

    async def assignment_subjects(self, assignment_id: str) -> list[UUID]:
        rows = await self._fetch("assignment_subjects", assignment_id, page=True)
        return [r["id"] for r in rows]
