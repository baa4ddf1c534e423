"""The same answer through the real app (docs/same-answer.md): the 202, the dry run, the list,
a row's status, and no answer text in a table, a log or the export."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from aiqueue.web.app import create_app
from tests.conftest import AUTH, SECRET, app_client
from tests.integration.same_answer_kit import add, enqueue, settings_with
from tests.plans import plan_of

# Words no id, key or name of the queue could contain by chance.
ANSWERS = ["Quixotic Zebra", "quixotic  zebra.", "QUIXOTIC ZEBRA!", "Jovial Walrus",
           "jovial walrus"]


@pytest.fixture
async def client(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[httpx.AsyncClient]:
    # Nothing is dispatched by the app: the rows stay as the enqueue left them.  The
    # answers differ in case and a final stop: the kind's "loose" takes them as one.
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    async with app_client(create_app(settings_with(db_url, "loose"))) as c:
        yield c


async def test_the_202_and_the_dry_run_count_the_copies(
        client: httpx.AsyncClient, conn: asyncpg.Connection) -> None:
    ids = await add(conn, ANSWERS)
    dry = await enqueue(client, ids, dry_run=True)
    assert (dry["rows"], dry["same_answers"]) == (2, 3)
    each = await enqueue(client, ids, dry_run=True, same_answers="mark_each")
    assert (each["rows"], each["same_answers"]) == (5, 0)
    assert each["estimated_tokens"] == pytest.approx(dry["estimated_tokens"] * 5 / 2, abs=2)
    body = await enqueue(client, ids)
    assert (body["enqueued"], body["same_answers"]) == (5, 3)
    # A later answer of a live group is counted as a copy by the dry run too.
    more = await add(conn, ["quixotic zebra"])
    assert (await enqueue(client, more, dry_run=True))["rows"] == 0


async def test_mark_each_on_the_enqueue_groups_nothing(
        client: httpx.AsyncClient, conn: asyncpg.Connection) -> None:
    body = await enqueue(client, await add(conn, ANSWERS), same_answers="mark_each")
    assert body["same_answers"] == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE answer_key IS NOT NULL OR leader_id IS NOT NULL") == 0
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-s", "submission_ids": [str(uuid.uuid4())],
        "same_answers": "sometimes"})
    assert r.status_code == 422 and "same_answers" in r.text


async def test_the_list_and_the_status_name_the_leader(
        client: httpx.AsyncClient, conn: asyncpg.Connection) -> None:
    ids = await add(conn, ANSWERS[:3])
    await enqueue(client, ids)
    r = await client.get("/api/marking/queue?assignment_id=hw-s", headers=AUTH)
    items = r.json()["items"]
    leaders = [i for i in items if i["same_answer_as"] is None]
    assert len(leaders) == 1 and leaders[0]["waiting_for"] is None
    copies = [i for i in items if i["same_answer_as"] is not None]
    assert len(copies) == 2
    assert all(c["same_answer_as"] == leaders[0]["queue_id"] for c in copies)
    assert all(c["waiting_for"] == "same_answer" for c in copies)
    follower = next(i for i in copies)
    st = await client.get(f"/api/marking/submissions/{follower['submission_id']}/status",
                          headers=AUTH)
    assert st.json()["waiting_for"] == "same_answer"
    assert st.json()["same_answer_as"] == leaders[0]["queue_id"]


async def test_no_answer_text_in_a_table_a_log_or_the_export(
        client: httpx.AsyncClient, conn: asyncpg.Connection,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ids = await add(conn, ANSWERS)
    await enqueue(client, ids)
    await enqueue(client, ids, dry_run=True)
    needles = ["quixotic", "walrus"]
    tables = await conn.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname <> 'submissions'")
    assert len(tables) > 10
    for t in tables:
        text = await conn.fetchval(
            f"SELECT coalesce(string_agg(x::text, ' '), '') FROM {t['relname']} x")
        assert not any(n in text.lower() for n in needles), t["relname"]
    export = await client.get("/api/marking/export?assignment_id=hw-s", headers=AUTH)
    assert export.status_code == 200
    assert not any(n in export.text.lower() for n in needles)
    logged = " ".join(r.getMessage() for r in caplog.records).lower()
    assert "enqueue" in logged and not any(n in logged for n in needles)


async def test_the_teacher_page_says_how_many_others_share_the_answer(
        client: httpx.AsyncClient, conn: asyncpg.Connection) -> None:
    await enqueue(client, await add(conn, ANSWERS))
    page = "/results/assignments/hw-s"
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": page})
    assert r.status_code == 303
    text = (await client.get(page)).text
    assert text.count("same answer as 2 others") == 3
    assert text.count("same answer as 1 other<") == 2


async def test_each_copy_is_reviewed_on_its_own_and_its_row_names_the_leader(
        client: httpx.AsyncClient, conn: asyncpg.Connection, db_url: str) -> None:
    ids = await add(conn, ANSWERS[:3])
    await enqueue(client, ids)
    store = Store(await connect_pool(db_url, max_size=2))
    try:
        await conn.execute("UPDATE ai_queue_control SET paused = false")
        job = await store.claim(plan_of())
        assert job is not None and await store.claim(plan_of()) is None
        assert await store.complete(Completed(job.queue_id, job.dispatch_seq,
                                              {"score": 2, "max_score": 5}), plan_of())
    finally:
        await store.close()
    copies = [r["queue_id"] for r in await conn.fetch(
        "SELECT queue_id FROM ai_marking_queue WHERE leader_id = $1", job.queue_id)]
    assert len(copies) == 2
    r = await client.post(f"/api/marking/queue/{copies[0]}/revert", headers=AUTH)
    assert r.status_code == 200, r.text
    reviews = dict(await conn.fetch("SELECT queue_id, review FROM ai_marking_results"))
    assert reviews[copies[0]] == "reverted"
    assert reviews[copies[1]] != "reverted" and reviews[job.queue_id] != "reverted"
    marks = dict(await conn.fetch("SELECT id, ai_result::text FROM submissions "
                                  "WHERE id = ANY($1::uuid[])", ids))
    assert sum(m is None for m in marks.values()) == 1
    await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    page = await client.get(f"/ai-queue/rows/{copies[1]}")
    assert f'<a href="/ai-queue/rows/{job.queue_id}">' in page.text
