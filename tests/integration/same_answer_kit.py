"""What the same-answer tests share (docs/same-answer.md): answers as submissions, a
drain that counts the model's calls, the marks, and the app with a kind's setting."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections import Counter
from typing import Any

import asyncpg
import httpx

from aiqueue.answers import KindSameAnswers
from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from aiqueue.settings import Settings
from aiqueue.settings.kinds import DEFAULT_POOL, Kind, QueueConfig
from tests.conftest import AUTH, make_settings
from tests.plans import plan_of

THRESHOLD = 5
PLAN = plan_of(0, THRESHOLD)


async def add_answers(conn: asyncpg.Connection, answers: list[str],
                      assignment: str = "hw-1") -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in answers]
    await conn.executemany(
        "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, $2, $3)",
        [(i, assignment, a) for i, a in zip(ids, answers, strict=True)])
    return ids


def mark_of(content: str) -> dict[str, Any]:
    """A model that may mark the same words differently: a result unique to the call."""
    return {"score": int(hashlib.sha256(content.encode()).hexdigest(), 16) % 10,
            "call": uuid.uuid4().hex}


async def drain(store: Store, calls: Counter[str]) -> None:
    """Claim and complete until nothing is due (no cap); count the model's calls."""
    while (job := await store.claim(PLAN)) is not None:
        await complete(store, job, calls)


async def complete(store: Store, job: Job, calls: Counter[str]) -> None:
    calls[job.content] += 1
    assert await store.complete(Completed(job.queue_id, job.dispatch_seq, mark_of(job.content),
                                          {"prompt_tokens": 100, "completion_tokens": 10,
                                           "cost_usd": 0.01, "model": "m"}), PLAN)


async def marks(conn: asyncpg.Connection, ids: list[uuid.UUID]) -> dict[uuid.UUID, Any]:
    rows = await conn.fetch("SELECT id, ai_result::text AS r FROM submissions "
                            "WHERE id = ANY($1::uuid[])", ids)
    return {r["id"]: r["r"] for r in rows}


def settings_with(db_url: str, same_answers: KindSameAnswers) -> Settings:
    """The app's settings with the kind `mark` comparing answers as `same_answers` says."""
    kind = Kind("mark", DEFAULT_POOL, function_url="http://function.test/mark",
                same_answers=same_answers)
    return dataclasses.replace(make_settings(db_url), queue_file=QueueConfig({}, {"mark": kind}))


async def add(conn: asyncpg.Connection, answers: list[str]) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in answers]
    await conn.executemany("INSERT INTO submissions (id, assignment_id, content) "
                           "VALUES ($1, 'hw-s', $2)", list(zip(ids, answers, strict=True)))
    return ids


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], **extra: Any
                  ) -> dict[str, Any]:
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-s", "submission_ids": [str(i) for i in ids],
        "payload": {"question": "q1"}, **extra})
    assert r.status_code in (200, 202), r.text
    body: dict[str, Any] = r.json()
    return body
