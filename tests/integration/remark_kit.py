"""The marking function as the re-mark tests play it (docs/remark.md): claims as the queue
would, answers through the webhook's settle, counts the model's calls per payload."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from tests.plans import plan_of, settle_one

IN_FLIGHT = 2
PLAN = plan_of(IN_FLIGHT)


def mark(job: Job) -> dict[str, Any]:
    """A model whose score depends on the rubric and the answer."""
    digest = hashlib.sha256((job.payload_json + job.content).encode()).hexdigest()
    return {"score": int(digest, 16) % 11, "max_score": 10, "rubric": job.payload_json}


class Model:
    """The marking function: claims as the queue would, counts calls per payload."""

    def __init__(self, store: Store, conn: asyncpg.Connection, watch: bool = True) -> None:
        # watch: after each result, no submission of the class is without a mark.
        self.store, self.conn, self.watch = store, conn, watch
        self.calls: Counter[str] = Counter()
        # Rows a settle claimed for its caller (the webhook's next dispatch).
        self.pending: list[Job] = []

    async def claim(self) -> Job | None:
        await self.conn.execute("UPDATE ai_queue_control SET paused = false")
        try:
            job = await self.store.claim(PLAN)
        finally:
            await self.conn.execute("UPDATE ai_queue_control SET paused = true")
        if job is not None:
            self.calls[job.payload_json] += 1
        return job

    async def answer(self, job: Job) -> bool:
        await self.conn.execute("UPDATE ai_queue_control SET paused = false")
        try:
            applied, nxt = await settle_one(self.store, Completed(
                job.queue_id, job.dispatch_seq, mark(job),
                {"model": "m-1", "provider": "sim", "function_version": "fn-7",
                 "prompt_tokens": 100, "completion_tokens": 10}), PLAN)
        finally:
            await self.conn.execute("UPDATE ai_queue_control SET paused = true")
        if nxt is not None:
            self.calls[nxt.payload_json] += 1
            self.pending.append(nxt)
        if self.watch:
            await no_mark_is_empty(self.conn)
        return applied


async def no_mark_is_empty(conn: asyncpg.Connection, assignment: str = "hw-1") -> None:
    empty = await conn.fetchval("SELECT count(*) FROM submissions WHERE assignment_id = $1 "
                                "AND ai_result IS NULL", assignment)
    assert empty == 0
