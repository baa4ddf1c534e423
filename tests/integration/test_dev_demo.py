"""The dev command's demo data and defaults."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.dev import demo
from aiqueue.dev.defaults import DEV_STUCK_AFTER_SECONDS, dev_secret, dev_settings, load_dev
from aiqueue.settings import load_settings


async def test_seeding_twice_changes_nothing(store: Store, conn: asyncpg.Connection):
    assert await demo.seed(store) == len(demo.ANSWERS)
    before = await conn.fetch("SELECT id, student_name, content, created_at FROM submissions "
                              "ORDER BY id")
    assert await demo.seed(store) == 0
    after = await conn.fetch("SELECT id, student_name, content, created_at FROM submissions "
                             "ORDER BY id")
    assert before == after and len(after) == len(demo.ANSWERS) >= 25
    assert {r["id"] for r in after} == {demo.submission_id(i) for i in range(len(demo.ANSWERS))}
    info = await conn.fetchrow("SELECT title, payload::text AS payload FROM "
                               "ai_marking_assignments WHERE assignment_id = $1",
                               demo.ASSIGNMENT_ID)
    assert info["title"] == demo.TITLE and json.loads(info["payload"]) == demo.payload()
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_assignments") == 1


async def test_seeding_keeps_marks_already_made(store: Store, conn: asyncpg.Connection):
    await demo.seed(store)
    await conn.execute("UPDATE submissions SET ai_result = '{\"score\": 2}'")
    await demo.seed(store)
    assert await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NULL") == 0


@pytest.mark.fresh_db
async def test_seeding_works_without_a_student_name_column(
    store: Store, conn: asyncpg.Connection
):
    await conn.execute("ALTER TABLE submissions DROP COLUMN student_name")
    assert await demo.seed(store) == len(demo.ANSWERS)
    rows = await store.submission_results(demo.ASSIGNMENT_ID, 100)
    assert len(rows) == len(demo.ANSWERS) and all(r.student_name is None for r in rows)


def test_the_demo_rubric_is_what_the_reference_function_accepts():
    from functions.ai_mark.job import parse_dispatch

    dispatch = {
        "queue_id": "q", "submission_id": str(demo.submission_id(0)),
        "assignment_id": demo.ASSIGNMENT_ID, "attempt": 1, "callback_url": "http://x/",
        "callback_token": "t", "payload": demo.payload(),
        "submission": {"id": str(demo.submission_id(0)), "assignment_id": demo.ASSIGNMENT_ID,
                       "content": demo.ANSWERS[0][1]},
    }
    job = parse_dispatch(dispatch)
    assert len(job.criteria) == len(demo.RUBRIC) and job.max_score == demo.MAX_SCORE


def test_dev_defaults_point_at_the_bundled_function_and_keep_the_secret(tmp_path: Path):
    env: dict[str, str] = {}
    settings = load_settings(env, port=9100)
    assert settings.secret_generated
    path = tmp_path / "dev-secret"
    first = dev_secret(path)
    assert dev_secret(path) == first and len(first) >= 16
    assert path.stat().st_mode & 0o077 == 0
    dev = dev_settings(settings, env, 9101, path)
    assert dev.queue_secret == dev.admin_password == first
    assert dev.function_url == "http://127.0.0.1:9101/"
    assert dev.callback_url == "http://127.0.0.1:9100/webhooks/ai-mark"
    assert dev.stuck_after_seconds == DEV_STUCK_AFTER_SECONDS
    chosen = {"AI_MARKING_FUNCTION_URL": "http://fn.test/", "QUEUE_STUCK_AFTER_SECONDS": "900",
              "MARKING_QUEUE_SECRET": "chosen-secret-0123456789"}
    kept = load_dev(chosen, 9100, 9101, tmp_path / "unused")
    assert kept.function_url == "http://fn.test/" and kept.stuck_after_seconds == 900
    assert kept.queue_secret == kept.admin_password == "chosen-secret-0123456789"
    assert not (tmp_path / "unused").exists()
