"""The estimate's time before any history (docs/concepts.md#an-estimate-first): from the
kind's own recent marks, else its expected_seconds, else unknown; after only its pool's
rows due now."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.queue.progress import eta_seconds
from aiqueue.settings import Settings
from aiqueue.settings.kinds import DEFAULT_POOL, Kind, Pool, QueueConfig
from aiqueue.web.app import create_app
from aiqueue.web.estimate import estimate_text
from aiqueue.wire.answers import EnqueueEstimate
from tests.conftest import AUTH, add_submissions, app_client, make_settings

FN = "http://127.0.0.1:9/unreachable"
CAP = 4


def settings(db_url: str, expected: float | None) -> Settings:
    """Kind `mark` (the default pool, cap 4) and kind `essay` in a pool of its own."""
    kinds = {"mark": Kind("mark", DEFAULT_POOL, function_url=FN, expected_seconds=expected),
             "essay": Kind("essay", "slow", function_url=FN)}
    return dataclasses.replace(make_settings(db_url, function_url=FN, max_in_flight=CAP),
                               queue_file=QueueConfig({"slow": Pool("slow", 1)}, kinds))


async def history(conn: asyncpg.Connection) -> None:
    """Essays took a minute each; 200 more wait in their pool; 50 short answers wait in
    the default pool until tomorrow.  No short answer has been marked yet."""
    for kind, pool, status, n, extra in (
            ("essay", "slow", "completed", 20, "started_at = now() - interval '61 seconds', "
                                               "finished_at = now() - interval '1 second'"),
            ("essay", "slow", "pending", 200, "run_after = now()"),
            ("mark", DEFAULT_POOL, "pending", 50,
             "not_before = now() + interval '1 day', run_after = now() + interval '1 day'")):
        ids = await add_submissions(conn, n, assignment_id=f"{kind}-{status}")
        await conn.execute(
            "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, kind, pool, "
            "status, turn) SELECT id, $2, gen_random_uuid(), $3, $4, $5, 1 "
            "FROM unnest($1::uuid[]) id", ids, f"{kind}-{status}", kind, pool, status)
        await conn.execute(f"UPDATE ai_marking_queue SET {extra} "  # noqa: S608 (constants)
                           "WHERE assignment_id = $1", f"{kind}-{status}")


async def dry_run(client: httpx.AsyncClient, ids: list[uuid.UUID], **extra: Any
                  ) -> dict[str, Any]:
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "quiz-1", "submission_ids": [str(i) for i in ids], "dry_run": True,
        **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_with_no_mark_of_the_kind_the_time_is_unknown(
        db_url: str, conn: asyncpg.Connection) -> None:
    await history(conn)
    ids = await add_submissions(conn, 30, assignment_id="quiz-1")
    async with app_client(create_app(settings(db_url, None))) as client:
        body = await dry_run(client, ids)
    # The essays' minute says nothing of a short answer's time.
    assert body["rows"] == 30 and body["eta_seconds"] is None
    assert estimate_text(EnqueueEstimate.model_validate(body)).endswith(
        "time shown after the first marks")


async def test_the_kinds_expected_seconds_after_its_own_pools_rows_due_now(
        db_url: str, conn: asyncpg.Connection) -> None:
    await history(conn)
    ids = await add_submissions(conn, 30, assignment_id="quiz-1")
    async with app_client(create_app(settings(db_url, 2.0))) as client:
        body = await dry_run(client, ids)
        # Not before an hour from now: the hour, then its own rows.
        later = await dry_run(client, ids, not_before=(
            datetime.now(UTC) + timedelta(hours=1)).isoformat())
    # Neither the other pool's 200 essays nor the 50 rows held until tomorrow run first.
    assert body["eta_seconds"] == eta_seconds(29, CAP, 2.0) == 16.0
    assert later["eta_seconds"] == pytest.approx(3600 + 16.0, abs=5)


async def test_a_calibration_times_only_its_first_rows(db_url: str,
                                                       conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 30, assignment_id="quiz-1")
    async with app_client(create_app(settings(db_url, 2.0))) as client:
        body = await dry_run(client, ids, calibrate={"rows": 4})
    # The other 26 wait for the teacher's release: only the 4 are timed.
    assert body["eta_seconds"] == eta_seconds(3, CAP, 2.0) == 2.0
