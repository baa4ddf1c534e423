"""A rubric changes: re-mark what it changed (docs/remark.md), through the real app's
route and the Store's claim and settle (the marking function played by the test)."""

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

from aiqueue.db.store import Store
from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, enqueued, make_settings
from tests.integration.remark_kit import IN_FLIGHT, Model, no_mark_is_empty

P1 = {"rubric": "mentions light"}
P2 = {"rubric": "mentions light and chloroplasts"}
P3 = {"rubric": "mentions light, chloroplasts and water"}


@pytest.fixture
async def client(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[httpx.AsyncClient]:
    # The app dispatches nothing (paused); the test claims and settles as the function.
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    async with app_client(create_app(make_settings(db_url))) as c:
        yield c


def version(payload: dict[str, Any]) -> str:
    """The payload's version as PostgreSQL's jsonb text hashes it (keys here are one)."""
    return hashlib.sha256(json.dumps(payload, separators=(", ", ": ")).encode()).hexdigest()


async def marked_class(store: Store, conn: asyncpg.Connection, n: int = 30
                       ) -> list[uuid.UUID]:
    """n answers marked under P1."""
    ids = await add_submissions(conn, n)
    enqueued(await store.enqueue(ids, "hw-1", 0, P1))
    model = Model(store, conn, watch=False)
    while (job := await model.claim()) is not None:
        assert await model.answer(job)
    while model.pending:
        assert await model.answer(model.pending.pop())
    await no_mark_is_empty(conn)
    return ids


async def remark(client: httpx.AsyncClient, payload: dict[str, Any], status: int = 202,
                 **extra: Any) -> dict[str, Any]:
    r = await client.post("/api/marking/remark", headers=AUTH,
                          json={"assignment_id": "hw-1", "payload": payload, **extra})
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    return body


async def scores(conn: asyncpg.Connection) -> dict[uuid.UUID, Any]:
    rows = await conn.fetch("SELECT id, ai_result FROM submissions WHERE assignment_id = 'hw-1'")
    return {r["id"]: json.loads(r["ai_result"]) for r in rows}


async def accept_three(client: httpx.AsyncClient, conn: asyncpg.Connection) -> list[uuid.UUID]:
    rows = await conn.fetch("SELECT queue_id, submission_id FROM ai_marking_results "
                            "ORDER BY submission_id LIMIT 3")
    for k, r in enumerate(rows):
        body = {"result": {"score": 10, "max_score": 10}} if k == 0 else None
        got = await client.post(f"/api/marking/queue/{r['queue_id']}/accept", headers=AUTH,
                                json=body)
        assert got.status_code == 200, got.text
    return [r["submission_id"] for r in rows]


async def test_two_quick_edits_mark_27_answers_once_and_never_blank_a_mark(
        client: httpx.AsyncClient, store: Store, conn: asyncpg.Connection) -> None:
    ids = await marked_class(store, conn)
    reviewed = await accept_three(client, conn)
    before = await scores(conn)

    first = await remark(client, P2)
    assert (first["enqueued"], first["reviewed_kept"], first["unchanged"]) == (27, 3, 0)
    model = Model(store, conn)
    # The function takes as many rows of the first edit as the cap allows.
    in_flight = [j for _ in range(IN_FLIGHT) if (j := await model.claim()) is not None]
    assert len(in_flight) == IN_FLIGHT
    await asyncio.sleep(1)
    second = await remark(client, P3)
    assert (second["enqueued"], second["reviewed_kept"], second["superseded"]) == (
        27, 3, 27 - IN_FLIGHT)
    assert second["run_id"] == first["run_id"]
    superseded = await conn.fetch(
        "SELECT attempts, last_error FROM ai_marking_queue WHERE status = 'cancelled'")
    assert len(superseded) == 27 - IN_FLIGHT
    assert {(r["attempts"], r["last_error"]) for r in superseded} == {(0, "superseded")}
    await no_mark_is_empty(conn)

    # One in-flight result of the first edit lands early (applied, then replaced); the
    # other is held until its submission's mark under the second edit is in.
    early, late = in_flight
    assert await model.answer(early)
    while (job := await model.claim()) is not None:
        assert await model.answer(job)
    while model.pending:
        assert await model.answer(model.pending.pop())
    # Recorded (its row completes), not applied over the newer mark (checked below).
    assert await model.answer(late)

    by_rubric = {json.loads(p)["rubric"]: n for p, n in model.calls.items()}
    assert by_rubric[P3["rubric"]] == 27
    assert by_rubric.get(P2["rubric"], 0) <= IN_FLIGHT + 1
    after = await scores(conn)
    assert all(after[i] == before[i] for i in reviewed)
    for i in set(ids) - set(reviewed):
        assert json.loads(after[i]["rubric"]) == P3
    record = await conn.fetchrow(
        "SELECT applied, payload_version, function_version, provider, model "
        "FROM ai_marking_results WHERE queue_id = $1", late.queue_id)
    assert dict(record) == {"applied": False, "payload_version": version(P2),
                            "function_version": "fn-7", "provider": "sim", "model": "m-1"}
    finished = await conn.fetch("SELECT body FROM ai_marking_outbox "
                                "WHERE type = 'marking.run_finished' AND run_id = $1",
                                uuid.UUID(first["run_id"]))
    assert len(finished) == 1
    body = json.loads(finished[0]["body"])
    assert body["remark"] is True
    changed = sum(after[i]["score"] != before[i]["score"] for i in ids)
    assert body["changed"] == changed


async def test_unchanged_marks_are_left_and_the_dry_run_writes_nothing(
        client: httpx.AsyncClient, store: Store, conn: asyncpg.Connection) -> None:
    await marked_class(store, conn, 5)
    same = await remark(client, P1)
    assert (same["enqueued"], same["unchanged"], same["run_id"]) == (0, 5, None)
    dry = await remark(client, P2, 200, dry_run=True)
    assert (dry["enqueued"], dry["rows"], dry["unchanged"], dry["lane"]) == (5, 5, 0, "live")
    assert dry["estimated_tokens"] > 0 and dry["eta_seconds"] is not None
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE status = 'pending'") == 0
    everything = await remark(client, P2, include_reviewed=True, debounce_seconds=0)
    assert everything["enqueued"] == 5


@pytest.mark.parametrize("body", [
    {"assignment_id": "hw-1"},
    {"assignment_id": "hw-1", "payload": []},
    {"assignment_id": "hw-1", "payload": {}, "debounce_seconds": -1},
    {"assignment_id": "hw-1", "payload": {}, "include_reviewed": "yes"},
    {"assignment_id": "hw-1", "payload": {}, "colour": "red"},
    {"payload": {}},
])
async def test_a_bad_body_is_a_422_and_changes_nothing(
        client: httpx.AsyncClient, conn: asyncpg.Connection, body: dict[str, Any]) -> None:
    r = await client.post("/api/marking/remark", headers=AUTH, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_remarks") == 0


async def test_without_the_bearer_it_is_a_401(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/marking/remark", json={"assignment_id": "a", "payload": {}})
    assert r.status_code == 401


async def test_every_result_says_its_payload_version(
        client: httpx.AsyncClient, store: Store, conn: asyncpg.Connection) -> None:
    ids = await marked_class(store, conn, 2)
    queue_id = await conn.fetchval("SELECT queue_id FROM ai_marking_results "
                                   "WHERE submission_id = $1", ids[0])
    detail = (await client.get(f"/api/marking/rows/{queue_id}", headers=AUTH)).json()
    assert detail["result"]["payload_version"] == detail["payload_version"] == version(P1)
    history = (await client.get(f"/api/marking/submissions/{ids[0]}/results",
                                headers=AUTH)).json()["items"]
    assert [(h["payload_version"], h["applied"]) for h in history] == [(version(P1), True)]
    export = await client.get("/api/marking/export?format=jsonl", headers=AUTH)
    results = [json.loads(line) for line in export.text.splitlines()
               if json.loads(line)["record"] == "result"]
    assert {(r["payload_version"], r["function_version"], r["provider"]) for r in results} \
        == {(version(P1), "fn-7", "sim")}
    # A row of the new payload that fails: its notification names that payload.
    await remark(client, P2)
    pending = await conn.fetchval("SELECT queue_id FROM ai_marking_queue "
                                  "WHERE status = 'pending' LIMIT 1")
    r = await client.post(f"/api/marking/rows/{pending}/fail", headers=AUTH,
                          json={"note": "test"})
    assert r.status_code == 200, r.text
    body = json.loads(await conn.fetchval(
        "SELECT body FROM ai_marking_outbox WHERE type = 'marking.row_failed'"))
    assert body["payload_version"] == version(P2)


@pytest.mark.store_pool(4)
async def test_two_edits_at_once_take_turns_and_the_later_one_wins(
        client: httpx.AsyncClient, store: Store, conn: asyncpg.Connection) -> None:
    await marked_class(store, conn, 5)
    answers = await asyncio.gather(remark(client, P2), remark(client, P3))
    assert sorted(a["enqueued"] for a in answers) == [5, 5]
    assert sorted(a["superseded"] for a in answers) == [0, 5]
    live = await conn.fetch(
        "SELECT p.payload::text AS payload, count(*) AS n FROM ai_marking_queue q "
        "JOIN ai_marking_payloads p ON p.id = q.payload_id WHERE q.status = 'pending' "
        "GROUP BY 1")
    assert len(live) == 1 and live[0]["n"] == 5
    later = answers[0] if answers[0]["superseded"] else answers[1]
    current = await conn.fetchval("SELECT p.payload::text FROM ai_marking_remarks r "
                                  "JOIN ai_marking_payloads p ON p.id = r.payload_id "
                                  "ORDER BY r.id DESC LIMIT 1")
    assert live[0]["payload"] == current
    assert later["run_id"] is not None


async def test_the_current_payload_is_the_newest_edits(
        client: httpx.AsyncClient, store: Store, conn: asyncpg.Connection) -> None:
    assert await store.current_payload("hw-1") is None
    await marked_class(store, conn, 2)
    assert await store.current_payload("hw-1") == P1
    await remark(client, P2)
    await remark(client, P3)
    assert await store.current_payload("hw-1") == P3
