"""Drift canaries through the real app and PostgreSQL (docs/canaries.md).

The marking function is a respx route that acknowledges dispatches; the tests
answer its canary dispatches through the webhook as a model would: the same
marks as the reviewed history's model, or half of them 4 points off.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.doctor.checks import check_canaries
from aiqueue.doctor.report import Doctor
from aiqueue.runtime import Runtime
from aiqueue.settings import ModelPrice
from aiqueue.web.app import create_app
from tests.conftest import AUTH, SECRET, add_submissions, app_client
from tests.integration.calibration_kit import drain, statuses
from tests.integration.canary_kit import (
    ai_score,
    answer_canaries,
    canary_calls,
    canary_settings,
    marking_calls,
    marks_of,
    reviewed_history,
    webhook,
)


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(create_app(canary_settings(db_url))) as c:
        yield c


async def runs(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    r = await client.get("/api/marking/canary?kind=mark", headers=AUTH)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    items: list[dict[str, Any]] = body["items"]
    return items


async def drift_alerts(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    found: list[asyncpg.Record] = await conn.fetch(
        "SELECT * FROM ai_queue_alerts WHERE alert = 'drift' ORDER BY id")
    return found


async def cron(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/marking/process-queue", headers=AUTH)
    assert r.status_code == 200, r.text


async def test_a_model_swap_opens_a_drift_on_its_first_results_canary_and_gates_enqueues(
        client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any) -> None:
    await reviewed_history(client, conn, function)
    # The yardstick: a canary of the model the teachers reviewed.
    r = await client.post("/api/marking/canary/mark/run", headers=AUTH)
    assert r.status_code == 202, r.text
    first = r.json()
    assert first["trigger"] == "manual" and first["rows"] == 10 and first["lane"] == "live"
    sent = canary_calls(function)
    # Spread across the three assignments, each under its own payload, with a canary token.
    assert len(sent) == 10 and len({b["assignment_id"] for b in sent}) == 3
    answered, exact = await answer_canaries(client, function, "m-1")
    assert answered == 10 and exact >= 0.6
    yard = (await runs(client))[0]
    assert yard["passed"] is True and yard["model"] == "m-1"
    assert yard["exact"] == pytest.approx(exact)
    before = await marks_of(conn)
    results = await conn.fetchval("SELECT count(*) FROM ai_marking_results")
    outbox = [r["id"] for r in await conn.fetch("SELECT id FROM ai_marking_outbox")]

    # The provider swaps the model: the first result that reports it starts a canary.
    [sub] = await add_submissions(conn, 1, "hw-9", content="answer 99")
    r = await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": "hw-9", "submission_ids": [str(sub)]})
    await drain(client)
    [job] = marking_calls(function)
    function.calls.clear()
    assert (await webhook(client, job, ai_score("answer 99"), "m-2")).json()["accepted"] == 1
    before[sub] = (await marks_of(conn))[sub]
    results += 1
    await cron(client)
    latest = (await runs(client))[0]
    assert latest["trigger"] == "model_change" and latest["model"] == "m-2"
    assert latest["state"] == "running"
    # It marks half the answers 4 points off: the drift alert opens, signed in the outbox.
    answered, drifted = await answer_canaries(client, function, "m-2", off=4)
    assert answered == 10 and drifted < exact - 0.1
    latest = (await runs(client))[0]
    assert latest["passed"] is False and latest["exact"] == pytest.approx(drifted)
    assert latest["yardstick"]["exact"] == pytest.approx(exact)
    [alert] = await drift_alerts(conn)
    assert alert["kind"] == "mark" and alert["resolved_at"] is None
    assert alert["value"] == pytest.approx(max(exact - drifted, yard["qwk"] - latest["qwk"]))
    event = json.loads(await conn.fetchval(
        "SELECT body::text FROM ai_marking_outbox WHERE type = 'marking.alert_opened'"))
    assert event["alert"] == "drift" and event["kind"] == "mark" and event["model"] == "m-2"
    assert event["exact"] == pytest.approx(drifted)
    assert event["yardstick"]["exact"] == pytest.approx(exact)
    # No canary result was applied, listed or notified as a mark.
    assert await marks_of(conn) == before
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == results
    new = {(r["type"], r["assignment_id"]) for r in await conn.fetch(
        "SELECT type, assignment_id FROM ai_marking_outbox WHERE id <> ALL ($1::uuid[])",
        outbox)}
    assert new == {("marking.alert_opened", ""), ("marking.run_finished", "hw-9")}

    # /ai-queue shows the kind's last canary and the open drift.
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    assert r.status_code == 303
    page = (await client.get("/ai-queue")).text
    assert 'data-canary="mark" data-state="drift"' in page and 'data-drift="mark"' in page
    assert "m-2" in page and "secret words" not in page

    # The next enqueue of the kind is gated: 5 calibration rows go, the rest wait.
    subs = await add_submissions(conn, 12, "hw-10")
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-10", "submission_ids": [str(s) for s in subs]})
    assert r.status_code == 202, r.text
    await drain(client)
    assert len(marking_calls(function)) == 5
    assert (await statuses(conn)).get("pending") == 7
    function.calls.clear()

    # An operator accepts the drift: that canary is the yardstick, the gate is gone.
    r = await client.post("/api/marking/canary/mark/accept", headers=AUTH, json={})
    assert r.status_code == 200, r.text
    assert r.json()["run_id"] == latest["run_id"] and r.json()["accepted_at"]
    [alert] = await drift_alerts(conn)
    assert alert["resolved_at"] is not None
    assert (await client.post("/api/marking/canary/mark/accept", headers=AUTH)).status_code \
        == 409
    subs = await add_submissions(conn, 6, "hw-11", content="another answer")
    await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-11", "submission_ids": [str(s) for s in subs]})
    await drain(client)
    assert len(marking_calls(function)) == 6


async def test_an_unchanged_model_over_30_scheduled_canaries_opens_no_drift(
        client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any) -> None:
    await reviewed_history(client, conn, function)
    before = await marks_of(conn)
    results = await conn.fetchval("SELECT count(*) FROM ai_marking_results")
    figures = set()
    for _ in range(30):
        # The schedule comes due: every run so far started a day ago.
        await conn.execute("UPDATE ai_marking_canary_runs SET started_at = started_at - "
                           "interval '1 day'")
        await cron(client)
        answered, exact = await answer_canaries(client, function, "m-1")
        assert answered == 10
        figures.add(round(exact, 9))
    done = [r for r in await runs(client) if r["state"] == "finished"]
    assert len(done) == 30 and {r["trigger"] for r in done} == {"schedule"}
    assert all(r["passed"] for r in done)
    assert {round(r["exact"], 9) for r in done} == figures and len(figures) == 1
    assert await drift_alerts(conn) == []
    assert await marks_of(conn) == before
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == results
    # Their cost is a lane of its own in the usage report: 300 canary rows of 120 tokens.
    r = await client.get("/api/marking/usage?by=lane", headers=AUTH)
    lanes = {i["key"]: i for i in r.json()["items"]}
    assert lanes["canary"]["jobs"] == 300 and lanes["canary"]["prompt_tokens"] == 30_000
    assert lanes["live"]["jobs"] == results
    # ... and on the cost card.
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    page = (await client.get("/ai-queue")).text
    assert "Lane: drift canaries" in page


async def test_the_routes_refuse_what_they_cannot_do(
        client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any) -> None:
    assert (await client.get("/api/marking/canary")).status_code == 401
    assert (await client.post("/api/marking/canary/essay/run", headers=AUTH)).status_code \
        == 404
    assert (await client.post("/api/marking/canary/mark/run", headers=AUTH,
                              json={"rows": 3})).status_code == 422
    # Nothing reviewed yet: the run is skipped and says so.
    r = await client.post("/api/marking/canary/mark/run", headers=AUTH)
    assert r.status_code == 202 and r.json()["state"] == "skipped"
    assert "no reviewed results" in r.json()["skipped"]
    await reviewed_history(client, conn, function)
    assert (await client.post("/api/marking/canary/mark/run", headers=AUTH)).status_code \
        == 202
    assert (await client.post("/api/marking/canary/mark/run", headers=AUTH)).status_code \
        == 409
    assert (await client.post("/api/marking/canary/mark/accept", headers=AUTH)).status_code \
        == 409


async def test_the_doctor_names_a_canary_kind_with_too_few_reviewed_results(
        db_url: str, client: httpx.AsyncClient, conn: asyncpg.Connection,
        function: Any) -> None:
    await reviewed_history(client, conn, function, assignments=1, each=4)
    found = {}
    for rows in (10, 4):
        settings = canary_settings(db_url, rows=rows)
        rt = await Runtime.create(settings, db_url)
        try:
            doc = Doctor(settings, rt, schema_current=True)
            await check_canaries(doc)
        finally:
            await rt.close()
        [line] = doc.report.checks
        found[rows] = line
    assert found[10].name == "canary:mark" and found[10].status == "warn"
    assert "kind mark declares a canary of 10 rows but has 4" in found[10].detail
    assert found[10].fix is not None and "kinds.mark.canary.rows" in found[10].fix
    assert found[4].status == "pass"


async def test_a_new_function_version_starts_one_canary(
        client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any) -> None:
    await reviewed_history(client, conn, function)
    assert (await client.post("/api/marking/canary/mark/run", headers=AUTH)).status_code == 202
    await answer_canaries(client, function, "m-1")
    # The same model behind a new prompt: the function says so in its usage.
    for n in range(2):
        [sub] = await add_submissions(conn, 1, f"hw-v{n}", content=f"version {n}")
        await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": f"hw-v{n}", "submission_ids": [str(sub)]})
        await drain(client)
        [job] = marking_calls(function)
        function.calls.clear()
        r = await webhook(client, job, 3, "m-1", function_version="prompt-v2")
        assert r.json()["accepted"] == 1
        await cron(client)
        if n == 0:
            latest = (await runs(client))[0]
            assert latest["trigger"] == "model_change"
            assert (latest["model"], latest["function_version"]) == ("m-1", "prompt-v2")
            await answer_canaries(client, function, "m-1")
    # One canary for the new version: the second result of it starts none.
    found = [r["trigger"] for r in await runs(client) if r["state"] != "skipped"]
    assert found == ["model_change", "manual"]
    assert canary_calls(function) == []


async def test_a_live_canary_waits_at_the_back_of_the_fair_turns(
        client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any) -> None:
    await reviewed_history(client, conn, function)
    subs = await add_submissions(conn, 5, "hw-now", content="due answer")
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-now", "submission_ids": [str(s) for s in subs]})
    assert r.status_code == 202
    # Students' rows are due: the canary starts but sends nothing yet.
    assert (await client.post("/api/marking/canary/mark/run", headers=AUTH)).status_code == 202
    assert canary_calls(function) == []
    await drain(client)
    assert len(marking_calls(function)) == 5
    # Nothing of the pool is due any more: the next look sends the canary's rows.
    await cron(client)
    assert len(canary_calls(function)) == 10


@pytest.mark.parametrize(("share", "skipped"), [(0.02, True), (1.0, False)])
async def test_a_canary_over_its_share_of_the_kinds_spend_is_skipped_and_says_so(
        db_url: str, conn: asyncpg.Connection, function: Any, share: float,
        skipped: bool) -> None:
    # Priced marking: 15 results; a canary of 10 would cost two thirds of their spend.
    settings = canary_settings(db_url, max_share=share).with_overrides(
        model_prices={"m-1": ModelPrice(input=1.0, output=2.0)})
    async with app_client(create_app(settings)) as client:
        await reviewed_history(client, conn, function)
        r = await client.post("/api/marking/canary/mark/run", headers=AUTH)
        assert r.status_code == 202, r.text
        run = r.json()
    if skipped:
        assert run["state"] == "skipped" and run["rows"] == 0 and run["passed"] is None
        assert run["skipped"].startswith("max_share:") and "(max 2.00 %)" in run["skipped"]
        assert canary_calls(function) == []
    else:
        assert run["state"] == "running" and run["rows"] == 10
        assert len(canary_calls(function)) == 10
