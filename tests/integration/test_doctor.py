"""The schema check (503 schema_behind), webhook probe items and the doctor's report, in-process
on the real PostgreSQL (the function side is a respx stand-in here; tests/e2e drive real ones)."""

from __future__ import annotations

import json
import logging
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import pytest
import respx

from aiqueue import runtime as runtime_module
from aiqueue.db.doctor import code_schema_version
from aiqueue.db.migrate import discover, migrate
from aiqueue.doctor.checks import check_schema
from aiqueue.doctor.report import Doctor
from aiqueue.tokens import Tokens
from aiqueue.web.app import create_app
from tests.conftest import AUTH, FN, SECRET, add_submissions, app_client, make_settings
from tests.integration.doctor_kit import checks, fake_function, knows_probes
from tests.roles import RuntimeDb

TOKENS = Tokens(SECRET)


def schema_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "aiqueue"]
    return [line for line in lines if "schema_behind" in (line.get("event"), line.get("code"))]


@pytest.mark.fresh_db
async def test_code_ahead_of_its_migration_answers_503_schema_behind_and_logs_once(
    db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    caplog.set_level(logging.INFO, logger="aiqueue")
    await migrate(db_url, "down")
    expected = code_schema_version()
    previous = int(discover()[-2].version.split("_")[0])
    app = create_app(make_settings(db_url))
    async with app_client(app) as client:
        answers = [await client.get("/api/marking/stats", headers=AUTH),
                   await client.post("/api/marking/enqueue", headers=AUTH, json={}),
                   await client.get("/healthz", headers=AUTH)]
        for r in answers:
            assert r.status_code == 503, r.text
            body = r.json()
            assert (body["error"], body["expected"], body["found"]) == (
                "schema_behind", expected, previous)
            assert "migrate up" in body["detail"] and r.headers["retry-after"]
        health = answers[-1].json()
        assert (health["status"], health["database"], health["schema"]) == (
            "schema_behind", True, {"expected": expected, "found": previous})
        # The public learn only that the app is up.
        public = await client.get("/healthz")
        assert (public.status_code, public.json()) == (200, {"status": "ok"})
        assert [(e["expected"], e["found"]) for e in schema_events(caplog)] == [
            (expected, previous)]
        # The doctor still answers, and says what to do.
        report = (await client.get("/api/marking/doctor", headers=AUTH)).json()
        schema = next(c for c in report["checks"] if c["name"] == "schema")
        assert schema["status"] == "fail" and "migrate up" in schema["fix"]
        # Migrated meanwhile: the instance notices on its next look, without a restart.
        await migrate(db_url, "up")
        monkeypatch.setattr(runtime_module, "SCHEMA_RECHECK_SECONDS", 0.0)
        assert (await client.get("/api/marking/stats", headers=AUTH)).status_code == 200
    assert len(schema_events(caplog)) == 1


async def test_the_schema_is_read_once_per_instance(db_url: str):
    app = create_app(make_settings(db_url))
    async with app_client(app) as client:
        assert (await client.get("/api/marking/stats", headers=AUTH)).status_code == 200
        rt = app.state.aiqueue.runtime
        reads = 0
        original = rt.store.schema_version

        async def counted() -> int:
            nonlocal reads
            reads += 1
            version: int = await original()
            return version

        rt.store.schema_version = counted
        for _ in range(5):
            assert (await client.get("/api/marking/stats", headers=AUTH)).status_code == 200
    assert rt.schema_ok and reads == 0


def probe_item(probe_id: UUID, status: str = "probe", **extra: Any) -> dict[str, Any]:
    return {"queue_id": str(probe_id), "token": TOKENS.probe(probe_id), "status": status,
            **extra}


async def snapshot(conn: asyncpg.Connection) -> list[Any]:
    return [await conn.fetch("SELECT * FROM ai_marking_queue ORDER BY queue_id"),
            await conn.fetch("SELECT id, ai_result, ai_marked_at FROM submissions ORDER BY id")]


async def test_probe_answers_touch_no_row_and_no_submission(
    db_url: str, conn: asyncpg.Connection, function: respx.Route
):
    ids = await add_submissions(conn, 2)
    app = create_app(make_settings(db_url))
    probe, old, greedy = uuid4(), uuid4(), uuid4()
    async with app_client(app) as client:
        await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-1", "submission_ids": [str(i) for i in ids]})
        before = await snapshot(conn)
        ok = await client.post("/webhooks/ai-mark", json=[
            probe_item(probe, probe={"function": "ai_mark", "version": "2026.11",
                                     "quote": "student text"}),
            probe_item(old, "failed", error="invalid_input"),
            probe_item(greedy, "completed", result={"score": 9, "feedback": "a quote"})])
        again = await client.post("/webhooks/ai-mark", json=probe_item(probe))
        forged = await client.post("/webhooks/ai-mark", json={
            **probe_item(probe), "token": TOKENS.probe(uuid4())})
        job_token = await client.post("/webhooks/ai-mark", json={
            **probe_item(probe), "token": TOKENS.callback(probe, 1, 1)})
        after = await snapshot(conn)
    assert ok.status_code == 200 and ok.json() == {"accepted": 3, "ignored": 0, "rejected": 0}
    assert again.json() == {"accepted": 0, "ignored": 1, "rejected": 0}
    assert forged.status_code == 401 and job_token.status_code == 401
    assert after == before
    rows = {r["probe_id"]: (r["answer"], json.loads(r["detail"])) for r in await conn.fetch(
        "SELECT probe_id, answer, detail FROM ai_marking_probes")}
    assert rows == {probe: ("probe", {"function": "ai_mark", "version": "2026.11"}),
                    old: ("failed", {"error": "function:invalid_input"}),
                    greedy: ("completed", {})}


def too_old(d: dict[str, Any]) -> dict[str, Any]:
    return {"queue_id": d["queue_id"], "token": d["callback_token"], "status": "failed",
            "error": "invalid_input", "retryable": False}


@pytest.mark.parametrize(("answer", "status", "expect"), [
    (knows_probes, 202, {"function": "pass", "probe": "pass"}),
    (too_old, 202, {"function": "pass", "probe": "fail"}),
    (knows_probes, 401, {"function": "fail", "probe": "skip"}),
])
async def test_the_doctor_endpoint(runtime_db: RuntimeDb, answer: Any, status: int,
                                   expect: dict[str, str]):
    app = create_app(make_settings(runtime_db.runtime_dsn, function_token="fn-token"))
    async with app_client(app) as client:
        with respx.mock(assert_all_called=False) as mock:
            mock.route(host="app.test").pass_through()
            route = mock.post(FN).mock(side_effect=fake_function(client, answer, status))
            anonymous = await client.get("/api/marking/doctor")
            r = await client.get("/api/marking/doctor", headers=AUTH)
    assert anonymous.status_code == 401
    assert r.status_code == 200
    got = checks(r.json())
    assert list(got) == ["settings", "database", "schema", "pooler", "listen", "lockdown",
                         "submissions", "role", "function", "probe", "vercel", "cron", "batch",
                         "prompt_cache", "partitions", "record"]
    assert {k: got[k][0] for k in expect} == expect
    assert got["prompt_cache"][:2] == ("pass", "pool default: no prompt prefixes in the last week")
    assert (got["vercel"][0], got["cron"][0], got["batch"][0]) == ("skip", "skip", "skip")
    assert {got[k][0] for k in ("settings", "database", "schema", "pooler", "listen",
                                "lockdown", "submissions", "role")} == {"pass"}
    assert r.json()["ok"] is (expect["probe"] == "pass")
    assert "prepared statements on (auto: a direct connection" in got["pooler"][1]
    assert route.calls.last.request.headers["authorization"] == "Bearer fn-token"
    if answer is too_old:
        assert "too old to know probes" in got["probe"][1]
        assert "nothing was marked" in got["probe"][1]
    if status == 401:
        assert "AI_MARKING_FUNCTION_TOKEN" in got["function"][1]


@pytest.mark.fresh_db
async def test_a_role_that_may_not_read_the_migrations_is_served_and_reported(
    db_url: str, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="aiqueue")
    role = f"aiqueue_limited_{uuid4().hex[:8]}"
    await conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        await conn.execute(f"GRANT SELECT ON ai_marking_queue TO {role}")
        limited = db_url.replace("postgres:@", f"{role}:@", 1)
        assert limited != db_url
        settings = make_settings(limited)
        rt = await runtime_module.Runtime.create(settings, limited)
        try:
            assert await rt.store.schema_version() is None
            await rt.require_schema()  # no check rather than no service
            assert rt.schema_ok
            doc = Doctor(settings, rt)
            await check_schema(doc)
        finally:
            await rt.close()
        schema = next(c for c in doc.report.checks if c.name == "schema")
        assert schema.status == "fail" and "aiqueue_migrations" in schema.detail
        assert any('"schema_unchecked"' in r.getMessage() for r in caplog.records)
    finally:
        await conn.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


@pytest.mark.fresh_db
async def test_the_lockdown_check_names_a_role_that_reaches_the_queue(
    db_url: str, conn: asyncpg.Connection
):
    role = f"aiqueue_public_{uuid4().hex[:8]}"
    await conn.execute(f"CREATE ROLE {role} NOLOGIN")
    try:
        app = create_app(make_settings(db_url))
        async with app_client(app) as client:
            before = checks((await client.get("/api/marking/doctor", headers=AUTH)).json())
            await conn.execute(f"GRANT SELECT ON ai_marking_queue TO {role}")
            after = checks((await client.get("/api/marking/doctor", headers=AUTH)).json())
            await migrate(db_url, "up")  # re-applies the lockdown
            mended = checks((await client.get("/api/marking/doctor", headers=AUTH)).json())
    finally:
        await conn.execute(f"REVOKE ALL ON ai_marking_queue FROM {role}")
        await conn.execute(f"DROP ROLE {role}")
    assert before["lockdown"][0] == "pass"
    status, detail, fix = after["lockdown"]
    assert status == "fail" and f"{role}: SELECT on table ai_marking_queue" in detail
    assert fix is not None and "migrate up" in fix
    assert mended["lockdown"][0] == "pass"
