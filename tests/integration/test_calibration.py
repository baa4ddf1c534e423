"""The calibration gate and agreement (docs/agreement.md) through the real app and PostgreSQL.

The function is a respx route that acknowledges dispatches; its results come
back through the webhook with varied scores and criteria.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, SECRET, add_submissions, app_client, make_settings
from tests.integration.calibration_kit import complete, dispatched, drain, enqueue, statuses

TOL = 1e-9


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=100))
    async with app_client(app) as c:
        yield c


def reference(pairs: list[tuple[int, int]], max_score: int = 10) -> dict[str, float]:
    """The contract's figures written out again, separately from the app's module."""
    n = len(pairs)
    diffs = [abs(a - b) for a, b in pairs]
    cats = range(max_score + 1)
    observed = [[sum(1 for a, b in pairs if (a, b) == (i, j)) for j in cats] for i in cats]
    rows = [sum(observed[i]) for i in cats]
    cols = [sum(observed[i][j] for i in cats) for j in cats]
    num = sum((i - j) ** 2 * observed[i][j] for i in cats for j in cats)
    den = sum((i - j) ** 2 * rows[i] * cols[j] / n for i in cats for j in cats)
    return {"exact": diffs.count(0) / n,
            "adjacent": sum(d <= max(1, 0.1 * max_score) for d in diffs) / n,
            "mean_abs_error": sum(diffs) / n, "qwk": 1 - num / den}


async def test_five_first_then_release(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                       function: Any) -> None:
    subs = await add_submissions(conn, 40, assignment_id="hw-7")
    answer = await enqueue(client, subs, calibrate={"rows": 5})
    run_id = answer["run_id"]
    assert answer["enqueued"] == 40 and uuid.UUID(run_id)
    await drain(client)
    sent = dispatched(function)
    # Exactly the five calibration rows went; the other 35 wait and say why.
    assert len(sent) == 5 and await statuses(conn) == {"processing": 5, "pending": 35}
    r = await client.get("/api/marking/queue?status=pending&assignment_id=hw-7&limit=100",
                         headers=AUTH)
    assert {i["waiting_for"] for i in r.json()["items"]} == {"calibration"}
    held = next(s for s in subs if str(s) not in {x["submission_id"] for x in sent})
    st = (await client.get(f"/api/marking/submissions/{held}/status", headers=AUTH)).json()
    assert st["waiting_for"] == "calibration" and st["queue_position"] is None
    # A spread sample: one from each eighth of the 40 (seq order is request order).
    order = {str(s): k for k, s in enumerate(subs)}
    assert sorted(order[x["submission_id"]] // 8 for x in sent) == [0, 1, 2, 3, 4]
    # The backlog's age and the stalled alert leave held rows out.
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    assert stats["oldest_pending_seconds"] in (None, 0)

    scores = [7, 4, 9, 2, 6]
    crit = [{"id": "c1", "score": 2, "max_score": 4}, {"id": "c2", "score": 3, "max_score": 6}]
    for s, score in zip(sent, scores, strict=True):
        await complete(client, s, score, crit)
    ready = await conn.fetch("SELECT body FROM ai_marking_outbox "
                             "WHERE type = 'marking.calibration_ready'")
    assert len(ready) == 1
    body = json.loads(ready[0]["body"])
    assert body["run_id"] == run_id and body["completed"] == 5 and body["held"] == 35

    # The teacher accepts two as they are and adjusts three (one criterion changed).
    teacher = [7, 4, 8, 5, 5]
    for s, ai, mine in zip(sent, scores, teacher, strict=True):
        adjusted = None if ai == mine else {"result": {"score": mine, "max_score": 10,
                                                        "criteria": [crit[0], {**crit[1],
                                                                               "score": 2}]}}
        r = await client.post(f"/api/marking/queue/{s['queue_id']}/accept", headers=AUTH,
                              json=adjusted)
        assert r.status_code == 200
    got = (await client.get("/api/marking/agreement?assignment_id=hw-7", headers=AUTH)).json()
    want = reference(list(zip(scores, teacher, strict=True)))
    for name, value in want.items():
        assert got[name] == pytest.approx(value, abs=TOL), name
    assert (got["reviewed"], got["reverted"]) == (5, 0)
    assert got["criteria"] == [{"id": "c1", "reviewed": 5, "exact": 1.0},
                               {"id": "c2", "reviewed": 5, "exact": pytest.approx(0.4)}]
    by_diff = {s["queue_id"]: abs(a - b) for s, a, b in zip(sent, scores, teacher, strict=True)}
    assert got["disagreements"] == sorted((q for q, d in by_diff.items() if d),
                                          key=lambda q: -by_diff[q])
    # Nothing was released by the reviews (no release_when): still five dispatched.
    await drain(client)
    assert function.call_count == 5

    r = await client.post(f"/api/marking/runs/{run_id}/release", headers=AUTH)
    assert r.status_code == 200 and r.json()["released"] == 35
    await drain(client)
    assert function.call_count == 40
    r = await client.post(f"/api/marking/runs/{run_id}/release", headers=AUTH)
    assert r.json()["released"] == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_outbox "
                               "WHERE type = 'marking.calibration_ready'") == 1


async def test_release_when(client: httpx.AsyncClient, conn: asyncpg.Connection,
                            function: Any) -> None:
    subs = await add_submissions(conn, 12, assignment_id="hw-7")
    answer = await enqueue(client, subs, calibrate={"rows": 3},
                           release_when={"reviewed": 3, "exact": 0.6})
    await drain(client)
    sent = dispatched(function)
    assert len(sent) == 3
    for s in sent:
        await complete(client, s, 5)
    # Two of three adjusted: exact 1/3 < 0.6, so the rest keep waiting, and nothing fails.
    for s, mine in zip(sent, [5, 3, 2], strict=True):
        await client.post(f"/api/marking/queue/{s['queue_id']}/accept", headers=AUTH,
                          json={"result": {"score": mine, "max_score": 10}})
    await drain(client)
    assert function.call_count == 3
    assert await statuses(conn) == {"completed": 3, "pending": 9}
    # A threshold that fails holds through housekeeping and expiry too.
    await client.get("/api/marking/process-queue", headers={"authorization": AUTH[
        "authorization"]})
    assert await statuses(conn) == {"completed": 3, "pending": 9}

    # A second run, whose reviews meet its thresholds: released by the accept itself.
    more = await add_submissions(conn, 6, assignment_id="hw-8")
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-8", "submission_ids": [str(s) for s in more],
        "calibrate": {"submission_ids": [str(more[0]), str(more[5])]},
        "release_when": {"reviewed": 2, "adjacent": 1}})
    run_8 = r.json()["run_id"]
    await drain(client)
    firsts = [x for x in dispatched(function) if x["assignment_id"] == "hw-8"]
    assert {x["submission_id"] for x in firsts} == {str(more[0]), str(more[5])}
    for s in firsts:
        await complete(client, s, 6)
    await client.post(f"/api/marking/queue/{firsts[0]['queue_id']}/accept", headers=AUTH)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue WHERE run_id = $1 "
                               "AND held_run_after IS NOT NULL", uuid.UUID(run_8)) == 4
    r = await client.post(f"/api/marking/queue/{firsts[1]['queue_id']}/accept", headers=AUTH,
                          json={"result": {"score": 7, "max_score": 10}})
    assert r.status_code == 200
    # The accept's own step released and dispatched them: no other call in between.
    assert len([x for x in dispatched(function) if x["assignment_id"] == "hw-8"]) >= 3
    await drain(client)
    assert len([x for x in dispatched(function) if x["assignment_id"] == "hw-8"]) == 6
    released_by = await conn.fetchval("SELECT released_by FROM ai_marking_runs "
                                      "WHERE run_id = $1", uuid.UUID(run_8))
    assert released_by == "release_when"
    # The first run still holds its nine.
    assert answer["run_id"] != run_8
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE held_run_after IS NOT NULL") == 9


async def test_cancel_ends_the_held_rows(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                         function: Any) -> None:
    subs = await add_submissions(conn, 10, assignment_id="hw-7")
    await enqueue(client, subs, calibrate={"rows": 2})
    await drain(client)
    r = await client.post("/api/marking/assignments/hw-7/cancel", headers=AUTH)
    assert r.json()["cancelled"] == 8
    assert await statuses(conn) == {"processing": 2, "cancelled": 8}


async def test_unknown_fields_and_bad_gates(client: httpx.AsyncClient,
                                            conn: asyncpg.Connection) -> None:
    subs = [str(s) for s in await add_submissions(conn, 3, assignment_id="hw-7")]
    bodies: dict[str, dict[str, Any]] = {
        "unknown field: calibrat": {"calibrat": {"rows": 5}},
        "unknown field: calibrate.row": {"calibrate": {"row": 5}},
        "calibrate.rows must be a whole number from 1 to 50": {"calibrate": {"rows": 51}},
        "release_when needs calibrate": {"release_when": {"exact": 0.9}},
        "calibrate.submission_ids must be among submission_ids": {
            "calibrate": {"submission_ids": [str(uuid.uuid4())]}},
    }
    for detail, extra in bodies.items():
        r = await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-7", "submission_ids": subs, **extra})
        assert r.status_code == 422 and r.json()["detail"] == detail, r.text
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    r = await client.post(f"/api/marking/runs/{uuid.uuid4()}/release", headers=AUTH)
    assert r.status_code == 404
    r = await client.post(f"/api/marking/runs/{uuid.uuid4()}/release", headers=AUTH,
                          json={"now": True})
    assert r.status_code == 422 and r.json()["detail"] == "unknown field: now"


async def test_the_monitor_shows_agreement_by_model(client: httpx.AsyncClient,
                                                    conn: asyncpg.Connection,
                                                    function: Any) -> None:
    subs = await add_submissions(conn, 6, assignment_id="hw-7")
    await enqueue(client, subs)
    await drain(client)
    sent = dispatched(function)
    for s, score in zip(sent, [1, 2, 3, 4, 5, 6], strict=True):
        await complete(client, s, score)
    for s, mine in zip(sent[:5], [1, 2, 3, 4, 7], strict=True):
        await client.post(f"/api/marking/queue/{s['queue_id']}/accept", headers=AUTH,
                          json={"result": {"score": mine}})
    await client.post(f"/api/marking/queue/{sent[5]['queue_id']}/revert", headers=AUTH)
    await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    html = (await client.get("/ai-queue/fragment?part=chart")).text
    row = re.search(r'<tr data-model="m-1">(.*?)</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    kappa = reference([(1, 1), (2, 2), (3, 3), (4, 4), (5, 7)])["qwk"]
    assert cells == ["m-1", "6", "1", "80%", "80%", "0.40", f"{kappa:.2f}"]
    assert "secret words" not in html


async def test_rows_joining_a_held_run_wait_with_it(client: httpx.AsyncClient,
                                                    conn: asyncpg.Connection,
                                                    function: Any) -> None:
    subs = await add_submissions(conn, 9, assignment_id="hw-7")
    first = await enqueue(client, subs[:6], calibrate={"rows": 2})
    await drain(client)
    for s in dispatched(function):
        await complete(client, s, 5)
    # A later Mark All of the same assignment joins the run, and waits with its rest.
    later = await enqueue(client, subs[6:])
    assert later["run_id"] == first["run_id"]
    await drain(client)
    assert function.call_count == 2
    r = await client.get("/api/marking/queue?status=pending&limit=100", headers=AUTH)
    assert [i["waiting_for"] for i in r.json()["items"]] == ["calibration"] * 7
    r = await client.post(f"/api/marking/runs/{first['run_id']}/release", headers=AUTH)
    assert r.json()["released"] == 7
    await drain(client)
    assert function.call_count == 9
    # Its calibration rows had ended already: still one calibration_ready.
    await client.get("/api/marking/process-queue", headers=AUTH)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_outbox "
                               "WHERE type = 'marking.calibration_ready'") == 1
