"""The turn order's walk key (aiqueue 0060): a lower bound of each waiting group's
(counter, head_turn, head_seq), so a charge updates the group's row heap-only, while the
walk still finds the exact turn order (docs/performance.md, "State tables: what a job
writes")."""

from __future__ import annotations

import random

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed
from tests.conftest import add_submissions, enqueued
from tests.plans import plan_of

SLACK = 8  # aiqueue_fair_slack()


def move(counter: str, turn: str = "f.head_turn", seq: str = "f.head_seq",
         waiting: str = "f.waiting", where: str = "f.group_key = $1") -> str:
    """An update of groups' counters, heads or waiting that sets the walk key as every
    writer of the table does (aiqueue_fair_key)."""
    return (f"UPDATE ai_marking_fair f SET counter = {counter}, head_turn = {turn},"
            f" head_seq = {seq}, waiting = {waiting}, (walk_key, walk_turn, walk_seq) = ("
            f"SELECT k.* FROM aiqueue_fair_key(f, {waiting}, {counter}, {turn}, {seq}) k)"
            f" WHERE {where}")


async def add_groups(conn: asyncpg.Connection, n: int, priority: int = 0) -> None:
    await conn.execute(
        "INSERT INTO ai_marking_fair (pool, priority, group_key, counter, waiting, head_turn,"
        " head_seq, walk_key, walk_turn, walk_seq) SELECT 'default', $2, 'g' || i, 0, true, 1,"
        " i, 0, 1, i"
        " FROM generate_series(1, $1) i", n, priority)


async def walk(conn: asyncpg.Connection) -> list[tuple[int, str]]:
    """Every waiting group, in the order aiqueue_fair_next gives them one by one."""
    seen: list[str] = []
    order: list[tuple[int, str]] = []
    while True:
        g = await conn.fetchrow("SELECT * FROM aiqueue_fair_next(NULL, $1::text[])", seen)
        assert g is not None
        if g["group_key"] is None:
            return order
        order.append((g["priority"], g["group_key"]))
        seen.append(f"{g['pool']}/{g['priority']}/{g['group_key']}")


async def true_order(conn: asyncpg.Connection) -> list[tuple[int, str]]:
    rows = await conn.fetch(
        "SELECT priority, group_key FROM ai_marking_fair WHERE waiting"
        " ORDER BY priority DESC, counter, head_turn, head_seq")
    return [(r["priority"], r["group_key"]) for r in rows]


async def keys_below_true_order(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval(
        "SELECT bool_and((walk_key, walk_turn, walk_seq) <= (counter, head_turn, head_seq)"
        "                AND (waiting OR walk_key = counter))"
        " FROM ai_marking_fair"))


async def hot_updates(conn: asyncpg.Connection, statement: str,
                      *args: object) -> tuple[int, int]:
    """(updates, heap-only updates) of ai_marking_fair by `statement`, in one transaction."""
    counts = ("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables"
              " WHERE relname = 'ai_marking_fair'")
    async with conn.transaction():
        before = await conn.fetchrow(counts)
        await conn.execute(statement, *args)
        after = await conn.fetchrow(counts)
    assert before is not None and after is not None
    return (int(after["n_tup_upd"] - before["n_tup_upd"]),
            int(after["n_tup_hot_upd"] - before["n_tup_hot_upd"]))


async def test_the_walk_finds_the_exact_turn_order_under_stale_keys(conn: asyncpg.Connection):
    rng = random.Random(47)
    await add_groups(conn, 30)
    await add_groups(conn, 5, priority=1)
    for _ in range(400):
        group = f"g{rng.randint(1, 30)}"
        priority = 1 if rng.random() < 0.1 else 0
        if priority == 1:
            group = f"g{rng.randint(1, 5)}"
        # Charges, corrections both ways and heads moving on, as claims, settles and
        # refunds make them.
        await conn.execute(
            move("greatest(0, f.counter + $3::float8)", turn="f.head_turn + $4::bigint",
                 where="f.priority = $1 AND f.group_key = $2"),
            priority, group, rng.choice([1250.0, 1250.0, 800.0, -300.0, 0.0]),
            rng.choice([0, 0, 1]))
        if rng.random() < 0.05:
            await conn.execute(move("f.counter", waiting="NOT f.waiting",
                                    where="f.priority = 0 AND f.group_key = $1"),
                               f"g{rng.randint(1, 30)}")
        assert await keys_below_true_order(conn)
        if rng.random() < 0.2:
            assert await walk(conn) == await true_order(conn)
    assert await walk(conn) == await true_order(conn)


async def test_a_charge_is_heap_only_while_few_groups_lie_below_its_order(
        conn: asyncpg.Connection):
    await add_groups(conn, 3)
    charge = move("f.counter + 1250", seq="f.head_seq + 10")
    for group in ("g1", "g2", "g3", "g1", "g2", "g3", "g1"):
        assert await hot_updates(conn, charge, group) == (1, 1)
    assert await walk(conn) == [(0, "g2"), (0, "g3"), (0, "g1")]
    # Stopping and starting to wait moves the key (the row leaves or joins the index).
    updates, hot = await hot_updates(conn, move("f.counter", waiting="false"), "g1")
    assert (updates, hot) == (1, 0)
    assert await conn.fetchval(
        "SELECT walk_key = counter FROM ai_marking_fair WHERE group_key = 'g1'")


async def test_a_key_moves_when_more_than_the_slack_lie_below_its_order(
        conn: asyncpg.Connection):
    await add_groups(conn, SLACK + 3)
    # g1's order passes every other group: the walk would read them all, so its key moves.
    updates, hot = await hot_updates(conn, move("f.counter + 1250"), "g1")
    assert (updates, hot) == (1, 0)
    assert await conn.fetchval(
        "SELECT (walk_key, walk_turn, walk_seq) = (counter, head_turn, head_seq)"
        " FROM ai_marking_fair WHERE group_key = 'g1'")
    # A correction below the key moves it too (the key stays a lower bound).
    await conn.execute(move("10::float8"), "g1")
    assert await keys_below_true_order(conn)
    assert await walk(conn) == await true_order(conn)


async def test_a_group_starting_alone_is_lifted_to_the_largest_counter(conn: asyncpg.Connection):
    await add_groups(conn, 2)
    await conn.execute(move("5000::float8"), "g2")
    await conn.execute(move("900::float8"), "g1")
    assert await conn.fetchval("SELECT aiqueue_fair_floor('default', 0)") == 900
    await conn.execute(move("f.counter", waiting="false", where="true"))
    await conn.execute(move("7000::float8"), "g2")
    assert await conn.fetchval("SELECT aiqueue_fair_floor('default', 0)") == 7000


async def test_claims_and_results_of_one_group_leave_its_key_alone(store: Store,
                                                                  conn: asyncpg.Connection):
    ids = await add_submissions(conn, 6, assignment_id="hw-1")
    assert len(enqueued(await store.enqueue(ids, "hw-1", 0, {})).queue_ids) == 6
    key = "SELECT walk_key, walk_turn, walk_seq, counter FROM ai_marking_fair"
    joined = await conn.fetchrow(key)
    assert joined is not None
    for _ in range(5):
        job = await store.claim(plan_of(1, 5))
        assert job is not None
        assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1},
                                              {"prompt_tokens": 900, "completion_tokens": 70}),
                                    plan_of())
    # No indexed column of the row changed: every charge and correction could be heap-only.
    after = await conn.fetchrow(key)
    assert after is not None
    assert after["counter"] > joined["counter"]
    assert tuple(after)[:3] == tuple(joined)[:3]
