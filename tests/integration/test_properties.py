"""Property-based: a Hypothesis state machine drives the real Store on a real PostgreSQL.

Rules: enqueue, claim (the dispatch accepted, refused or busy), the function finishing
a job (its callback delivered now, later or never; completed or failed), late and
duplicated deliveries, heartbeats, stuck recovery, manual retry, cancel, prune.  After
every step: the database agrees with the model, at most one live row per submission,
never more slots taken than the cap — and never more jobs at the function than the
cap —, every result applied at most once, attempts <= max, statuses valid.

One database per test; tables are emptied between examples.  The size knob is
AIQUEUE_PROPERTY_EXAMPLES (default 25 examples of up to 40 steps).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from aiqueue.db.store import Store, connect_pool
from aiqueue.errors import Conflict
from aiqueue.models import STATUSES, Completed
from tests import pg
from tests.conftest import add_submissions
from tests.plans import plan_of

MAX_ATTEMPTS, THRESHOLD, SUBMISSIONS = 3, 1000, 4
EXAMPLES = int(os.environ.get("AIQUEUE_PROPERTY_EXAMPLES", "25"))

# Test-database-only audit: one row per write of a submission's result.
AUDIT_SQL = """
CREATE TABLE prop_applied (submission_id uuid NOT NULL);
CREATE FUNCTION prop_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO prop_applied VALUES (NEW.id); RETURN NULL; END $$;
CREATE TRIGGER prop_audit AFTER UPDATE OF ai_result, ai_marked_at ON submissions
    FOR EACH ROW EXECUTE FUNCTION prop_audit();
"""


class Harness:
    """A private event loop, a Store and a plain connection on the test database."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = self.run(self._store(dsn))
        self.conn: asyncpg.Connection = self.run(asyncpg.connect(dsn))
        self.run(self.conn.execute(AUDIT_SQL))

    @staticmethod
    async def _store(dsn: str) -> Store:
        return Store(await connect_pool(dsn, max_size=4))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.conn.close())
        self.run(self.store.close())
        self.loop.close()


@pytest.fixture
def harness(pg_admin: str) -> Iterator[Harness]:
    dsn = pg.run(pg.create_test_db(pg_admin))
    h = Harness(dsn)
    yield h
    h.close()
    pg.run(pg.drop_test_db(pg_admin, dsn))


@dataclass
class Row:
    """The model of one queue row."""

    submission: uuid.UUID
    status: str = "pending"
    attempts: int = 0
    seq: int = 0  # the current dispatch
    slot: bool = False  # in ai_marking_claimed: the row holds one of the cap's slots


@dataclass(frozen=True)
class Delivery:
    """A callback the function produced: (row, dispatch) and what it says."""

    queue_id: uuid.UUID
    seq: int
    status: str
    retryable: bool = True


@dataclass
class Model:
    rows: dict[uuid.UUID, Row] = field(default_factory=dict)
    # Jobs at the function, in the order they arrived (an ordered set: draws must not
    # depend on random UUIDs, or Hypothesis cannot replay an example).
    working: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)
    undelivered: list[Delivery] = field(default_factory=list)  # ready, not yet delivered
    delivered: list[Delivery] = field(default_factory=list)  # may be replayed
    applied: Counter[uuid.UUID] = field(default_factory=Counter)  # results per submission

    def live(self, submission: uuid.UUID) -> bool:
        return any(r.submission == submission and r.status in ("pending", "processing")
                   for r in self.rows.values())

    def slots(self) -> int:
        return sum(r.slot for r in self.rows.values())


class QueueMachine(RuleBasedStateMachine):
    def __init__(self, h: Harness, cap: int) -> None:
        super().__init__()
        self.h, self.cap = h, cap
        self.m = Model()
        h.run(h.conn.execute(
            "TRUNCATE ai_marking_queue, ai_marking_attempts, ai_marking_events, prop_applied,"
            " submissions CASCADE;"
            " UPDATE ai_queue_control SET paused = false, consecutive_failures = 0,"
            " circuit_open_until = NULL, busy_until = NULL, last_prune_at = '-infinity'"))
        self.subs: list[uuid.UUID] = h.run(add_submissions(h.conn, SUBMISSIONS, "hw"))

    # -- the queue's side ------------------------------------------------------------

    @rule(picks=st.lists(st.integers(0, SUBMISSIONS - 1), min_size=1, max_size=4),
          remark=st.booleans())
    def enqueue(self, picks: list[int], remark: bool) -> None:
        ids = [self.subs[i] for i in picks]
        # A submission with a result is marked again only on request (docs/integrating.md).
        marked = [s for s in dict.fromkeys(ids) if self.m.applied[s] and not remark]
        expected = [s for s in dict.fromkeys(ids) if not self.m.live(s) and s not in marked]
        out = self.h.run(self.h.store.enqueue(ids, "hw", 0, {}, remark=remark))
        assert len(out.queue_ids) == len(expected)
        assert out.already_marked == len(marked)
        for queue_id, submission in zip(out.queue_ids, expected, strict=True):
            self.m.rows[queue_id] = Row(submission)

    @rule(answer=st.sampled_from(["accepted", "accepted", "failed", "busy"]))
    def claim(self, answer: str) -> None:
        job = self.h.run(self.h.store.claim(plan_of(self.cap, THRESHOLD)))
        due = [q for q, r in self.m.rows.items() if r.status == "pending"]
        if not due or self.m.slots() >= self.cap:
            assert job is None, "claimed past the cap or without a due row"
            return
        assert job is not None, "a due row and a free slot, yet no claim"
        row = self.m.rows[job.queue_id]
        assert row.status == "pending"
        row.status, row.attempts, row.seq, row.slot = "processing", row.attempts + 1, \
            row.seq + 1, True
        assert (job.attempt, job.dispatch_seq) == (row.attempts, row.seq)
        if answer == "accepted":
            self.m.working[(job.queue_id, row.seq)] = None
        elif answer == "busy":  # 429/503: back without using an attempt
            assert self.h.run(self.h.store.refused(job.queue_id, row.seq, kind="overloaded",
                                                   delay=0, give_up=86400, cap=self.cap))
            # The refusal also cuts the learned limit L, which this model of the
            # cap leaves out (tests/integration/test_flow.py covers L): undo it.
            self.h.run(self.h.conn.execute(
                "UPDATE ai_queue_control SET in_flight_limit = NULL, limit_cut_at = NULL"))
            row.status, row.attempts, row.slot = "pending", row.attempts - 1, False
        else:  # 5xx, timeout, refused connection: a failed attempt
            self.fail(Delivery(job.queue_id, row.seq, "failed"), outcome="dispatch_error")

    def fail(self, d: Delivery, outcome: str = "callback_failed") -> None:
        status = self.h.run(self.h.store.attempt_failed(
            d.queue_id, d.seq, delay=0, retryable=d.retryable, max_attempts=MAX_ATTEMPTS,
            error="e", outcome=outcome))
        row = self.m.rows.get(d.queue_id)
        if row is None or row.status != "processing" or row.seq != d.seq:
            assert status is None, "a stale dispatch changed a row"
            if row is not None and row.status == "completed" and row.seq == d.seq:
                row.slot = False  # the current dispatch reported: its slot is free
            return
        row.status = "pending" if d.retryable and row.attempts < MAX_ATTEMPTS else "failed"
        row.slot = False
        assert status == row.status

    def complete(self, d: Delivery) -> None:
        done = self.h.run(self.h.store.complete(Completed(d.queue_id, d.seq, {"score": d.seq},
                                                          None), plan_of()))
        row = self.m.rows.get(d.queue_id)
        if row is None or row.status in ("completed", "cancelled"):
            assert not done, "a result was applied to a finished row"
            if row is not None and row.status == "completed" and row.seq == d.seq:
                row.slot = False
            return
        assert done, "a result for an unfinished row was refused"
        # A late result of an earlier dispatch: the current one keeps its slot.
        row.slot = row.status == "processing" and row.seq != d.seq
        row.status = "completed"
        self.m.applied[row.submission] += 1

    def deliver(self, d: Delivery) -> None:
        self.complete(d) if d.status == "completed" else self.fail(d)
        self.m.delivered.append(d)

    # -- the function's side -----------------------------------------------------------

    @precondition(lambda self: self.m.working)
    @rule(data=st.data(), status=st.sampled_from(["completed", "completed", "failed"]),
          retryable=st.booleans(), when=st.sampled_from(["now", "now", "later", "never"]))
    def function_finishes(self, data: st.DataObject, status: str, retryable: bool,
                          when: str) -> None:
        queue_id, seq = data.draw(st.sampled_from(list(self.m.working)))
        del self.m.working[(queue_id, seq)]
        d = Delivery(queue_id, seq, status, retryable)
        if when == "now":
            self.deliver(d)
        elif when == "later":
            self.m.undelivered.append(d)

    @precondition(lambda self: self.m.undelivered)
    @rule(data=st.data())
    def late_delivery(self, data: st.DataObject) -> None:
        d = data.draw(st.sampled_from(self.m.undelivered))
        self.m.undelivered.remove(d)
        self.deliver(d)

    @precondition(lambda self: self.m.delivered)
    @rule(data=st.data())
    def duplicate_delivery(self, data: st.DataObject) -> None:
        self.deliver(data.draw(st.sampled_from(self.m.delivered)))

    @precondition(lambda self: self.m.rows)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        queue_id = data.draw(st.sampled_from(list(self.m.rows)))
        row = self.m.rows[queue_id]
        seq = data.draw(st.integers(max(row.seq - 1, 0), row.seq))
        ok = self.h.run(self.h.store.heartbeat(queue_id, seq, {"current": 1}))
        assert ok == (seq == row.seq and row.slot)

    # -- housekeeping and operators ------------------------------------------------------

    @precondition(lambda self: any(r.slot and (q, r.seq) not in self.m.working
                                   for q, r in self.m.rows.items()))
    @rule(data=st.data())
    def lease_runs_out(self, data: st.DataObject) -> None:
        # Only for dispatches the function is done with: one still working past the
        # lease broke its own time limit (the contract: keep the lease above it).
        queue_id = data.draw(st.sampled_from(
            [q for q, r in self.m.rows.items() if r.slot and (q, r.seq) not in self.m.working]))
        self.h.run(self.h.conn.execute(
            "UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'"
            " WHERE queue_id = $1", queue_id))
        recovered = self.h.run(self.h.store.recover_stuck(600, MAX_ATTEMPTS))
        row = self.m.rows[queue_id]
        # A processing row is recovered; a completed one only gives its slot back.
        assert recovered == (1 if row.status == "processing" else 0)
        if row.status == "processing":
            row.status = "pending" if row.attempts < MAX_ATTEMPTS else "failed"
        row.slot = False

    @precondition(lambda self: self.m.rows)
    @rule(data=st.data())
    def manual_retry(self, data: st.DataObject) -> None:
        queue_id = data.draw(st.sampled_from(list(self.m.rows)))
        row = self.m.rows[queue_id]
        if row.status == "failed" and self.m.live(row.submission):
            with pytest.raises(Conflict):
                self.h.run(self.h.store.retry_failed(queue_id, "prop"))
            return
        ok = self.h.run(self.h.store.retry_failed(queue_id, "prop"))
        assert ok == (row.status == "failed")
        if ok:
            row.status, row.attempts = "pending", 0

    @precondition(lambda self: self.m.rows)
    @rule(data=st.data(), everything=st.booleans())
    def cancel(self, data: st.DataObject, everything: bool) -> None:
        if everything:
            n = self.h.run(self.h.store.cancel_assignment("hw", "prop"))
            pending = [r for r in self.m.rows.values() if r.status == "pending"]
            assert n == len(pending)
            for r in pending:
                r.status = "cancelled"
            return
        queue_id = data.draw(st.sampled_from(list(self.m.rows)))
        row = self.m.rows[queue_id]
        ok = self.h.run(self.h.store.cancel_row(queue_id, "prop"))
        assert ok == (row.status == "pending")
        if ok:
            row.status = "cancelled"

    @rule()
    def prune(self) -> None:
        self.h.run(self.h.conn.execute(
            "UPDATE ai_queue_control SET last_prune_at = '-infinity';"
            " UPDATE ai_marking_queue SET finished_at = finished_at - interval '8 days'"
            " WHERE status = 'completed'"))
        gone = self.h.run(self.h.store.prune(7 * 86400))
        prunable = [q for q, r in self.m.rows.items() if r.status == "completed" and not r.slot]
        assert gone == len(prunable)
        for q in prunable:
            del self.m.rows[q]

    # -- invariants --------------------------------------------------------------------

    def db_rows(self) -> dict[uuid.UUID, asyncpg.Record]:
        rows = self.h.run(self.h.conn.fetch(
            "SELECT q.queue_id, q.submission_id, q.status, q.attempts, q.dispatch_seq,"
            " c.queue_id IS NOT NULL AS slot FROM ai_marking_queue q"
            " LEFT JOIN ai_marking_claimed c ON c.queue_id = q.queue_id"))
        return {r["queue_id"]: r for r in rows}

    @invariant()
    def database_agrees_with_the_model(self) -> None:
        db = self.db_rows()
        assert set(db) == set(self.m.rows)
        for queue_id, row in self.m.rows.items():
            got = db[queue_id]
            assert (got["status"], got["attempts"], got["dispatch_seq"], got["slot"]) == \
                (row.status, row.attempts, row.seq, row.slot), (queue_id, got, row)

    @invariant()
    def statuses_are_valid_and_attempts_bounded(self) -> None:
        for r in self.db_rows().values():
            assert r["status"] in STATUSES
            assert 0 <= r["attempts"] <= MAX_ATTEMPTS

    @invariant()
    def one_live_row_per_submission(self) -> None:
        live = Counter(r["submission_id"] for r in self.db_rows().values()
                       if r["status"] in ("pending", "processing"))
        assert all(n == 1 for n in live.values())

    @invariant()
    def never_more_than_the_cap(self) -> None:
        slots = self.h.run(self.h.conn.fetchval(
            "SELECT count(*) FROM ai_marking_claimed"))
        processing = self.h.run(self.h.conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'"))
        assert processing <= slots <= self.cap
        # What the cap is for: the function never works on more jobs than that.
        assert len(self.m.working) <= self.cap

    @invariant()
    def results_applied_at_most_once(self) -> None:
        writes = Counter(r["submission_id"] for r in self.h.run(
            self.h.conn.fetch("SELECT submission_id FROM prop_applied")))
        assert writes == self.m.applied
        # Each completed row has one completion in its history.
        bad = self.h.run(self.h.conn.fetchval("""
            SELECT count(*) FROM ai_marking_queue q
            WHERE (SELECT count(*) FROM ai_marking_attempts a WHERE a.queue_id = q.queue_id
                   AND a.outcome IN ('completed', 'completed_late'))
                  <> CASE WHEN q.status = 'completed' THEN 1 ELSE 0 END"""))
        assert bad == 0


@pytest.mark.parametrize("cap", [1, 2])
def test_queue_transitions_keep_every_invariant(harness: Harness, cap: int) -> None:
    run_state_machine_as_test(
        lambda: QueueMachine(harness, cap),  # type: ignore[arg-type]  # any factory will do
        settings=settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None,
                          suppress_health_check=list(HealthCheck)),
    )


# -- found by reasoning about the function-side cap, kept as regressions ---------------


@pytest.mark.parametrize("newer_reports", ["completed", "failed", "busy", "lease_expires"])
async def test_a_late_result_does_not_free_the_slot_a_newer_dispatch_still_holds(
    db_url: str, conn: asyncpg.Connection, newer_reports: str
) -> None:
    store = Store(await connect_pool(db_url))
    try:
        x, y = await add_submissions(conn, 2)
        await store.enqueue([x], "hw-1", 0, {})
        first = await store.claim(plan_of(1, THRESHOLD))
        assert first is not None
        await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'")
        assert await store.recover_stuck(600, 3) == 1
        second = await store.claim(plan_of(1, THRESHOLD))  # dispatch 2 is at the function now
        assert second is not None and second.dispatch_seq == first.dispatch_seq + 1
        await store.enqueue([y], "hw-1", 0, {})
        # Dispatch 1's result arrives late: applied, the row completes (the contract)…
        assert await store.complete(Completed(first.queue_id, first.dispatch_seq, {"score": 1},
                                              None), plan_of())
        row = await store.get_row(first.queue_id)
        assert row is not None and row.status == "completed"
        # …but dispatch 2 is still being worked on: at cap 1, y must wait.
        assert await store.claim(plan_of(1, THRESHOLD)) is None
        assert await store.heartbeat(second.queue_id, second.dispatch_seq, {"current": 1})
        assert await store.claim(plan_of(1, THRESHOLD)) is None
        if newer_reports == "completed":
            assert not await store.complete(Completed(second.queue_id, second.dispatch_seq,
                                                      {"s": 2}, None), plan_of())
        elif newer_reports == "failed":
            assert await store.attempt_failed(
                second.queue_id, second.dispatch_seq, delay=0, retryable=True, max_attempts=3,
                error="e", outcome="callback_failed") is None
        elif newer_reports == "busy":  # its dispatch answered 429 after all
            assert await store.refused(second.queue_id, second.dispatch_seq, kind="overloaded",
                                       delay=0, give_up=86400, cap=1) is None
        else:
            await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'"
                               " WHERE queue_id = $1", second.queue_id)
            assert await store.recover_stuck(600, 3) == 0  # released, not recovered
        assert await store.claim(plan_of(1, THRESHOLD)) is not None  # the slot is free again
        writes = await conn.fetchval("SELECT ai_result::text FROM submissions WHERE id = $1", x)
        assert writes == '{"score": 1}'  # the result was applied once, by dispatch 1
    finally:
        await store.close()
