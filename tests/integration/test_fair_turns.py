"""Fair turns between groups (docs/integrating.md) against a real PostgreSQL, through the Store."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from tests.conftest import add_submissions, enqueued
from tests.integration.plan_kit import (
    GROUP_VALUES,
    generic_plan_in_function,
    plan_in_function,
    seq_scans,
    seq_scans_the_record,
)
from tests.plans import plan_of, settle_one

pytestmark = pytest.mark.store_pool(12)
UNLIMITED, THRESHOLD = 0, 5


class Groups:
    """Enqueues per group and names the group of each claimed job."""

    def __init__(self, store: Store, conn: asyncpg.Connection) -> None:
        self.store, self.conn = store, conn
        self.of: dict[uuid.UUID, str] = {}

    async def enqueue(self, group: str, n: int, priority: int = 0) -> None:
        ids = await add_submissions(self.conn, n, assignment_id=group)
        out = enqueued(await self.store.enqueue(ids, group, priority, {}))
        assert len(out.queue_ids) == n
        self.of.update(dict.fromkeys(ids, group))

    async def claim(self, cap: int = UNLIMITED) -> Job:
        job = await self.store.claim(plan_of(cap, THRESHOLD))
        assert job is not None
        return job

    async def run(self, n: int, cap: int = 1) -> list[str]:
        """Claim and complete n jobs one at a time; their groups in dispatch order."""
        order = []
        for _ in range(n):
            job = await self.claim(cap)
            order.append(self.of[job.submission_id])
            assert await self.store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1},
                                                       None), plan_of())
        return order


@pytest.fixture
def groups(store: Store, conn: asyncpg.Connection) -> Groups:
    return Groups(store, conn)


async def test_a_small_group_behind_a_big_one_waits_one_turn_per_row(groups: Groups):
    await groups.enqueue("A", 500)
    assert await groups.run(1) == ["A"]
    await groups.enqueue("B", 5)
    order = await groups.run(10)
    assert order.count("B") == 5
    assert order == ["A", "B"] * 5


async def test_three_groups_interleave_in_the_order_they_joined(groups: Groups):
    for g in "ABC":
        await groups.enqueue(g, 3)
    assert await groups.run(9) == list("ABC" * 3)


async def test_priority_comes_before_turns(groups: Groups):
    await groups.enqueue("A", 3)
    await groups.enqueue("B", 2, priority=5)
    await groups.enqueue("C", 2, priority=5)
    assert await groups.run(7) == list("BCBCAAA")


async def test_a_group_that_empties_rejoins_at_the_back(groups: Groups):
    await groups.enqueue("A", 6)
    await groups.enqueue("B", 6)
    await groups.enqueue("C", 1)
    assert await groups.run(7) == list("ABCABAB")
    # C emptied in round 0; rounds 1 and 2 went on without it.  It rejoins in
    # the round being served (3), behind A and B, which joined that round first.
    await groups.enqueue("C", 2)
    assert await groups.run(5) == list("ABCAB")
    # A newcomer mid-round takes its place at the back of that round.
    await groups.enqueue("D", 2)
    assert await groups.run(4) == list("CDAB")


async def test_a_group_continues_behind_its_own_rows(groups: Groups):
    await groups.enqueue("A", 2)
    await groups.enqueue("B", 4)
    await groups.enqueue("A", 2)  # A's second batch queues behind its first
    # One row of each group per round; within a round, groups in the order
    # their rows were enqueued (A's third row came after B's third).
    assert await groups.run(8) == list("ABABBABA")


async def test_in_flight_above_one_keeps_the_rotation(groups: Groups, store: Store):
    for g in "ABC":
        await groups.enqueue(g, 4)
    cap = 3
    out = [await groups.claim(cap) for _ in range(3)]
    assert await store.claim(plan_of(cap, THRESHOLD)) is None  # the cap holds
    order = [groups.of[j.submission_id] for j in out]
    for _ in range(9):
        done = out.pop(0)
        await store.complete(Completed(done.queue_id, done.dispatch_seq, {"score": 1}, None),
                             plan_of())
        job = await groups.claim(cap)
        out.append(job)
        order.append(groups.of[job.submission_id])
    assert order == list("ABC" * 4)


async def test_settle_claims_the_next_turn(groups: Groups, store: Store):
    await groups.enqueue("A", 3)
    await groups.enqueue("B", 3)
    job = await groups.claim(1)
    order = [groups.of[job.submission_id]]
    while True:
        applied, nxt = await settle_one(store,
                                        Completed(job.queue_id, job.dispatch_seq, {"score": 1},
                                                  None),
                                        plan_of(1, THRESHOLD))
        assert applied
        if nxt is None:
            break
        order.append(groups.of[nxt.submission_id])
        job = nxt
    assert order == list("ABABAB")


async def test_concurrent_claims_keep_the_rotation(groups: Groups, store: Store,
                                                   conn: asyncpg.Connection):
    for g in "ABCD":
        await groups.enqueue(g, 10)
    jobs = await asyncio.gather(*[store.claim(plan_of(UNLIMITED, THRESHOLD)) for _ in range(40)])
    assert all(jobs)
    # The claim order is the order the advisory lock let them through, which
    # numbers the attempts: every window of four holds each group once.
    rows = await conn.fetch(
        "SELECT q.submission_id FROM ai_marking_attempts a "
        "JOIN ai_marking_queue q USING (queue_id) ORDER BY a.id")
    order = [groups.of[r["submission_id"]] for r in rows]
    assert len(order) == 40
    assert all(sorted(order[i:i + 4]) == list("ABCD") for i in range(0, 40, 4)), order


async def test_concurrent_enqueues_of_one_group_get_distinct_turns(
    store: Store, conn: asyncpg.Connection
):
    batches = [await add_submissions(conn, 10) for _ in range(6)]
    await asyncio.gather(*[store.enqueue(b, "hw-1", 0, {}) for b in batches])
    turns = [r["turn"] for r in await conn.fetch("SELECT turn FROM ai_marking_queue")]
    assert sorted(turns) == list(range(60))


async def test_an_explicit_group_spans_assignments(store: Store, conn: asyncpg.Connection):
    t1 = await add_submissions(conn, 2, assignment_id="t1-hw")
    t1b = await add_submissions(conn, 2, assignment_id="t1-quiz")
    t2 = await add_submissions(conn, 2, assignment_id="t2-hw")
    await store.enqueue(t1, "t1-hw", 0, {}, group="teacher-1")
    await store.enqueue(t1b, "t1-quiz", 0, {}, group="teacher-1")
    await store.enqueue(t2, "t2-hw", 0, {})
    order = []
    for _ in range(6):
        job = await store.claim(plan_of(UNLIMITED, THRESHOLD))
        assert job is not None
        order.append(job.assignment_id)
    assert order == ["t1-hw", "t2-hw", "t1-hw", "t2-hw", "t1-quiz", "t1-quiz"]
    rows = await store.list_rows(status=None, assignment_id=None, limit=10, group="teacher-1")
    assert {r.group_key for r in rows} == {"teacher-1"} and len(rows) == 4


async def test_rows_waiting_out_a_backoff_do_not_hold_the_others(
    groups: Groups, store: Store, conn: asyncpg.Connection
):
    await groups.enqueue("A", 2)
    await groups.enqueue("B", 2)
    job = await groups.claim(1)
    await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=3600, retryable=True,
                               max_attempts=3, error="dispatch_failed", outcome="error")
    assert await groups.run(3) == list("BAB")


async def test_a_cancelled_tail_gives_its_turns_back(groups: Groups, store: Store):
    await groups.enqueue("A", 4)
    await groups.enqueue("B", 50)
    assert await groups.run(2) == list("AB")
    assert await store.cancel_assignment("A", "test") == 3
    # A starts again where the round is, not behind the turns it cancelled.
    await groups.enqueue("A", 2)
    assert await groups.run(4) == list("BABA")


@pytest.mark.fresh_db
async def test_claim_at_scale_walks_the_index_in_turn_order(conn: asyncpg.Connection):
    # 20,000 pending rows over 200 groups, statistics fresh: the claim must stop
    # at the first due row of the index, neither scanning nor sorting the backlog.
    await conn.execute(
        "INSERT INTO submissions (id, assignment_id, content) "
        "SELECT gen_random_uuid(), 'g' || (g % 200), 'x' FROM generate_series(1, 20000) g")
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, turn) "
        "SELECT id, assignment_id, gen_random_uuid(), "
        "       row_number() OVER (PARTITION BY assignment_id) FROM submissions")
    await conn.execute("ANALYZE ai_marking_queue")
    await conn.execute("ANALYZE ai_marking_ready")
    await conn.execute("ANALYZE ai_marking_fair")
    # Turns by tokens (aiqueue 0022): the walk of the waiting groups, then the
    # chosen group's first due row, each on its index.
    # The walk's first two groups in one statement; past them, its cursor.
    for function, pattern, index, cursor in (
            ("aiqueue_fair_next", r"SELECT two\.\*.*?LIMIT 2\) two.*?LIMIT 1",
             "ai_marking_fair_walk_idx", False),
            ("aiqueue_fair_next_walk", r"SELECT f\.pool, f\.priority.*?ORDER BY f\.priority "
             r"DESC, f\.walk_key, f\.walk_turn, f\.walk_seq", "ai_marking_fair_walk_idx", True),
            ("aiqueue_fair_head", r"SELECT q\.queue_id, q\.assignment_id, q\.payload_id INTO r\s+"
             r"FROM ai_marking_ready h.*?SKIP LOCKED",
             "ai_marking_ready_group_idx", False)):
        text = await plan_in_function(conn, function, pattern, cursor, c_pools="NULL",
                                      c_seen="'{}'::text[]", p_pools="NULL",
                                      p_seen="'{}'::text[]",
                                      **{**GROUP_VALUES, "g.group_key": "'g1'", "p_group": "'g1'"})
        assert index in text, text
        assert not seq_scans(text) and "Sort" not in text, text
    # The group's first due row per kind with room (aiqueue 0023), and "another
    # row due?": one probe per group and kind (a sort of at most one row per kind).
    head = r"SELECT c\.queue_id INTO head.*?ORDER BY c\.turn, c\.seq LIMIT 1"
    for function, pattern in (("aiqueue_fair_head", head),
                              ("aiqueue_due_exists", r"SELECT EXISTS.*ANY \(pools\)\)")):
        text = await plan_in_function(conn, function, pattern,
                                      pools="ARRAY['default']", except_id="NULL::uuid",
                                      **{**GROUP_VALUES, "g.group_key": "'g1'", "p_group": "'g1'",
                                         "kinds": "ARRAY['mark']"})
        assert "ai_marking_ready_group_kind_idx" in text, text
        assert not seq_scans_the_record(text), text
        assert "Seq Scan on ai_marking_ready" not in text, text
    # fair_head runs its probe with its generic plan (force_generic_plan): the same
    # probe per kind.
    text = await generic_plan_in_function(conn, "aiqueue_fair_head", head, kinds="text[]",
                                          p_pool="text", p_priority="integer", p_group="text")
    assert "ai_marking_ready_group_kind_idx" in text, text
    assert not seq_scans_the_record(text), text
    assert "Seq Scan on ai_marking_ready" not in text, text


async def test_queue_positions_count_turns(groups: Groups, store: Store):
    await groups.enqueue("A", 50)
    await groups.enqueue("B", 3)
    b = [s for s, g in groups.of.items() if g == "B"]
    positions = []
    for s in b:
        status = await store.submission_status(s)
        assert status is not None
        positions.append(status.ahead)
    # A's row of each round goes first: B's rows have 1, 3 and 5 rows ahead.
    assert positions == [1, 3, 5]
