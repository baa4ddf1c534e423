"""The same answer, marked once (CONTRACT §10c): what groups save, and what keying costs.

- `enqueue_ms`: the enqueue of 10,000 ids through the Store (one statement), with the
  answers keyed (mark_once) or not (mark_each), on a fresh database each time.
- `short_answer_class`: a class's short answers (30 students x 20 questions, answers
  drawn as short-answer classes repeat them) marked by a model stub at a fixed price,
  with and without groups: the model's calls and what they cost.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass

import asyncpg

from aiqueue.answers import AnswerKey
from aiqueue.db.store import Store, connect_pool
from bench.common import fresh_database

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


async def enqueue_ms(name: str, keyed: bool, repeating: bool) -> float:
    """One enqueue of 10,000 ids (distinct answers, or a class's repeating ones), in ms."""
    dsn = await fresh_database(name)
    rng = random.Random(7)
    answers = [_short_answer(rng, k % 20) if repeating else f"answer number {k}"
               for k in range(10_000)]
    ids = await _seed(dsn, answers, "bulk")
    store = Store(await connect_pool(dsn, max_size=2))
    try:
        # Warm the connection and the server's plan caches with one row first.
        await store.enqueue(ids[:1], "warm", 0, {}, answer_key=KEY if keyed else None)
        started = time.perf_counter()
        await store.enqueue(ids[1:], "bulk", 0, {"q": 1}, answer_key=KEY if keyed else None)
        return (time.perf_counter() - started) * 1000
    finally:
        await store.close()


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
    store = Store(await connect_pool(dsn, max_size=2))
    calls, cost = 0, 0.0
    try:
        for q in range(questions):
            answers = [_short_answer(rng, q) for _ in range(students)]
            ids = await _seed(dsn, answers, f"quiz-{q}")
            await store.enqueue(ids, f"quiz-{q}", 0, {"question": q},
                                answer_key=KEY if keyed else None)
        while (job := await store.claim(0, 5)) is not None:
            calls += 1
            cost += PRICE_USD
            await store.complete(job.queue_id, job.dispatch_seq, {"score": 1},
                                 {**USAGE, "cost_usd": PRICE_USD})
        conn = await asyncpg.connect(dsn)
        try:
            marked = await conn.fetchval(
                "SELECT count(*) FROM submissions WHERE ai_marked_at IS NOT NULL")
        finally:
            await conn.close()
    finally:
        await store.close()
    return ClassRun(calls, round(cost, 6), marked)
