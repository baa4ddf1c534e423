"""Every queue transition against a real PostgreSQL, through the Store."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.errors import Conflict
from aiqueue.models import (
    Completed,
    Enqueued,
    EnqueueOutcome,
    Job,
    QueueId,
    SubmissionId,
    UnknownIds,
)
from tests.conftest import add_submissions
from tests.integration.plan_kit import GROUP_VALUES, plan_in_function, seq_scans_the_record
from tests.plans import plan_of, settle_one

pytestmark = pytest.mark.store_pool(30)
CAP, THRESHOLD = 1, 5


async def claim_first(store: Store, conn: asyncpg.Connection, n: int = 1, *, cap: int = 1,
                      threshold: int = THRESHOLD) -> tuple[Job, list[uuid.UUID]]:
    """The common preamble: enqueue `n` new submissions of hw-1, claim the first row."""
    ids = await add_submissions(conn, n)
    await store.enqueue(ids, "hw-1", 0, {})
    job = await store.claim(plan_of(cap, threshold))
    assert job is not None
    return job, ids


async def claim_all(store: Store, conn: asyncpg.Connection, n: int) -> list[Job]:
    """Enqueue `n` new submissions of hw-1 and claim every row (no cap)."""
    await store.enqueue(await add_submissions(conn, n), "hw-1", 0, {})
    jobs = [await store.claim(plan_of(0, THRESHOLD)) for _ in range(n)]
    claimed = [j for j in jobs if j is not None]
    assert len(claimed) == n
    return claimed


def queued(outcome: EnqueueOutcome) -> list[QueueId]:
    """The rows an enqueue made (it must have been accepted)."""
    assert isinstance(outcome, Enqueued)
    return outcome.queue_ids


async def status_of(conn: asyncpg.Connection, queue_id: uuid.UUID) -> tuple[str, int]:
    row = await conn.fetchrow(
        "SELECT status, attempts FROM ai_marking_queue WHERE queue_id = $1", queue_id
    )
    return row["status"], row["attempts"]


async def test_enqueue_inserts_pending_rows_in_request_order(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 5)
    out = await store.enqueue(ids, "hw-1", 0, {"rubric": "r"})
    assert isinstance(out, Enqueued) and len(out.queue_ids) == 5
    rows = await conn.fetch("SELECT submission_id, status, attempts, payload_id FROM "
                            "ai_marking_queue ORDER BY seq")
    assert [r["submission_id"] for r in rows] == ids
    assert {r["status"] for r in rows} == {"pending"}
    assert {r["attempts"] for r in rows} == {0}
    # The payload is stored once, and every row names it.
    stored = await conn.fetch("SELECT id, payload::text FROM ai_marking_payloads")
    assert [r["payload"] for r in stored] == ['{"rubric": "r"}']
    assert {r["payload_id"] for r in rows} == {stored[0]["id"]}


async def test_enqueue_skips_live_rows_and_repeats(store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 3)
    first = await store.enqueue(ids[:2], "hw-1", 0, {})
    second = await store.enqueue([ids[0], ids[1], ids[2], ids[2]], "hw-1", 0, {})
    assert len(queued(first)) == 2
    assert len(queued(second)) == 1
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 3


async def test_enqueue_with_unknown_id_inserts_nothing(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 2)
    ghost = uuid.uuid4()
    out = await store.enqueue([ids[0], ghost, ids[1]], "hw-1", 0, {})
    assert out == UnknownIds([SubmissionId(ghost)])
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_concurrent_enqueues_of_the_same_ids_make_one_row_each(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 50)
    outs = await asyncio.gather(*[
        store.enqueue(ids if k % 2 else list(reversed(ids)), "hw-1", 0, {}) for k in range(8)
    ])
    assert sum(len(queued(o)) for o in outs) == 50
    assert await conn.fetchval("SELECT count(DISTINCT submission_id) FROM ai_marking_queue") == 50
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 50


async def test_overlapping_concurrent_enqueues_skip_what_another_one_queued_first(
    store: Store, conn: asyncpg.Connection
) -> None:
    # Windows of 40 ids overlapping by 20: whichever batch commits first queues a
    # shared id; the other's insert fails on the live-row index and runs again.
    ids = await add_submissions(conn, 200)
    windows = [ids[k:k + 40] for k in range(0, 180, 20)]
    outs = await asyncio.gather(*[store.enqueue(w, "hw-1", 0, {}) for w in windows * 2])
    assert sum(len(queued(o)) for o in outs) == 200
    assert await conn.fetchval("SELECT count(DISTINCT submission_id) FROM ai_marking_queue") == 200
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 200
    feed = await conn.fetchval("SELECT count(*) FROM ai_marking_event_feed")
    assert feed == 200  # one pending event per row, none for a rolled-back run


async def test_claim_takes_one_due_row_by_priority_then_order(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids[:2], "hw-1", 0, {})
    await store.enqueue(ids[2:], "hw-1", 5, {})
    job = await store.claim(plan_of(0, THRESHOLD))
    assert job is not None and job.submission_id == ids[2]
    assert job.attempt == 1 and job.dispatch_seq == 1
    assert job.content == "answer 2"
    job2 = await store.claim(plan_of(0, THRESHOLD))
    assert job2 is not None and job2.submission_id == ids[0]
    assert await status_of(conn, job.queue_id) == ("processing", 1)
    history = await store.attempts_of(job.queue_id)
    assert [(a.kind, a.attempt, a.outcome) for a in history] == [("dispatch", 1, None)]


async def test_claim_respects_the_cap_and_run_after(store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids, "hw-1", 0, {})
    assert await store.claim(plan_of(1, THRESHOLD)) is not None
    assert await store.claim(plan_of(1, THRESHOLD)) is None
    assert not await store.can_claim(plan_of(1, THRESHOLD))
    assert await store.can_claim(plan_of(2, THRESHOLD))
    await conn.execute("UPDATE ai_marking_queue SET run_after = now() + interval '1 hour' "
                       "WHERE status = 'pending'")
    assert await store.claim(plan_of(0, THRESHOLD)) is None


@pytest.mark.parametrize("cap", [0, 1, 3])
async def test_concurrent_claimers_never_share_a_row_or_pass_the_cap(
    store: Store, conn: asyncpg.Connection, cap: int
) -> None:
    ids = await add_submissions(conn, 40)
    await store.enqueue(ids, "hw-1", 0, {})
    jobs = await asyncio.gather(*[store.claim(plan_of(cap, THRESHOLD)) for _ in range(25)])
    won = [j.queue_id for j in jobs if j is not None]
    assert len(won) == len(set(won))
    assert len(won) == (25 if cap == 0 else cap)
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'") == len(won)


async def test_complete_applies_once_even_when_delivered_concurrently(
    store: Store, conn: asyncpg.Connection
) -> None:
    job, _ = await claim_first(store, conn)
    results = await asyncio.gather(*[
        store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": k}, {"model": "m"}),
                       plan_of())
        for k in range(10)
    ])
    assert sum(results) == 1
    assert await status_of(conn, job.queue_id) == ("completed", 1)
    row = await conn.fetchrow("SELECT ai_result, ai_marked_at FROM submissions")
    assert row["ai_marked_at"] is not None
    assert not await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 99}, None),
                                    plan_of())
    assert await conn.fetchval("SELECT ai_result->>'score' FROM submissions") != "99"


async def test_settle_applies_a_result_and_claims_the_next_row_in_one_call(
    store: Store, conn: asyncpg.Connection
) -> None:
    first, ids = await claim_first(store, conn, 3, cap=CAP)
    applied, second = await settle_one(store,
                                       Completed(first.queue_id, first.dispatch_seq, {"score": 1},
                                                 None),
                                       plan_of(CAP, THRESHOLD))
    assert applied and second is not None and second.submission_id == ids[1]
    assert await status_of(conn, first.queue_id) == ("completed", 1)
    assert await status_of(conn, second.queue_id) == ("processing", 1)
    # A repeated callback changes nothing and claims nothing new: the same caller's
    # repeat (its first answer lost) gets `second` back, which it took (docs/deploying/index.md)...
    repeat = Completed(first.queue_id, first.dispatch_seq, {"score": 9})
    assert await settle_one(store, repeat, plan_of(CAP, THRESHOLD)) == (
        False, dataclasses.replace(second, more=False))
    # ...and another caller's gets nothing: the slot is taken, no claim.
    assert await settle_one(store, repeat, plan_of(CAP, THRESHOLD), uuid.uuid4()) == (False, None)
    assert await conn.fetchval(
        "SELECT ai_result->>'score' FROM submissions WHERE id = $1", ids[0]) == "1"
    applied, third = await settle_one(
        store, Completed(second.queue_id, second.dispatch_seq, {"score": 2}),
        plan_of(CAP, THRESHOLD))
    assert applied and third is not None
    # The last result: nothing is left to claim.
    assert await settle_one(store,
                            Completed(third.queue_id, third.dispatch_seq, {"score": 3}, None),
                            plan_of(CAP, THRESHOLD)) == (True, None)
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'completed'") == 3


@pytest.mark.parametrize("cap", [1, 3])
async def test_concurrent_settles_and_claims_never_pass_the_cap(
    store: Store, conn: asyncpg.Connection, cap: int
) -> None:
    ids = await add_submissions(conn, 30)
    await store.enqueue(ids, "hw-1", 0, {})
    held = [await store.claim(plan_of(cap, THRESHOLD)) for _ in range(cap)]
    settles = [settle_one(store,
                          Completed(j.queue_id, j.dispatch_seq, {"score": 1}, None),
                          plan_of(cap, THRESHOLD))
               for j in held if j is not None]
    claims = [store.claim(plan_of(cap, THRESHOLD)) for _ in range(8)]
    # Settles and claims all at once (one gather of both).
    settled, claimed = await asyncio.gather(asyncio.gather(*settles), asyncio.gather(*claims))
    assert all(applied for applied, _ in settled)
    won = [j.queue_id for _, j in settled if j] + [j.queue_id for j in claimed if j]
    assert len(won) == len(set(won)) == cap
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'") == cap


async def test_late_result_completes_a_pending_or_failed_row_but_not_cancelled(
    store: Store, conn: asyncpg.Connection
) -> None:
    a, b, c = await claim_all(store, conn, 3)
    assert await store.attempt_failed(a.queue_id, a.dispatch_seq, delay=60, retryable=True,
                                      max_attempts=3, error="x",
                                      outcome="dispatch_error") == "pending"
    assert await store.complete(Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None),
                                plan_of())
    assert await store.attempt_failed(b.queue_id, b.dispatch_seq, delay=0, retryable=False,
                                      max_attempts=3, error="x",
                                      outcome="callback_failed") == "failed"
    assert await store.complete(Completed(b.queue_id, b.dispatch_seq, {"score": 2}, None),
                                plan_of())
    await conn.execute("UPDATE ai_marking_queue SET status = 'cancelled' WHERE queue_id = $1",
                       c.queue_id)
    assert not await store.complete(Completed(c.queue_id, c.dispatch_seq, {"score": 3}, None),
                                    plan_of())
    assert (await status_of(conn, a.queue_id))[0] == "completed"
    assert (await status_of(conn, b.queue_id))[0] == "completed"
    assert (await status_of(conn, c.queue_id))[0] == "cancelled"


async def test_failure_retries_with_backoff_then_fails_when_attempts_are_used(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 1)
    await store.enqueue(ids, "hw-1", 0, {})
    for attempt in (1, 2, 3):
        job = await store.claim(plan_of(1, THRESHOLD))
        assert job is not None and job.attempt == attempt
        status = await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0,
                                            retryable=True, max_attempts=3, error="http_500",
                                            outcome="dispatch_error")
        assert status == ("failed" if attempt == 3 else "pending")
    assert await store.claim(plan_of(1, THRESHOLD)) is None
    row = await conn.fetchrow(
        "SELECT status, attempts, last_error, finished_at FROM ai_marking_queue")
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 3, "http_500")
    assert row["finished_at"] is not None


async def test_backoff_delays_the_next_claim(store: Store, conn: asyncpg.Connection) -> None:
    job, _ = await claim_first(store, conn)
    await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=30, retryable=True,
                               max_attempts=3, error="e", outcome="dispatch_error")
    assert await store.claim(plan_of(1, THRESHOLD)) is None
    wait = await store.next_wakeup(plan_of(1, THRESHOLD), 600)
    assert wait is not None and 25 < wait <= 30


async def test_only_the_current_dispatch_can_fail_a_row(
    store: Store, conn: asyncpg.Connection
) -> None:
    old, _ = await claim_first(store, conn)
    await store.attempt_failed(old.queue_id, old.dispatch_seq, delay=0, retryable=True,
                               max_attempts=3, error="e", outcome="dispatch_error")
    new = await store.claim(plan_of(1, THRESHOLD))
    assert new is not None and new.dispatch_seq == old.dispatch_seq + 1
    stale = await store.attempt_failed(old.queue_id, old.dispatch_seq, delay=0, retryable=False,
                                       max_attempts=3, error="late", outcome="callback_failed")
    assert stale is None
    assert not await store.heartbeat(old.queue_id, old.dispatch_seq, {"current": 1})
    assert await store.heartbeat(new.queue_id, new.dispatch_seq, {"current": 1})
    assert await status_of(conn, new.queue_id) == ("processing", 2)


async def test_busy_returns_the_row_without_using_an_attempt_and_pauses(
    store: Store, conn: asyncpg.Connection
) -> None:
    job, _ = await claim_first(store, conn, 2)
    assert await store.refused(job.queue_id, job.dispatch_seq, kind="overloaded", delay=30,
                               give_up=86400, cap=1) == "pending"
    assert await status_of(conn, job.queue_id) == ("pending", 0)
    assert await store.claim(plan_of(1, THRESHOLD)) is None  # busy_until holds everyone back
    await conn.execute("UPDATE ai_queue_control SET busy_until = now() - interval '1 second'")
    assert await store.claim(plan_of(1, THRESHOLD)) is not None


async def test_stuck_rows_are_recovered_by_lease(store: Store, conn: asyncpg.Connection) -> None:
    a, b, c = await claim_all(store, conn, 3)
    await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '20 minutes'")
    await conn.execute("UPDATE ai_marking_queue SET attempts = 3 WHERE queue_id = $1", b.queue_id)
    assert await store.heartbeat(c.queue_id, c.dispatch_seq, {"current": 1, "total": 2})
    assert await store.recover_stuck(600, 3) == 2
    assert (await status_of(conn, a.queue_id))[0] == "pending"
    assert (await status_of(conn, b.queue_id))[0] == "failed"
    assert (await status_of(conn, c.queue_id))[0] == "processing"
    # The recovered dispatch can no longer fail the row; its late result still counts.
    assert await store.attempt_failed(a.queue_id, a.dispatch_seq, delay=0, retryable=False,
                                      max_attempts=3, error="e", outcome="x") is None
    assert await store.complete(Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None),
                                plan_of())
    outcomes = [h.outcome for h in await store.attempts_of(a.queue_id)]
    assert outcomes == ["completed_late"]


async def test_prune_deletes_old_completed_rows_at_most_once_a_minute(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids, "hw-1", 0, {})
    for _ in range(3):
        job = await store.claim(plan_of(0, THRESHOLD))
        assert job is not None
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                             plan_of())
    await conn.execute("UPDATE ai_marking_queue SET finished_at = now() - interval '8 days' "
                       "WHERE submission_id = ANY($1::uuid[])", ids[:2])
    assert await store.prune(7 * 86400) == 2
    await conn.execute("UPDATE ai_marking_queue SET finished_at = now() - interval '8 days'")
    assert await store.prune(7 * 86400) == 0  # gated: pruned less than a minute ago
    await conn.execute("UPDATE ai_queue_control SET last_prune_at = now() - interval '2 minutes'")
    assert await store.prune(7 * 86400) == 1
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_attempts") == 0


async def test_breaker_opens_after_threshold_and_half_opens_for_one_probe(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids, "hw-1", 0, {})
    for _ in range(3):
        await store.breaker_failure(3, 60)
    assert (await store.control(3)).circuit_open
    assert await store.claim(plan_of(0, 3)) is None
    await conn.execute("UPDATE ai_queue_control SET circuit_open_until = now()")
    probe = await store.claim(plan_of(0, 3))
    # Its success must reset the breaker, and no row may follow it while it is out.
    assert probe is not None and probe.breaker_dirty and not probe.more
    assert await store.claim(plan_of(0, 3)) is None  # half-open: one probe at a time
    await store.dispatch_accepted()
    after = await store.claim(plan_of(0, 3))
    assert after is not None and not after.breaker_dirty and after.more
    control = await store.control(3)
    assert control.consecutive_failures == 0 and not control.circuit_open


async def test_pause_stops_claims(store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 1)
    await store.enqueue(ids, "hw-1", 0, {})
    await store.set_paused(True, "ops")
    assert await store.claim(plan_of(0, THRESHOLD)) is None
    await store.set_paused(False, "ops")
    assert await store.claim(plan_of(0, THRESHOLD)) is not None


async def test_manual_retry_restarts_attempts_and_refuses_live_rows(
    store: Store, conn: asyncpg.Connection
) -> None:
    job, _ = await claim_first(store, conn)
    assert not await store.retry_failed(job.queue_id, "ops")
    await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                               max_attempts=3, error="e", outcome="x")
    assert await store.retry_failed(job.queue_id, "ops")
    assert await status_of(conn, job.queue_id) == ("pending", 0)
    again = await store.claim(plan_of(1, THRESHOLD))
    assert again is not None and again.attempt == 1 and again.dispatch_seq == 2


async def test_retry_of_a_failed_row_conflicts_when_the_submission_was_requeued(
    store: Store, conn: asyncpg.Connection
) -> None:
    job, ids = await claim_first(store, conn)
    await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                               max_attempts=3, error="e", outcome="x")
    await store.enqueue(ids, "hw-1", 0, {})
    with pytest.raises(Conflict):
        await store.retry_failed(job.queue_id, "ops")


async def test_status_changes_are_recorded_as_events(
    store: Store, conn: asyncpg.Connection
) -> None:
    job, _ = await claim_first(store, conn, 2)
    await store.heartbeat(job.queue_id, job.dispatch_seq, {"current": 1})
    await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 4, "max_score": 5,
                                                           "feedback": "f"}, None), plan_of())
    rows = await conn.fetch("SELECT status, summary::text FROM ai_marking_event_feed "
                            "WHERE queue_id = $1 ORDER BY id, k", job.queue_id)
    # The progress item is a second `processing` event carrying it (live pages show it).
    assert [r["status"] for r in rows] == ["pending", "processing", "processing", "completed"]
    assert rows[2]["summary"] == '{"progress": {"current": 1}}'  # never a message
    assert rows[-1]["summary"] == '{"score": 4, "max_score": 5}'


@pytest.mark.fresh_db
async def test_claim_uses_the_partial_index(conn: asyncpg.Connection) -> None:
    await add_submissions(conn, 2000)
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, finished_at) "
        "SELECT id, 'hw-1', gen_random_uuid(), 'completed', now() FROM submissions"
    )
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
        "SELECT id, 'hw-1', gen_random_uuid() FROM submissions LIMIT 500"
    )
    await conn.execute("ANALYZE ai_marking_queue")
    await conn.execute("ANALYZE ai_marking_ready")
    # The claim's pick takes the chosen group's first due row (aiqueue 0022), one
    # probe per kind with room (aiqueue 0023), on the pending rows' own table (0067).
    head = r"SELECT c\.queue_id INTO head.*?ORDER BY c\.turn, c\.seq LIMIT 1"
    text = await plan_in_function(conn, "aiqueue_fair_head", head,
                                  **{**GROUP_VALUES, "kinds": "ARRAY['mark']"})
    assert "ai_marking_ready_group_kind_idx" in text
    assert not seq_scans_the_record(text)
    assert "Seq Scan on ai_marking_ready" not in text
    # Its walk in turn order, when that row is held or any kind will do.
    text = await plan_in_function(
        conn, "aiqueue_fair_head",
        r"SELECT q\.queue_id, q\.assignment_id, q\.payload_id INTO r\s+FROM ai_marking_ready h"
        r".*?SKIP LOCKED", **GROUP_VALUES)
    assert "ai_marking_ready_group_idx" in text
    assert not seq_scans_the_record(text)
    assert "Seq Scan on ai_marking_ready" not in text


@pytest.mark.fresh_db
@pytest.mark.parametrize(("row", "function", "pattern", "index"), [
    # The claim's "another row due?" probe, with most rows pending.
    # (Either of a group's indexes on the pending rows' table, in turn order.)
    ("'pending'", "aiqueue_due_exists", r"SELECT EXISTS.*ANY \(pools\)\)",
     "Index Scan using ai_marking_ready_group"),
    # A pool's in-flight count (the gate, twice per claim), with most rows in flight.
    ("'processing'", "aiqueue_pool_in_flight",
     r"SELECT 1 FROM ai_marking_claimed p .*?greatest\(cap, 1\)", "ai_marking_claimed_pool_idx"),
    # A kind's in-flight count (a kind with a cap of its own), likewise: with one kind
    # in flight, either lease index serves (both stop at the cap).
    ("'processing'", "aiqueue_kind_in_flight",
     r"SELECT 1 FROM ai_marking_claimed p\s.*?greatest\(cap, 1\)", "on ai_marking_claimed"),
])
async def test_probes_keep_to_their_index_when_statistics_say_most_rows_match(
    conn: asyncpg.Connection, row: str, function: str, pattern: str, index: str
) -> None:
    # Statistics taken while most rows matched plan an unordered probe or a
    # plain count(*) as a scan of the whole table, on every claim.
    await add_submissions(conn, 2000)
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status) "
        f"SELECT id, 'hw-1', gen_random_uuid(), {row} FROM submissions")
    await conn.execute(  # a row in flight holds a slot
        "INSERT INTO ai_marking_claimed (queue_id, dispatch_seq, pool, kind) "
        "SELECT queue_id, dispatch_seq, pool, kind FROM ai_marking_queue "
        "WHERE status = 'processing'")
    await conn.execute("ANALYZE ai_marking_queue")
    await conn.execute("ANALYZE ai_marking_ready")
    await conn.execute("ANALYZE ai_marking_claimed")
    text = await plan_in_function(conn, function, pattern, cap="1", kinds="ARRAY['mark']",
                                  pools="ARRAY['default']", except_id="NULL::uuid",
                                  p_pool="'default'", p_kind="'mark'")
    assert index in text
    assert not seq_scans_the_record(text)
    assert "Seq Scan on ai_marking_ready" not in text


async def test_ticker_waits_for_the_half_open_probe(store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids, "hw-1", 0, {})
    for _ in range(3):
        await store.breaker_failure(3, 60)
    await conn.execute("UPDATE ai_queue_control SET circuit_open_until = now()")
    assert await store.claim(plan_of(2, 3)) is not None  # the probe
    wait = await store.next_wakeup(plan_of(2, 3), 600)
    # Nothing to do until the probe reports or its lease runs out (600 s).
    assert wait is not None and wait > 500


async def test_an_idle_queue_has_nothing_to_wake_for(
    store: Store, conn: asyncpg.Connection
) -> None:
    assert await store.next_wakeup(plan_of(1, 5), 600) is None
    job, _ = await claim_first(store, conn, threshold=5)
    await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None), plan_of())
    assert await store.next_wakeup(plan_of(1, 5), 600) is None
