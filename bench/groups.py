"""The same answer, marked once (docs/same-answer.md): what groups save, and what keying costs.

- `enqueue_ms`: the enqueue statement of 10,000 ids, with the answers keyed (mark_once)
  or not (mark_each, the statement as it was before keying), on a fresh database each
  time: its wall time and the server's CPU time.
- `short_answer_class`: a class's short answers (30 students x 20 questions, answers
  drawn as short-answer classes repeat them) marked by a model stub at a fixed price,
  with and without groups: the model's calls and what they cost.
- `enqueue_beside`: an enqueue of 1,000 answers, keyed, beside `waiting` rows of the
  same payload (1,000 classes of one shared question bank), against a bare insert of the
  same rows at the same size; and whether a result for a waiting row had to wait for it.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from aiqueue.answers import AnswerKey
from aiqueue.db.gateway import queries
from aiqueue.db.pool import Limits
from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from aiqueue.settings.kinds import DEFAULT_KIND, DEFAULT_POOL, Kind, Pool, QueueConfig
from aiqueue.settings.money import NO_MONEY
from aiqueue.settings.plan import ClaimPlan
from bench.common import READY_ROWS, fresh_database

KEY = AnswerKey.derive("bench-secret-0123456789-abcdefgh")
# A model call's usage and price (a short answer: the rubric, the answer, a verdict).
USAGE = {"prompt_tokens": 900, "completion_tokens": 120, "model": "m"}
PRICE_USD = (900 * 0.15 + 120 * 0.60) / 1e6


async def _seed(dsn: str, answers: list[str], assignment: str) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in answers]
    conn = await asyncpg.connect(dsn)
    try:
        await conn.executemany(
            "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, $2, $3)",
            [(i, assignment, a) for i, a in zip(ids, answers, strict=True)])
    finally:
        await conn.close()
    return ids


def _backend_cpu_ms(pid: int) -> float:
    """CPU time (user + system) of the server process `pid` so far: a load-proof measure
    where the bench shares its machine (the embedded server runs here)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def enqueue_ms(name: str, keyed: bool, repeating: bool) -> tuple[float, float]:
    """One enqueue statement of 10,000 ids (distinct answers, or a class's repeating ones):
    (wall ms, the server's CPU ms)."""
    dsn = await fresh_database(name)
    rng = random.Random(7)
    answers = [_short_answer(rng, k % 20) if repeating else f"answer number {k}"
               for k in range(10_001)]
    ids = await _seed(dsn, answers, "bulk")
    sql = queries()["enqueue"]
    pads = (KEY.inner_pad, KEY.outer_pad, False, "live") if keyed else (None, None, False, "live")
    conn = await asyncpg.connect(dsn)
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        # Warm the connection and the server's plan caches with one row first.
        await conn.fetch(sql, ids[:1], "warm", 0, "{}", "warm", False, "mark", "default",
                         None, None, *pads)
        cpu, started = _backend_cpu_ms(pid), time.perf_counter()
        async with conn.transaction():
            rows = await conn.fetch(sql, ids[1:], "bulk", 0, '{"q": 1}', "bulk", False, "mark",
                                    "default", None, None, *pads)
        wall = (time.perf_counter() - started) * 1000
        assert len(rows) == 10_000
        return wall, _backend_cpu_ms(pid) - cpu
    finally:
        await conn.close()


# Short answers as a class writes them: a few right answers in several spellings,
# common wrong ones, "I don't know", and a tail of answers of their own.
_COMMON = ["Oxygen", "oxygen.", "OXYGEN", "chloroplasts", "Chloroplast", "carbon dioxide",
           "CO2", "I don't know", "i dont know", "glucose", "Glucose!", "sunlight", "water"]


def _short_answer(rng: random.Random, question: int) -> str:
    if rng.random() < 0.6:
        return f"{rng.choice(_COMMON)} {question}" if question else rng.choice(_COMMON)
    return f"answer {question} of my own {rng.randrange(1000)}"


@dataclass(frozen=True)
class ClassRun:
    calls: int
    cost_usd: float
    marked: int


async def short_answer_class(name: str, keyed: bool, students: int = 30,
                             questions: int = 20) -> ClassRun:
    """Mark a class's short answers, one enqueue per question; the model's calls and cost."""
    dsn = await fresh_database(name)
    rng = random.Random(11)
    # Generous limits: the bench may share a busy machine.
    store = Store(await connect_pool(dsn, max_size=2, limits=Limits(hot=60, page=60)))
    calls, cost = 0, 0.0
    try:
        for q in range(questions):
            answers = [_short_answer(rng, q) for _ in range(students)]
            ids = await _seed(dsn, answers, f"quiz-{q}")
            await store.enqueue(ids, f"quiz-{q}", 0, {"question": q},
                                answer_key=KEY if keyed else None)
        plan = ClaimPlan.build(QueueConfig({DEFAULT_POOL: Pool(DEFAULT_POOL, 0)},
                                           {DEFAULT_KIND: Kind(DEFAULT_KIND, DEFAULT_POOL)}),
                               5, 60.0, NO_MONEY)
        while (job := await store.claim(plan)) is not None:
            calls += 1
            cost += PRICE_USD
            await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1},
                                           {**USAGE, "cost_usd": PRICE_USD}), plan)
        conn = await asyncpg.connect(dsn)
        try:
            marked = await conn.fetchval(
                "SELECT count(*) FROM submissions WHERE ai_marked_at IS NOT NULL")
        finally:
            await conn.close()
    finally:
        await store.close()
    return ClassRun(calls, round(cost, 6), marked)


async def _seed_waiting(dsn: str, waiting: int) -> int:
    """`waiting` pending leaders of one payload over 1,000 classes, their answers keyed as
    the enqueue keys them (each class answers "answer 0" .. "answer 999"); the payload's id."""
    conn = await asyncpg.connect(dsn)
    try:
        payload = await conn.fetchval(
            "INSERT INTO ai_marking_payloads (sha256, payload) "
            "VALUES (sha256(convert_to('{\"q\": 1}', 'UTF8')), '{\"q\": 1}') RETURNING id")
        await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
        await conn.execute(
            "INSERT INTO submissions (id, assignment_id, content) "
            "SELECT gen_random_uuid(), 'class-' || (g / 1000), 'answer ' || (g % 1000) "
            "FROM generate_series(0, $1 - 1) g", waiting)
        await conn.execute(
            "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, "
            "                              run_after, turn, payload_id, answer_key) "
            "SELECT s.id, s.assignment_id, gen_random_uuid(), 'pending', now(), 1, $1, "
            "       aiqueue_answer_key(s.content, $2, $3, false) "
            "FROM submissions s", payload, KEY.inner_pad, KEY.outer_pad)
        await conn.execute(READY_ROWS)
        await conn.execute("ALTER TABLE ai_marking_queue ENABLE TRIGGER USER")
        await conn.execute("VACUUM ANALYZE ai_marking_queue")
        await conn.execute("VACUUM ANALYZE submissions")
        return int(payload)
    finally:
        await conn.close()


@dataclass(frozen=True)
class Beside:
    enqueue_ms: float
    bare_ms: float
    result_waited: bool


async def enqueue_beside(name: str, waiting: int = 1_000_000, answers: int = 1_000) -> Beside:
    """An enqueue of a new class's `answers` answers beside `waiting` rows of the same
    payload: its statement's time, a bare insert's of the same rows (triggers off, then
    removed), and whether a result for a waiting row waited on the open enqueue."""
    dsn = await fresh_database(name)
    await _seed_waiting(dsn, waiting)
    ids = await _seed(dsn, [f"answer {k}" for k in range(answers + 1)], "class-new")
    sql = queries()["enqueue"]
    args = (KEY.inner_pad, KEY.outer_pad, False, "live")
    conn, other = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        await conn.fetch(sql, ids[:1], "warm", 0, '{"q": 1}', "warm", False, "mark",
                         "default", None, None, *args)
        tx = conn.transaction()
        await tx.start()
        started = time.perf_counter()
        await conn.fetch(sql, ids[1:], "class-new", 0, '{"q": 1}', "class-new", False,
                         "mark", "default", None, None, *args)
        statement = (time.perf_counter() - started) * 1000
        # A result for another class's waiting row, while the enqueue is still open.
        await other.execute("SET lock_timeout = '2s'")
        try:
            await other.execute("UPDATE ai_marking_queue SET updated_at = now() WHERE "
                                "queue_id = (SELECT queue_id FROM ai_marking_queue "
                                "WHERE assignment_id = 'class-0' LIMIT 1)")
            waited = False
        except asyncpg.LockNotAvailableError:
            waited = True
        await tx.rollback()
        await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
        async with conn.transaction():
            started = time.perf_counter()
            await conn.execute(
                "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, turn) "
                "SELECT id, 'class-new', gen_random_uuid(), 1 FROM unnest($1::uuid[]) id",
                ids[1:])
            bare = (time.perf_counter() - started) * 1000
        return Beside(statement, bare, waited)
    finally:
        await conn.close()
        await other.close()
