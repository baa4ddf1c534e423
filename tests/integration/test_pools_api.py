"""Kinds and pools through the real app (docs/concepts.md): routing, 422s, readers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import respx

from aiqueue.web.app import create_app
from tests.conftest import AUTH, FN, SELF_CHAIN, add_submissions, app_client
from tests.integration.doctor_kit import checks, fake_function, knows_probes
from tests.integration.pools_kit import ENV, URLS, pools_settings


@pytest.fixture
def functions() -> Iterator[dict[str, respx.Route]]:
    """One marking function per kind, each acknowledging every dispatch."""
    with respx.mock(assert_all_called=False) as mock:
        mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
        yield {kind: mock.post(url).mock(return_value=httpx.Response(202))
               for kind, url in URLS.items()}


@pytest.fixture
async def client(db_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(pools_settings(db_url, tmp_path, max_in_flight=4))
    async with app_client(app) as c:
        yield c


async def enqueue(client: httpx.AsyncClient, conn: asyncpg.Connection, kind: str | None,
                  n: int) -> httpx.Response:
    ids = await add_submissions(conn, n, f"hw-{kind}")
    body = {"assignment_id": f"hw-{kind}", "submission_ids": [str(i) for i in ids]}
    if kind is not None:
        body["kind"] = kind
    return await client.post("/api/marking/enqueue", headers=AUTH, json=body)


async def test_every_row_goes_to_its_kinds_function_and_nowhere_else(
    client: httpx.AsyncClient, conn: asyncpg.Connection, functions: dict[str, respx.Route]
) -> None:
    for kind in ("short", "essay", "code"):
        assert (await enqueue(client, conn, kind, 3)).status_code == 202
    for _ in range(12):
        await client.post("/api/marking/process-queue", headers=AUTH)
    kinds = {str(r["queue_id"]): r["kind"] for r in
             await conn.fetch("SELECT queue_id, kind FROM ai_marking_queue")}
    sent = 0
    for kind, route in functions.items():
        assert route.call_count > 0, kind
        for call in route.calls:
            body = json.loads(call.request.content)
            assert kinds[body["queue_id"]] == kind  # 0 rows reach another kind's function
            # Only essay names a token (its variable's value); the others send none.
            assert call.request.headers.get("authorization") == (
                f"Bearer {ENV['ESSAY_TOKEN']}" if kind == "essay" else None)
            sent += 1
    assert sent == await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'")


async def test_an_unknown_kind_is_refused_and_nothing_is_enqueued(
    client: httpx.AsyncClient, conn: asyncpg.Connection, functions: dict[str, respx.Route]
) -> None:
    r = await enqueue(client, conn, "poetry", 2)
    assert r.status_code == 422
    assert r.json()["error"] == "unknown_kind" and "poetry" in r.json()["detail"]
    bad = await enqueue(client, conn, "Not A Kind", 1)
    assert bad.status_code == 422 and "kind" in bad.json()["detail"]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    # Without `kind` a row is `mark`, in the default pool, as before.
    assert (await enqueue(client, conn, None, 1)).status_code == 202
    row = await conn.fetchrow("SELECT kind, pool FROM ai_marking_queue")
    assert tuple(row) == ("mark", "default")


async def test_readers_break_down_by_kind_and_pool(
    client: httpx.AsyncClient, conn: asyncpg.Connection, functions: dict[str, respx.Route]
) -> None:
    await enqueue(client, conn, "essay", 2)
    await enqueue(client, conn, "code", 3)
    for _ in range(4):
        await client.post("/api/marking/process-queue", headers=AUTH)
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    assert stats["kinds"]["code"]["pool"] == "beta"
    assert stats["kinds"]["code"]["processing"] == 2 and stats["kinds"]["code"]["pending"] == 1
    assert stats["kinds"]["essay"]["processing"] == 2
    assert stats["pools"]["alpha"]["in_flight"] == 2 and stats["pools"]["beta"]["in_flight"] == 2
    assert stats["pools"]["alpha"]["max_in_flight"] == 3
    assert stats["pools"]["beta"]["kinds"] == ["code"]
    listed = (await client.get("/api/marking/queue?kind=code", headers=AUTH)).json()
    assert listed["total"] == 3 and {i["kind"] for i in listed["items"]} == {"code"}
    assert {i["pool"] for i in listed["items"]} == {"beta"}
    metrics = (await client.get("/metrics", headers=AUTH)).text
    assert 'aiqueue_kind_rows{kind="code",pool="beta",status="pending"} 1.0' in metrics
    assert 'aiqueue_pool_in_flight{pool="alpha"} 2.0' in metrics
    assert 'aiqueue_pool_in_flight_limit{pool="beta"} 4.0' in metrics
    # A result of each: the usage report by kind and by pool.
    for kind in ("essay", "code"):
        call = functions[kind].calls.last
        sent = json.loads(call.request.content)
        item = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
                "status": "completed", "result": {"score": 1},
                "usage": {"model": "m", "prompt_tokens": 10, "completion_tokens": 5}}
        assert (await client.post("/webhooks/ai-mark", json=[item])).json()["accepted"] == 1
    for by, keys in (("kind", ["code", "essay"]), ("pool", ["alpha", "beta"])):
        report = (await client.get(f"/api/marking/usage?by={by}", headers=AUTH)).json()
        assert [i["key"] for i in report["items"]] == keys
        assert all(i["jobs"] == 1 and i["prompt_tokens"] == 10 for i in report["items"])


async def test_the_page_filters_and_shows_kinds(
    client: httpx.AsyncClient, conn: asyncpg.Connection, functions: dict[str, respx.Route]
) -> None:
    await enqueue(client, conn, "essay", 1)
    await enqueue(client, conn, "code", 1)
    login = await client.post("/ai-queue/login", data={"password": "test-secret-0123456789abcdef"})
    assert login.status_code in (302, 303)
    page = (await client.get("/ai-queue?kind=code")).text
    assert 'id="pools"' in page and 'data-pool="beta"' in page
    assert '<option value="code" selected>' in page
    assert "<td>code</td>" in page and "<td>essay</td>" not in page
    assert (await client.get("/ai-queue?kind=Bad%20Kind")).status_code == 400


async def test_a_webhook_refusal_holds_its_pool_only(
    client: httpx.AsyncClient, conn: asyncpg.Connection, functions: dict[str, respx.Route]
) -> None:
    await enqueue(client, conn, "essay", 3)
    sent = json.loads(functions["essay"].calls.last.request.content)
    item = {"queue_id": sent["queue_id"], "token": sent["callback_token"], "status": "failed",
            "error": "rate_limited", "retry_after": 30}
    assert (await client.post("/webhooks/ai-mark", json=[item])).json()["accepted"] == 1
    essays = functions["essay"].call_count
    # Pool alpha is held for 30 s; code's rows (pool beta) go at once, up to code's cap.
    await enqueue(client, conn, "code", 3)
    for _ in range(3):
        await client.post("/api/marking/process-queue", headers=AUTH)
    assert functions["code"].call_count == 2 and functions["essay"].call_count == essays
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    alpha, beta = stats["pools"]["alpha"], stats["pools"]["beta"]
    assert alpha["hold_until"] is not None and alpha["refusals"]["rate_limited"] == 1
    assert alpha["in_flight_limit"] == 1
    assert beta["hold_until"] is None and beta["in_flight_limit"] == 4  # unchanged
    assert beta["refusals"] == {"rate_limited": 0, "overloaded": 0}
    # The default pool, whose fields the top level shows, is not held either.
    assert stats["hold_until"] is None


async def test_the_doctor_probes_every_kinds_function(db_url: str, tmp_path: Path) -> None:
    app = create_app(pools_settings(db_url, tmp_path, function_token="fn-token"))
    async with app_client(app) as client:
        with respx.mock(assert_all_called=False) as mock:
            mock.route(host="app.test").pass_through()
            mock.post(FN).mock(side_effect=fake_function(client, knows_probes))
            # The code runner refuses the credentials it is sent.
            routes = {kind: mock.post(url).mock(side_effect=fake_function(
                client, knows_probes, 401 if kind == "code" else 202))
                for kind, url in URLS.items()}
            r = await client.get("/api/marking/doctor", headers=AUTH)
    calls = {kind: route.calls for kind, route in routes.items()}
    got = checks(r.json())
    assert {k: got[k][0] for k in ("function", "probe", "function:essay", "probe:essay",
                                   "function:short", "probe:short", "function:code",
                                   "probe:code")} == {
        "function": "pass", "probe": "pass", "function:essay": "pass", "probe:essay": "pass",
        "function:short": "pass", "probe:short": "pass", "function:code": "fail",
        "probe:code": "skip"}
    # Each probe went to its own kind's function with that kind's token (or none).
    assert calls["essay"].last.request.headers["authorization"] == f"Bearer {ENV['ESSAY_TOKEN']}"
    assert "authorization" not in calls["short"].last.request.headers
