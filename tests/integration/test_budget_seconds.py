"""A declared budget's window counted per second (db/sql/functions/21_budget.sql): the
claim's check answers as the walk over every entry did, whatever was written."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import datetime

import asyncpg

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.integration.plan_kit import generic_plan_in_function, seq_scans
from tests.plans import Budget, plan_of

# The check before the seconds (aiqueue 0030's aiqueue_budget_opens_at): every entry of the
# window walked newest first.  $1 tpm, $2 rpm, $3 window, $4 estimate, $5 pool.
WALK = """
WITH w AS (
    SELECT b.at, sum(b.tokens) OVER newest AS tokens, count(*) OVER newest AS requests
    FROM ai_marking_budget b
    WHERE b.pool = $5 AND b.at > now() - make_interval(secs => $3::float8)
    WINDOW newest AS (ORDER BY b.at DESC, b.queue_id, b.dispatch_seq))
SELECT coalesce(max(w.at), '-infinity') + make_interval(secs => $3::float8)
FROM w
WHERE ($1::integer > 0 AND w.tokens + least($4::bigint, floor($1 * $3::float8 / 60))
                           > floor($1 * $3::float8 / 60))
   OR ($2::integer > 0 AND w.requests + 1 > greatest(floor($2 * $3::float8 / 60), 1))
"""
CHECK = "SELECT aiqueue_budget_opens_at($1, $2, $3, $4, $5)"
# What the seconds hold against what the entries hold, second by second.
SHORT = """
SELECT count(*) FROM (
    SELECT b.pool, date_trunc('second', b.at) AS starts_at,
           sum(greatest(b.tokens, 0)) AS tokens, count(*) AS requests
    FROM ai_marking_budget b GROUP BY 1, 2) e
LEFT JOIN ai_marking_budget_seconds s USING (pool, starts_at)
WHERE coalesce(s.tokens, 0) < e.tokens OR coalesce(s.requests, 0) < e.requests
"""


async def add_entries(conn: asyncpg.Connection, rng: random.Random, n: int) -> None:
    await conn.executemany(
        "INSERT INTO ai_marking_budget (queue_id, dispatch_seq, assignment_id, tokens, pool, at)"
        " VALUES ($1, 1, 'hw', $2, $3, now() - make_interval(secs => $4))",
        [(uuid.uuid4(), rng.choice([0, 250, 1000, rng.randrange(1, 4000)]),
          rng.choice(["default", "default", "other"]), rng.uniform(0, 40)) for _ in range(n)])


async def change_some(conn: asyncpg.Connection, rng: random.Random, delete: bool = True) -> None:
    """What the queue does to entries: usage replaces an estimate, a refusal zeroes one, an
    erasure deletes some; and what tests do: age them."""
    ids = [r["queue_id"] for r in await conn.fetch("SELECT queue_id FROM ai_marking_budget")]
    for qid in rng.sample(ids, len(ids) // 3):
        await conn.execute("UPDATE ai_marking_budget SET tokens = $2, actual = true"
                           " WHERE queue_id = $1", qid, rng.randrange(0, 3000))
    for qid in rng.sample(ids, len(ids) // 10):
        await conn.execute("UPDATE ai_marking_budget SET tokens = 0 WHERE queue_id = $1", qid)
    for qid in rng.sample(ids, len(ids) // 10):
        await conn.execute("UPDATE ai_marking_budget SET at = at - make_interval(secs => $2)"
                           " WHERE queue_id = $1", qid, rng.uniform(0, 20))
    if delete:
        await conn.execute("DELETE FROM ai_marking_budget WHERE queue_id = ANY ($1::uuid[])",
                           rng.sample(ids, len(ids) // 10))


async def same_answers(conn: asyncpg.Connection, rng: random.Random) -> int:
    """The check and the walk agree on many budgets; how many of them found the window full."""
    full = 0
    async with conn.transaction():  # one now() for both
        for _ in range(150):
            args = (rng.choice([0, 0, 6000, 60000, 600000, rng.randrange(1, 100000)]),
                    rng.choice([0, 0, 30, 120, 600, rng.randrange(1, 300)]),
                    rng.choice([10.0, 30.0, 60.0, 0.5, rng.uniform(1, 45)]),
                    rng.choice([0, 400, 1000, 10**9, rng.randrange(1, 5000)]),
                    rng.choice(["default", "other", "none"]))
            walked = await conn.fetchval(WALK, *args)
            assert await conn.fetchval(CHECK, *args) == walked, args
            full += walked != datetime.min  # '-infinity': room now
    return full


async def test_the_check_answers_as_the_walk_over_every_entry(conn: asyncpg.Connection) -> None:
    rng = random.Random(31)
    full = 0
    for _ in range(3):
        await add_entries(conn, rng, 120)
        full += await same_answers(conn, rng)
        await change_some(conn, rng)
        full += await same_answers(conn, rng)
    assert 100 < full < 800, full  # both ways of answering were asked
    assert await conn.fetchval(SHORT) == 0


async def test_the_seconds_hold_exactly_the_entries_but_the_deleted(
    conn: asyncpg.Connection
) -> None:
    rng = random.Random(7)
    await add_entries(conn, rng, 200)
    await change_some(conn, rng, delete=False)
    differ = (
        "SELECT count(*) FROM ai_marking_budget_seconds s FULL JOIN ("
        "  SELECT b.pool, date_trunc('second', b.at) AS starts_at,"
        "         sum(greatest(b.tokens, 0)) AS tokens, count(*) AS requests"
        "  FROM ai_marking_budget b GROUP BY 1, 2) e USING (pool, starts_at)"
        " WHERE (coalesce(s.tokens, 0), coalesce(s.requests, 0))"
        "       <> (coalesce(e.tokens, 0), coalesce(e.requests, 0))")
    assert await conn.fetchval(differ) == 0
    # A deleted entry stays counted: the seconds hold more, never less.
    await change_some(conn, rng)
    assert await conn.fetchval(differ) > 0
    assert await conn.fetchval(SHORT) == 0


async def test_refusals_and_settles_at_once_keep_the_seconds(
    db_url: str, conn: asyncpg.Connection
) -> None:
    """Refusals race webhooks of two results while the learned limit is cut: every write of
    an entry holds the claim's lock, so none waits for another's second (no deadlock)."""
    ids = await add_submissions(conn, 120)
    stores = [Store(await connect_pool(db_url, max_size=4)) for _ in range(2)]
    plan = plan_of(8, 5, budget=Budget(tokens_per_minute=10**8, window_seconds=60))
    usage = {"prompt_tokens": 700, "completion_tokens": 80}
    try:
        await stores[0].enqueue(ids, "hw-1", 0, {})
        for _ in range(6):
            await conn.execute("UPDATE ai_queue_control SET in_flight_limit = 6")
            jobs = [j for j in await asyncio.gather(*[s.claim(plan) for s in stores * 4]) if j]
            refused, done = jobs[::2], jobs[1::2]
            await asyncio.gather(
                *[stores[k % 2].refused(j.queue_id, j.dispatch_seq, kind="rate_limited",
                                        delay=0, give_up=86400, cap=8, plan=plan.json)
                  for k, j in enumerate(refused)],
                *[stores[k % 2].settle(
                    [Completed(j.queue_id, j.dispatch_seq, {"score": 1}, usage)
                     for j in done[k:k + 2]], plan, uuid.uuid4())
                  for k in range(0, len(done), 2)])
            await conn.execute("UPDATE ai_marking_queue SET status = 'completed'"
                               " WHERE status = 'processing'")
    finally:
        for s in stores:
            await s.close()
    assert await conn.fetchval(SHORT) == 0


async def test_the_first_due_row_is_a_walk_of_the_claim_index(conn: asyncpg.Connection) -> None:
    # A backlog on a table the planner has no statistics of (as a new queue's): the
    # budget's first due row (aiqueue_budget_room, its generic plan with sorts off)
    # stops at the first due row of the claim index, never reads and sorts the backlog.
    await conn.execute(
        "INSERT INTO submissions (id, assignment_id, content) "
        "SELECT gen_random_uuid(), 'g' || (g % 20), 'x' FROM generate_series(1, 5000) g")
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, turn) "
        "SELECT id, assignment_id, gen_random_uuid(), "
        "       row_number() OVER (PARTITION BY assignment_id) FROM submissions")
    await conn.execute("SET enable_sort = off")  # as the function's SET clause has it
    text = await generic_plan_in_function(
        conn, "aiqueue_budget_room", r"SELECT o\.queue_id.*?LIMIT 1", kinds="text[]")
    assert "ai_marking_ready_claim_idx" in text, text
    assert "Sort" not in text and not seq_scans(text), text
