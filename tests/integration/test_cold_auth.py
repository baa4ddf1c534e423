"""An unauthenticated request opens no database connection (docs/deploying/databases.md).

A cold app (no runtime built yet) gets 100 requests without valid credentials
across every protected route: API routes, pages, page actions, the webhook with
forged tokens and the live events.  The database then shows no connection from
the app, and the app has built no runtime.  One authenticated request at the
end shows that the count does see the app's connections.
"""

from __future__ import annotations

import itertools
import json
import uuid

import asyncpg
import httpx
from starlette.routing import Route

from aiqueue.db.doctor import code_schema_version
from aiqueue.tokens import Tokens
from aiqueue.web.app import create_app
from tests.conftest import AUTH, make_settings, mocked_function

# The public ones: the health check (its own test below: public, it answers
# without the database), the login form's POST counts failures in the database
# (the throttle); its GET renders no data, nor does the API's description (built
# once, public by design).
PUBLIC = {("GET", "/healthz"), ("POST", "/ai-queue/login"), ("GET", "/ai-queue/login"),
          ("GET", "/api/marking/openapi.json")}
FORGED = Tokens(("forged-secret-0123456789abcdef",))
QID, SID = uuid.uuid4(), uuid.uuid4()

# Client backends only: an autovacuum worker visiting the fresh database shows in
# pg_stat_activity with its datname too, and is no connection of the app's.
OTHERS = """SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND backend_type = 'client backend'"""


def protected_routes(app: object) -> list[tuple[str, str]]:
    out = []
    for route in app.routes:  # type: ignore[attr-defined]
        if isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD" and (method, route.path) not in PUBLIC:
                    out.append((method, route.path))
    return out


def fill(path: str) -> str:
    path = (path.replace("{queue_id}", str(QID)).replace("{submission_id}", str(SID))
            .replace("{assignment_id}", "hw-cold"))
    return path + ("?assignment_id=hw-cold" if path == "/api/marking/events" else "")


def bad_credentials() -> itertools.cycle[dict[str, str]]:
    forged_cookie = FORGED.session("admin", "csrf")
    return itertools.cycle([
        {},
        {"authorization": "Bearer wrong-secret-0123456789abcdef"},
        {"authorization": f"Bearer {FORGED.events('hw-cold')}"},
        {"cookie": f"aiqueue_session={forged_cookie}"},
    ])


def webhook_body(k: int) -> bytes:
    token = FORGED.callback(QID, k, 1)
    return json.dumps([{"queue_id": str(QID), "token": token, "status": "completed",
                        "result": {"score": 1, "max_score": 2}}]).encode()


async def test_100_unauthenticated_requests_open_no_connection(
    db_url: str, conn: asyncpg.Connection
) -> None:
    app = create_app(make_settings(db_url))
    routes = protected_routes(app)
    assert len(routes) >= 30 and ("POST", "/webhooks/ai-mark") in routes
    credentials = bad_credentials()
    statuses: dict[int, int] = {}
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    with mocked_function():
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            for k, (method, path) in zip(range(100), itertools.cycle(routes), strict=False):
                url = fill(path)
                if path == "/webhooks/ai-mark":
                    r = await client.post(url, content=webhook_body(k))
                elif path == "/api/marking/events" and k % 2:
                    r = await client.get(url + f"&token={FORGED.events('hw-cold')}")
                else:
                    r = await client.request(method, url, headers=next(credentials),
                                             content=b"{}" if method == "POST" else None)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert set(statuses) <= {401, 303}, statuses
            assert sum(statuses.values()) == 100
            assert await conn.fetchval(OTHERS) == 0, "a request connected to the database"
            assert app.state.aiqueue.runtime is None, "a request built the runtime"
            # The count is not blind: one authenticated request connects.
            assert (await client.get("/api/marking/stats", headers=AUTH)).status_code == 200
            assert await conn.fetchval(OTHERS) >= 1
    await app.state.aiqueue.close()


async def test_healthz_answers_the_public_without_the_database_and_the_bearer_with_it(
    db_url: str, conn: asyncpg.Connection
) -> None:
    app = create_app(make_settings(db_url))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
        for headers in ({}, {"authorization": "Bearer wrong-secret-0123456789abcdef"},
                        {"authorization": "Basic eDp5"}):
            r = await client.get("/healthz", headers=headers)
            assert (r.status_code, r.json()) == (200, {"status": "ok"})
        assert await conn.fetchval(OTHERS) == 0, "the public health check connected"
        assert app.state.aiqueue.runtime is None
        r = await client.get("/healthz", headers=AUTH)
        version = code_schema_version()
        assert (r.status_code, r.json()) == (200, {
            "status": "ok", "database": True,
            "schema": {"expected": version, "found": version}})
        assert await conn.fetchval(OTHERS) >= 1
    await app.state.aiqueue.close()
