"""Erasure against a real PostgreSQL: nothing of the submission is left.

The check reads every queue table's rows as text (t::text), so it also finds an
id in a jsonb body, an array or a payload, and the catalog test makes a table
added later fail here until records/erasure.py says how it is covered.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue import cli, logs
from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from aiqueue.records.erasure import ANSWER_KEYS, COVERAGE
from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings
from tests.plans import Budget, plan_of, settle_one

CAP, THRESHOLD = 0, 5
BUDGET = Budget(tokens_per_minute=1_000_000)
USAGE = {"model": "m", "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.25}
QUEUE_TABLES = r"(ai\_marking\_%|ai\_queue\_%|aiqueue\_%)"
# Column types that can carry a submission's id.
CARRIERS = ("uuid", "ARRAY", "json", "jsonb", "text", "character varying")


async def queue_tables(conn: asyncpg.Connection) -> dict[str, list[tuple[str, str]]]:
    """Every queue table of the schema with its (column, type) pairs, from the catalog.

    A partition (a month of attempts, results or events) is not a table of its own
    here: its rows are its parent's, which an erasure reaches, every month at once."""
    rows = await conn.fetch(
        "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
        "JOIN information_schema.tables t USING (table_schema, table_name) "
        "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
        "AND c.table_name SIMILAR TO $1 AND NOT EXISTS (SELECT 1 FROM pg_inherits i "
        "  WHERE i.inhrelid = format('%I.%I', c.table_schema, c.table_name)::regclass) "
        "ORDER BY 1, c.ordinal_position", QUEUE_TABLES)
    tables: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        tables.setdefault(r["table_name"], []).append((r["column_name"], r["data_type"]))
    return tables


async def mentions(conn: asyncpg.Connection, needle: uuid.UUID) -> dict[str, int]:
    """Rows of each queue table whose text holds the id."""
    found = {}
    for table in await queue_tables(conn):
        found[table] = await conn.fetchval(
            f"SELECT count(*) FROM {table} t WHERE strpos(t::text, $1) > 0", str(needle))
    return found


async def claim(store: Store) -> Any:
    job = await store.claim(plan_of(CAP, THRESHOLD, budget=BUDGET))
    assert job is not None
    return job


async def fail(store: Store, job: Any, *, retryable: bool) -> None:
    await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=retryable,
                               max_attempts=3, error="model_timeout", outcome="failed")


async def complete(store: Store, job: Any, score: int) -> None:
    result = {"score": score, "max_score": 10, "feedback": "secret words"}
    assert await store.complete(Completed(job.queue_id, job.dispatch_seq, result, USAGE),
                                plan_of(budget=BUDGET))


async def a_full_history(store: Store, conn: asyncpg.Connection
                         ) -> tuple[uuid.UUID, list[uuid.UUID], Any]:
    """Submission `a` through retries, a refusal, a result, a review, a failure with its
    notification, a batch shared with others, and a row still in flight; others beside it."""
    a, b, c, d = await add_submissions(conn, 4, "hw-e")
    own = {"rubric": "r", "ref": str(a)}  # a payload only `a` uses, naming it
    await store.enqueue([a], "hw-e", 0, own)
    job = await claim(store)
    await fail(store, job, retryable=True)
    job = await claim(store)
    assert await store.refused(job.queue_id, job.dispatch_seq, kind="rate_limited", delay=0,
                               give_up=86400, cap=CAP) == "pending"
    await conn.execute("UPDATE ai_queue_control SET busy_until = NULL")
    job = await claim(store)
    await complete(store, job, 7)
    assert (await store.accept(job.queue_id, "teacher-1", {"score": 8})).outcome == "accepted"
    # Others: b completed, c failed (a row_failed notification), a shared payload.
    await store.enqueue([b, c], "hw-e", 0, {"rubric": "shared"})
    first, second = await claim(store), await claim(store)
    done = {first.submission_id: first, second.submission_id: second}
    await complete(store, done[b], 5)
    await fail(store, done[c], retryable=False)
    # a and d in one enqueue (one batch event, the shared payload, which stays);
    # a fails for good, d completes.
    await store.enqueue([a, d], "hw-e", 0, {"rubric": "shared"}, remark=True)
    first, second = await claim(store), await claim(store)
    done = {first.submission_id: first, second.submission_id: second}
    await fail(store, done[a], retryable=False)
    await complete(store, done[d], 9)
    # And a row of a's still at the function.
    await store.enqueue([a], "hw-e", 0, own, remark=True)
    in_flight = await claim(store)
    assert in_flight.submission_id == a
    return a, [b, c, d], in_flight


async def test_erasing_a_submission_leaves_no_row_that_names_it_and_spares_the_others(
    store: Store, conn: asyncpg.Connection
):
    a, others, in_flight = await a_full_history(store, conn)
    before = await mentions(conn, a)
    # The history really reached every kind of table the erasure must cover.
    for table in ("ai_marking_queue", "ai_marking_results", "ai_marking_events",
                  "ai_marking_outbox", "ai_marking_payloads"):
        assert before[table] > 0, table
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_budget b JOIN ai_marking_queue q "
                               "USING (queue_id) WHERE q.submission_id = $1", a) > 0
    others_before = [await mentions(conn, o) for o in others]

    erased = await store.erase([a], "api")

    assert {t: n for t, n in (await mentions(conn, a)).items() if n} == {}
    assert [await mentions(conn, o) for o in others] == others_before
    assert erased["ai_marking_queue"] == 3 and erased["ai_marking_results"] == 1
    assert erased["ai_marking_attempts"] >= 5 and erased["ai_marking_budget"] >= 4
    assert erased["ai_marking_payloads"] == 1 and erased["submissions"] == 1
    mark = await conn.fetchrow("SELECT ai_result, ai_marked_at FROM submissions WHERE id = $1", a)
    assert tuple(mark) == (None, None)
    # The shared payload and d's half of the batch event stay.
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_payloads") == 1
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_event_feed "
                               "WHERE submission_id = $1", others[2]) > 0
    # The record: the id's hash, the counts, nothing else.
    record = await conn.fetchrow("SELECT subjects, via, counts::text FROM ai_marking_erasures")
    assert record["subjects"] == [hashlib.sha256(str(a).encode()).hexdigest()]
    assert json.loads(record["counts"]) == erased and record["via"] == "api"
    # The stats' counts agree with the rows left.
    counted = await conn.fetchval("SELECT coalesce(sum(n), 0) FROM ai_marking_counts")
    assert counted == await conn.fetchval("SELECT count(*) FROM ai_marking_queue")
    # The row in flight is gone, and its late result changes nothing.
    assert not await store.complete(Completed(in_flight.queue_id, in_flight.dispatch_seq,
                                              {"score": 1}, USAGE), plan_of())
    assert (await mentions(conn, a))["ai_marking_results"] == 0
    # Erasing again finds nothing, and says so.
    assert set((await store.erase([a], "api")).values()) == {0}


async def test_every_queue_table_that_could_name_a_submission_is_covered(
    conn: asyncpg.Connection
):
    tables = await queue_tables(conn)
    carriers = {t for t, cols in tables.items()
                if any(kind in CARRIERS or "submission" in name for name, kind in cols)}
    assert carriers, "the catalog query finds the queue tables"
    # A table not listed in records/erasure.py COVERAGE: say how erase (sql/erasure.sql) covers it.
    assert carriers - set(COVERAGE) == set()
    # Every table the erasure claims to clear exists, and answers in the API's counts.
    erased = {t for t, (how, _) in COVERAGE.items() if how == "erased"}
    assert erased <= set(tables)
    assert set(ANSWER_KEYS) == erased | {"submissions"}
    # A table with a column named for submissions is erased, never waved through.
    named = {t for t, cols in tables.items() if any("submission" in n for n, _ in cols)}
    assert named <= erased


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=0))
    async with app_client(app) as c:
        yield c


async def test_the_api_erases_a_row_in_flight_and_refuses_its_late_callback(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    a, b = await add_submissions(conn, 2, "hw-api")
    r = await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": "hw-api", "submission_ids": [str(a)]})
    assert r.status_code == 202 and function.call_count == 1
    sent = json.loads(function.calls.last.request.content)

    r = await client.delete(f"/api/marking/submissions/{a}", headers=AUTH)
    assert r.status_code == 200
    assert r.json()["erased"]["ai_marking_queue"] == 1
    assert set(r.json()["erased"]) == set(ANSWER_KEYS)

    late = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
            "status": "completed", "result": {"score": 3, "max_score": 10, "feedback": "f"}}
    r = await client.post("/webhooks/ai-mark", json=[late])
    assert r.json() == {"accepted": 0, "ignored": 1, "rejected": 0}
    assert await conn.fetchval("SELECT ai_result FROM submissions WHERE id = $1", a) is None
    assert {t: n for t, n in (await mentions(conn, a)).items() if n} == {}


async def test_the_api_answers_unknown_ids_with_zero_counts_and_needs_the_bearer(
    client: httpx.AsyncClient
):
    r = await client.delete(f"/api/marking/submissions/{uuid.uuid4()}", headers=AUTH)
    assert r.status_code == 200 and set(r.json()["erased"].values()) == {0}
    assert (await client.delete(f"/api/marking/submissions/{uuid.uuid4()}")).status_code == 401
    assert (await client.delete("/api/marking/submissions/nope", headers=AUTH)).status_code == 404


async def test_the_command_erases_an_assignment_and_prints_the_counts(
    store: Store, conn: asyncpg.Connection, db_url: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
):
    subs = await add_submissions(conn, 3, "hw-cli")
    [other] = await add_submissions(conn, 1, "hw-keep")
    await store.enqueue([*subs, other], "hw-cli", 0, {"rubric": "r"})
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("MARKING_QUEUE_SECRET", "cli-secret-0123456789abcdef")
    monkeypatch.setattr(logs, "setup", lambda: None)  # keep the session's logging as it is
    # The command runs its own event loop: off this test's loop, in a thread.
    code = await asyncio.to_thread(cli.main, ["erase", "--assignment", "hw-cli"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    # The host's three submissions, and `other`, enqueued under hw-cli.
    assert printed["erased"]["ai_marking_queue"] == 4
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    assert await conn.fetchval("SELECT cardinality(subjects) FROM ai_marking_erasures") == 4
    assert await asyncio.to_thread(cli.main, ["erase", "--submission", "nope"]) == 2


async def test_an_erasure_racing_a_result_leaves_no_mark_whichever_commits_first(
    db_url: str, conn: asyncpg.Connection
):
    # Two pools: the result and the erasure really run at once, on two connections.
    results = Store(await connect_pool(db_url, max_size=2))
    erasures = Store(await connect_pool(db_url, max_size=2))
    try:
        for _ in range(8):
            [sub] = await add_submissions(conn, 1, "hw-race")
            await results.enqueue([sub], "hw-race", 0, {})
            job = await claim(results)
            await asyncio.gather(
                settle_one(results,
                           Completed(job.queue_id, job.dispatch_seq, {"score": 1}, USAGE),
                           plan_of(CAP, THRESHOLD)),
                erasures.erase([sub], "api"))
            assert {t: n for t, n in (await mentions(conn, sub)).items() if n} == {}
            mark = await conn.fetchval("SELECT ai_marked_at FROM submissions WHERE id = $1", sub)
            assert mark is None
    finally:
        await results.close()
        await erasures.close()


async def test_a_settle_that_handed_out_an_erased_row_forgets_it(
    store: Store, conn: asyncpg.Connection
):
    a, b = await add_submissions(conn, 2, "hw-hand")
    await store.enqueue([a, b], "hw-hand", 0, {})
    first = await claim(store)
    applied, handed = await settle_one(store,
                                       Completed(first.queue_id, first.dispatch_seq, {"score": 1},
                                                 USAGE),
                                       plan_of(CAP, THRESHOLD))
    assert applied and handed is not None
    links = "SELECT count(*) FROM ai_marking_attempts WHERE next_queue_id = $1"
    assert await conn.fetchval(links, handed.queue_id) == 1
    await store.erase([handed.submission_id], "api")
    assert await conn.fetchval(links, handed.queue_id) == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == 1  # the other's


async def settle_chain(store: Store, conn: asyncpg.Connection, n: int) -> list[Any]:
    """n rows, each settle handing out the next: the jobs in the order they were claimed."""
    subs = await add_submissions(conn, n, "hw-chain")
    await store.enqueue(subs, "hw-chain", 0, {})
    jobs = [await claim(store)]
    for _ in range(n - 1):
        done = jobs[-1]
        applied, handed = await settle_one(
            store, Completed(done.queue_id, done.dispatch_seq, {"score": 1}, USAGE),
            plan_of(CAP, THRESHOLD))
        assert applied and handed is not None
        jobs.append(handed)
    return jobs


LINKS = ("SELECT queue_id, next_queue_id, handed_by FROM ai_marking_attempts "
         "WHERE kind = 'dispatch' ORDER BY id")


async def test_an_erased_rows_handing_line_loses_its_link_and_no_other_does(
    store: Store, conn: asyncpg.Connection
):
    """docs/performance.md: the claim names the row whose settle handed it out
    (handed_by), and an erasure clears that row's link by it, and the name on the
    line of the row the erased one handed out."""
    a, b, c, d = await settle_chain(store, conn, 4)
    before = [tuple(r) for r in await conn.fetch(LINKS)]
    assert before == [(a.queue_id, b.queue_id, None), (b.queue_id, c.queue_id, a.queue_id),
                      (c.queue_id, d.queue_id, b.queue_id), (d.queue_id, None, c.queue_id)]
    await store.erase([b.submission_id], "api")
    after = [tuple(r) for r in await conn.fetch(LINKS)]
    assert after == [(a.queue_id, None, None), (c.queue_id, d.queue_id, None),
                     (d.queue_id, None, c.queue_id)]


async def test_a_line_between_two_erased_rows_loses_both_ends(store: Store,
                                                             conn: asyncpg.Connection):
    """c was handed out by b and handed out d; b and d erased together leave c's
    line naming neither."""
    a, b, c, d, e = await settle_chain(store, conn, 5)
    await store.erase([b.submission_id, d.submission_id], "api")
    after = [tuple(r) for r in await conn.fetch(LINKS)]
    assert after == [(a.queue_id, None, None), (c.queue_id, None, None),
                     (e.queue_id, None, None)]


async def test_a_link_from_before_handed_by_is_still_found(store: Store,
                                                         conn: asyncpg.Connection):
    """A line a settle claimed before migration 0076 names no handing row: the
    erasure looks for it in the day before that claim."""
    a, b, c = await settle_chain(store, conn, 3)
    await conn.execute("UPDATE ai_marking_attempts SET handed_by = NULL")
    await store.erase([b.submission_id], "api")
    after = [tuple(r) for r in await conn.fetch(LINKS)]
    assert after == [(a.queue_id, None, None), (c.queue_id, None, None)]


async def test_erasure_takes_held_results_their_question_and_an_answer_only_they_asked(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    """docs/review-holds.md: the question goes with the result it came with; a teacher's
    answer goes when every submission that asked it is erased."""
    a, b = await add_submissions(conn, 2, "hw-held")
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-held", "submission_ids": [str(a), str(b)],
        "payload": {"rubric": "r", "max_score": 10}})
    assert r.status_code == 202
    while (await client.post("/api/marking/process-queue", headers=AUTH)).json()["claimed"]:
        pass
    sent = [json.loads(c.request.content) for c in function.calls]
    question = "Does the HELD-QUESTION-9 case count?"
    items = [{"queue_id": s["queue_id"], "token": s["callback_token"], "status": "completed",
              "result": {"score": 5, "max_score": 10},
              "review": {"reason": "clarification", "question": question}} for s in sent]
    assert (await client.post("/webhooks/ai-mark", json=items)).json()["accepted"] == 2
    listed = await client.get("/api/marking/review_needed",
                              params={"assignment_id": "hw-held"}, headers=AUTH)
    qid = listed.json()["questions"][0]["question_id"]
    r = await client.post("/api/marking/clarify", headers=AUTH, json={
        "assignment_id": "hw-held", "question_id": qid, "answer": "HELD-ANSWER-9: yes"})
    assert r.status_code == 202

    first = (await client.delete(f"/api/marking/submissions/{a}", headers=AUTH)).json()
    assert first["erased"]["ai_marking_holds"] == 1
    assert first["erased"]["ai_marking_answers"] == 0  # b asked it too
    second = (await client.delete(f"/api/marking/submissions/{b}", headers=AUTH)).json()
    assert second["erased"]["ai_marking_holds"] == 1
    assert second["erased"]["ai_marking_answers"] == 1
    for sub in (a, b):
        assert {t: n for t, n in (await mentions(conn, sub)).items() if n} == {}
    # The words are gone from every table that held them for these submissions.
    for table in ("ai_marking_holds", "ai_marking_results", "ai_marking_answers",
                  "ai_marking_outbox", "ai_marking_events"):
        assert await conn.fetchval(f"SELECT count(*) FROM {table} t WHERE strpos(t::text, $1) "
                                   "> 0 OR strpos(t::text, $2) > 0", "HELD-QUESTION",
                                   "HELD-ANSWER") == 0, table
