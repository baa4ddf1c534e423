"""Replay by filter and the audit export through the app and a real PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from aiqueue_client import AsyncMarkingClient

from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings

ANSWER = "the student's answer"
FEEDBACK = "feedback only the teacher reads"


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    # Paused: nothing is dispatched, so the rows stay as the test puts them.
    app = create_app(make_settings(db_url, max_in_flight=0))
    async with app_client(app) as c:
        yield c


async def rows_in(conn: asyncpg.Connection, assignment: str, n: int, status: str,
                  error: str | None = None, finished: datetime | None = None
                  ) -> list[uuid.UUID]:
    """n rows of `assignment` in `status` (as a run would leave them), one per submission."""
    ids = await add_submissions(conn, n, assignment, ANSWER)
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, attempts, "
        "last_error, finished_at) SELECT id, $2, gen_random_uuid(), $3, 3, $4, "
        "coalesce($5, now()) FROM unnest($1::uuid[]) id", ids, assignment, status, error,
        finished)
    return ids


async def statuses(conn: asyncpg.Connection, assignment: str) -> dict[str, int]:
    rows = await conn.fetch("SELECT status, count(*) AS n FROM ai_marking_queue "
                            "WHERE assignment_id = $1 GROUP BY status", assignment)
    return {r["status"]: r["n"] for r in rows}


async def replay(client: httpx.AsyncClient, body: dict[str, Any],
                 key: str | None = None) -> httpx.Response:
    headers = {**AUTH, **({"idempotency-key": key} if key else {})}
    return await client.post("/api/marking/replay", headers=headers, json=body)


async def test_a_replay_moves_only_matching_failed_rows_and_never_a_completed_one(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    await rows_in(conn, "hw-r", 3, "failed", "model_timeout")
    await rows_in(conn, "hw-r", 2, "failed", "rate_limited")
    await rows_in(conn, "hw-r", 2, "completed")
    await rows_in(conn, "hw-other", 2, "failed", "model_timeout")
    old = datetime.now(UTC) - timedelta(days=3)
    await rows_in(conn, "hw-old", 1, "failed", "model_timeout", finished=old)

    r = await replay(client, {"filter": {"assignment_id": "hw-r", "error": "model_timeout"}})
    assert r.status_code == 200 and r.json() == {"matched": 3, "replayed": 3}
    assert await statuses(conn, "hw-r") == {"pending": 3, "failed": 2, "completed": 2}
    fresh = await conn.fetch("SELECT queue_id, attempts, last_error FROM ai_marking_queue "
                             "WHERE status = 'pending'")
    assert {(f["attempts"], f["last_error"]) for f in fresh} == {(0, None)}
    # Each moved row has its live event, and the stats' counts follow (written set-based).
    feed = await conn.fetch("SELECT queue_id FROM ai_marking_event_feed WHERE status = 'pending'")
    assert sorted(f["queue_id"] for f in feed) == sorted(f["queue_id"] for f in fresh)
    counted = await conn.fetch("SELECT status, sum(n)::int AS n FROM ai_marking_counts "
                               "GROUP BY status HAVING sum(n) <> 0")
    actual = await conn.fetch("SELECT status, count(*)::int AS n FROM ai_marking_queue "
                              "GROUP BY status")
    assert {tuple(r) for r in counted} == {tuple(r) for r in actual}
    # A time window: only the row that failed before yesterday.
    r = await replay(client, {"filter": {"failed_before": (old + timedelta(days=1)).isoformat()}})
    assert r.json() == {"matched": 1, "replayed": 1}
    # A group (by default its assignment), and the rows that failed after a moment.
    r = await replay(client, {"filter": {"group": "hw-other"}, "dry_run": True})
    assert r.json()["matched"] == 2
    since = (old + timedelta(days=1)).isoformat()
    r = await replay(client, {"filter": {"failed_after": since}, "dry_run": True})
    assert r.json()["matched"] == 4  # hw-r's two rate_limited rows and hw-other's two
    # Everything else that failed; completed rows are never touched.
    r = await replay(client, {"filter": {}})
    assert r.json() == {"matched": 4, "replayed": 4}
    assert await statuses(conn, "hw-r") == {"pending": 5, "completed": 2}
    assert (await replay(client, {"filter": {"kind": "essay"}})).json()["matched"] == 0


async def test_a_dry_run_counts_and_writes_nothing(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    await rows_in(conn, "hw-d", 4, "failed", "model_timeout")
    before = await conn.fetchval("SELECT count(*) FROM ai_marking_attempts")
    r = await replay(client, {"filter": {"assignment_id": "hw-d"}, "dry_run": True})
    assert r.json() == {"matched": 4, "replayed": 0, "dry_run": True, "would_replay": 4}
    assert await statuses(conn, "hw-d") == {"failed": 4}
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_attempts") == before


async def test_pressed_twice_with_one_key_it_replays_once(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    await rows_in(conn, "hw-k", 2, "failed", "model_timeout")
    body = {"filter": {"assignment_id": "hw-k"}}
    first = await replay(client, body, key="press-1")
    # The rows fail again meanwhile: a second press with the key must not move them.
    await conn.execute("UPDATE ai_marking_queue SET status = 'failed' WHERE assignment_id = 'hw-k'")
    second = await replay(client, body, key="press-1")
    assert first.json() == second.json() == {"matched": 2, "replayed": 2}
    assert second.headers["idempotent-replayed"] == "true"
    assert await statuses(conn, "hw-k") == {"failed": 2}
    retries = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts WHERE outcome = 'retry'")
    assert retries == 2
    other = await replay(client, {"filter": {"assignment_id": "hw-x"}}, key="press-1")
    assert other.status_code == 422 and other.json()["error"] == "idempotency_key_reused"


@pytest.mark.parametrize("body", [
    [], {"filter": []}, {"filter": {"colour": "red"}}, {"filter": {"kind": "Essay!"}},
    {"dry_run": "yes"}, {"filter": {"failed_after": "yesterday"}},
    {"filter": {"failed_after": "2026-01-02T00:00:00Z", "failed_before": "2026-01-01T00:00:00Z"}},
    {"filter": {"failed_after": "0001-01-01T00:00:00+05:00"}},
    {"filter": {"failed_before": "9999-12-31T23:59:59-05:00"}},
    {"filter": {"failed_after": "0001-01-01", "failed_before": "9999-12-31"}},
])
async def test_a_bad_replay_body_is_refused_and_changes_nothing(
    client: httpx.AsyncClient, body: Any
):
    r = await replay(client, body)
    assert r.status_code == 422 and r.json()["error"] == "invalid"


async def marked_rows(conn: asyncpg.Connection, n: int) -> list[uuid.UUID]:
    """n completed rows, each with a dispatch attempt and an applied result with feedback."""
    ids = await rows_in(conn, "hw-x", n, "completed")
    await conn.execute(
        "INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, ended_at, outcome,"
        " usage) SELECT queue_id, 1, 1, now(), 'completed', "
        "'{\"model\": \"m\", \"prompt_tokens\": 10, \"completion_tokens\": 5, \"cost_usd\": 0.5}'"
        " FROM ai_marking_queue WHERE assignment_id = 'hw-x'")
    await conn.execute(
        "INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, result,"
        " model, prompt_tokens, completion_tokens, cost_usd) SELECT queue_id, submission_id,"
        " assignment_id, run_id,"
        " jsonb_build_object('score', 7, 'max_score', 10, 'feedback', $1::text), 'm', 10, 5,"
        " 0.5 FROM ai_marking_queue WHERE assignment_id = 'hw-x'", FEEDBACK)
    return ids


async def test_the_export_streams_every_attempt_and_result_without_content(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    n = 2500  # more than one keyset page of each
    await marked_rows(conn, n)
    r = await client.get("/api/marking/export", headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert ANSWER not in r.text and FEEDBACK not in r.text
    lines = list(csv.DictReader(io.StringIO(r.text)))
    assert len(lines) == 2 * n
    assert {line["record"] for line in lines} == {"attempt", "result"}
    results = [line for line in lines if line["record"] == "result"]
    assert len({line["queue_id"] for line in results}) == n
    assert {(line["score"], line["max_score"], line["cost_usd"]) for line in results} == {
        ("7", "10", "0.5")}
    assert "feedback" not in lines[0]

    r = await client.get("/api/marking/export",
                         params={"format": "jsonl", "include": "feedback"}, headers=AUTH)
    docs = [json.loads(line) for line in r.text.splitlines()]
    assert len(docs) == 2 * n and ANSWER not in r.text
    assert {d["feedback"] for d in docs if d["record"] == "result"} == {FEEDBACK}
    # A period with nothing in it: a header only.
    r = await client.get("/api/marking/export", headers=AUTH,
                         params={"from": "2020-01-01", "to": "2020-02-01"})
    assert r.text.count("\r\n") == 1


@pytest.mark.parametrize("params", [
    {"format": "xml"}, {"include": "answers"}, {"from": "tuesday"},
    {"from": "2026-02-01", "to": "2026-01-01"},
    # Extreme dates: an offset or the default 30 days would leave Python's years.
    {"to": "0001-01-05"}, {"from": "0001-01-01T00:00:00+05:00"},
    {"to": "9999-12-31T23:59:59-05:00"}, {"from": "0001-01-01", "to": "9999-12-31"},
])
async def test_a_bad_export_query_is_refused(client: httpx.AsyncClient, params: dict[str, str]):
    r = await client.get("/api/marking/export", headers=AUTH, params=params)
    assert r.status_code == 422 and r.json()["error"] == "invalid"


async def test_the_new_routes_need_the_bearer(client: httpx.AsyncClient):
    assert (await client.get("/api/marking/export")).status_code == 401
    assert (await client.post("/api/marking/replay", json={})).status_code == 401


async def test_the_python_client_replays_exports_and_erases(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    [failed] = await rows_in(conn, "hw-c", 1, "failed", "model_timeout")
    await marked_rows(conn, 3)
    kit = AsyncMarkingClient(http=client)
    kit.http.headers.update(AUTH)
    assert await kit.replay(dry_run=True, assignment_id="hw-c") == {
        "matched": 1, "replayed": 0, "dry_run": True, "would_replay": 1}
    assert await kit.replay(assignment_id="hw-c") == {"matched": 1, "replayed": 1}
    text = b"".join([chunk async for chunk in kit.export(format="jsonl")]).decode()
    assert len(text.splitlines()) == 6 + 1  # 3 attempts, 3 results, the replay's action line
    erased = await kit.erase(failed)
    assert erased["erased"]["ai_marking_queue"] == 1
