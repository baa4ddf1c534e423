"""Any text id may hold any Unicode character up to its length limit, on every route.

Assignment ids and groups, non-ASCII, emoji, multibyte at the 200-character
limit and characters a URL or HTML treat specially, go through every route:
the API, the teacher's page and its actions, the /ai-queue filters, the live
events stream and its token. The routes that look an id up find its rows, and
no route answers a 500 with any credential.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import asyncpg
import httpx
import pytest
from markupsafe import escape
from starlette.applications import Starlette
from starlette.routing import Route

from aiqueue.tokens import Tokens
from aiqueue.web.app import create_app
from tests.conftest import AUTH, SECRET, add_submissions, make_settings, mocked_function

IDS = [
    "Übung-1",
    "📝 Aufgabe ✓ 🇩🇪",
    "語" * 200,                          # the length limit, 3 bytes a character
    "😀" * 200,                          # the length limit, 4 bytes (two UTF-16 units) each
    "50% <b>\"x\" & 'y' ?#=+;\\",        # special to a URL, a query string or HTML
    "\u202ertl\u202c zero\u200bwidth\u00a0nbsp",
]
# A slash can't be told from the path's own in a path parameter: such an id is found
# through the query-string routes, and a path route answers 404 (never 500).
SLASHED = "2024/25 Klasse 7/b"
# Routes that take no id, and the one that would end the test's session.
SKIP = {"/ai-queue/logout", "/api/marking/doctor", "/ai-queue/doctor"}


@pytest.fixture
async def app(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[Starlette]:
    # Paused: rows stay where enqueue puts them; streams end quickly.
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    app = create_app(make_settings(db_url, events_max_seconds=0.3,
                                   events_heartbeat_seconds=0.1, events_poll_seconds=0.05))
    yield app
    await app.state.aiqueue.close()


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    # raise_app_exceptions=False: a crash is seen as the 500 a user would get.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    with mocked_function():
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as c:
            yield c


async def login(client: httpx.AsyncClient) -> str:
    """Sign in; the session's CSRF token, read from the page."""
    r = await client.post("/ai-queue/login", data={"password": SECRET})
    assert r.status_code == 303
    match = re.search(r'name="csrf_token" value="([^"]+)"', (await client.get("/ai-queue")).text)
    assert match
    return match[1]


async def enqueue(client: httpx.AsyncClient, conn: asyncpg.Connection, ident: str
                  ) -> tuple[list[uuid.UUID], uuid.UUID]:
    subs = await add_submissions(conn, 2, ident)
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": ident, "group": ident, "submission_ids": [str(s) for s in subs]})
    assert r.status_code == 202 and r.json()["enqueued"] == 2, r.text
    queue_id = uuid.UUID(r.json()["queue_ids"][0])
    return subs, queue_id


@pytest.mark.parametrize("ident", IDS, ids=range(len(IDS)))
async def test_the_routes_that_look_an_id_up_find_its_rows(
    client: httpx.AsyncClient, conn: asyncpg.Connection, ident: str
) -> None:
    subs, _ = await enqueue(client, conn, ident)
    path = quote(ident, safe="")
    r = await client.get("/api/marking/queue", headers=AUTH,
                         params={"assignment_id": ident, "group": ident})
    assert r.status_code == 200 and r.json()["total"] == 2
    assert {i["assignment_id"] for i in r.json()["items"]} == {ident}
    r = await client.get(f"/api/marking/assignments/{path}/progress", headers=AUTH)
    assert r.status_code == 200 and r.json()["total"] == 2, r.text

    await login(client)
    page = await client.get(f"/results/assignments/{path}")
    assert page.status_code == 200 and page.text.count("<tr data-submission=") == 2
    assert str(escape(ident)) in page.text
    r = await client.get(f"/results/assignments/{path}/events-token")
    assert r.status_code == 200, r.text
    token = r.json()["token"]
    assert Tokens(SECRET).verify_events(token, ident)
    assert not Tokens(SECRET).verify_events(token, ident[:-1] + "x")
    async with client.stream("GET", "/api/marking/events",
                             params={"assignment_id": ident, "token": token}) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        await stream.aread()
    r = await client.get(f"/results/assignments/{path}/progress")
    assert r.status_code == 200, r.text
    r = await client.get(f"/results/assignments/{path}/submissions/{subs[0]}")
    assert r.status_code == 200, r.text
    monitor = await client.get("/ai-queue", params={"assignment_id": ident, "group": ident})
    assert monitor.status_code == 200
    assert monitor.text.count(str(escape(ident))) >= 2

    r = await client.post(f"/api/marking/assignments/{path}/cancel", headers=AUTH)
    assert r.status_code == 200 and r.json()["cancelled"] == 2, r.text


async def test_no_route_answers_500_for_any_id(
    app: Starlette, client: httpx.AsyncClient, conn: asyncpg.Connection
) -> None:
    csrf = await login(client)
    routes = [(m, r.path) for r in app.routes if isinstance(r, Route) and r.path not in SKIP
              for m in sorted(r.methods or ()) if m != "HEAD"]
    assert len(routes) >= 35
    crashed = []
    for ident in [*IDS, SLASHED]:
        subs, queue_id = await enqueue(client, conn, ident)
        query = {"assignment_id": ident, "group": ident, "by": "group", "csrf_token": csrf,
                 "token": Tokens(SECRET).events(ident)}
        # Row and submission ids are UUIDs: the text id in their place too.
        for (method, route), rows in itertools.product(routes, ((queue_id, subs[0]), None)):
            if rows is None and "_id}" not in route:
                continue
            row, sub = (str(rows[0]), str(rows[1])) if rows else (quote(ident, safe=""),) * 2
            url = (route.replace("{assignment_id}", quote(ident, safe=""))
                   .replace("{queue_id}", row).replace("{submission_id}", sub))
            # With the bearer, the session and a form; and with neither.
            for headers in (AUTH, {"authorization": ""}):
                r = await client.request(method, url, params=query, headers=headers,
                                         data=None if method == "GET" else query)
                if r.status_code >= 500:
                    crashed.append((method, route, ident[:20], r.status_code))
    assert crashed == []
