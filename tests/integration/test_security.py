"""Hostile input against every route: each refusal is a 4xx with {"error", "detail"}, and
changes nothing (every table is compared before and after), calls no function, leaks no
secret, token or content to the logs.

The app runs in-process (httpx.ASGITransport) on a real PostgreSQL; respx stands in
for the marking function and the self-chain (an unmatched outgoing request fails).
"""

from __future__ import annotations

import base64
import hmac
import inspect
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import asyncpg
import httpx
import pytest
import respx
from starlette.routing import Route

from aiqueue import tokens as tokens_module
from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed, Job
from aiqueue.tokens import Tokens
from aiqueue.web import http as http_module
from aiqueue.web.app import create_app
from tests.conftest import CRON, SECRET, add_submissions, make_settings
from tests.plans import plan_of

FN = "http://function.test/mark"
CHAIN = "http://app.test/api/marking/process-queue"
AUTH = {"authorization": f"Bearer {SECRET}"}
CONTENT = "Photosynthesis-essay-by-Zephyrine-Quill"
SQLISH = "x'); DROP TABLE ai_marking_queue; --"
# The API's description is public by design (README, Integrating): no secret, no data.
PUBLIC = {("GET", "/healthz"), ("GET", "/ai-queue/login"), ("GET", "/api/marking/openapi.json")}


class LogSink(logging.Handler):
    """Every log record of the test, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclass
class World:
    """A seeded database, the app on it, and the rows the attacks aim at."""

    client: httpx.AsyncClient
    conn: asyncpg.Connection
    tokens: Tokens
    subs: list[uuid.UUID]
    processing: Job  # dispatched, awaiting its result
    retried: Job  # failed once, pending again (due in an hour): its token is stale
    done: Job  # completed
    function: respx.Route
    chain: respx.Route
    app: Any
    failures: list[str] = field(default_factory=list)

    def token(self, job: Job) -> str:
        return self.tokens.callback(job.queue_id, job.dispatch_seq, job.attempt)


@pytest.fixture
def sink() -> Iterator[LogSink]:
    handler = LogSink()
    loggers = [logging.getLogger(), logging.getLogger("aiqueue")]
    old = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    yield handler
    for lg, level in old:
        lg.removeHandler(handler)
        lg.setLevel(level)


@pytest.fixture
async def world(db_url: str, conn: asyncpg.Connection, sink: LogSink) -> AsyncIterator[World]:
    subs = await add_submissions(conn, 5, "hw-sec", content=CONTENT)
    store = Store(await connect_pool(db_url))
    try:
        await store.enqueue(subs[:3], "hw-sec", 0, {"rubric": "r", "max_score": 10})
        jobs = [await store.claim(plan_of(0, 5)) for _ in range(3)]
        processing, retried, done = jobs
        assert processing and retried and done
        await store.attempt_failed(retried.queue_id, retried.dispatch_seq, delay=3600,
                                   retryable=True, max_attempts=3, error="x",
                                   outcome="dispatch_error")
        await store.complete(Completed(done.queue_id, done.dispatch_seq,
                                       {"score": 5, "max_score": 10, "feedback": "fine"}),
                             plan_of())
    finally:
        await store.close()
    app = create_app(make_settings(db_url, cron_secrets=(CRON,), max_in_flight=1))
    with respx.mock(assert_all_called=False) as mocked:
        chain = mocked.post(CHAIN).mock(return_value=httpx.Response(200, json={}))
        function = mocked.post(FN).mock(return_value=httpx.Response(202))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            yield World(client, conn, Tokens(SECRET), subs, processing, retried, done,
                        function, chain, app)
    await app.state.aiqueue.close()


async def snapshot(conn: asyncpg.Connection) -> dict[str, list[str]]:
    """Every row of every table in the database, as sorted JSON text.

    Leaves out the login throttle's failures: counting a wrong password is what a
    refused login is meant to change (tests/integration/test_login_throttle.py).
    """
    names = [r["tablename"] for r in await conn.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        " AND tablename <> 'ai_queue_login_failures' ORDER BY 1")]
    out = {}
    for name in names:
        rows = await conn.fetch(f'SELECT to_jsonb(t)::text AS j FROM "{name}" t')
        out[name] = sorted(r["j"] for r in rows)
    return out


@dataclass
class Attack:
    """One hostile request and the answers that count as a correct refusal."""

    name: str
    method: str
    path: str
    expect: tuple[int, ...]
    headers: dict[str, str] = field(default_factory=dict)
    content: Any = None
    json_body: Any = None
    error_body: bool = True  # JSON {"error", "detail"} (HTML pages and redirects: False)


async def attack(w: World, a: Attack) -> httpx.Response | None:
    """Send it; record (not raise) every way it was handled wrongly."""
    before = await snapshot(w.conn)
    calls = (w.function.call_count, w.chain.call_count)
    kwargs: dict[str, Any] = {"headers": a.headers}
    if a.json_body is not None:
        kwargs["content"] = json.dumps(a.json_body)
        kwargs["headers"] = {"content-type": "application/json", **a.headers}
    elif a.content is not None:
        kwargs["content"] = a.content
    try:
        r = await w.client.request(a.method, a.path, **kwargs)
    except Exception as exc:  # the app must answer, whatever it is sent
        w.failures.append(f"{a.name}: raised {type(exc).__name__}")
        return None
    if r.status_code not in a.expect:
        w.failures.append(f"{a.name}: {a.method} {a.path[:80]} -> {r.status_code}"
                          f" (expected {a.expect}) {r.text[:200]}")
    elif a.error_body and r.status_code >= 400:
        try:
            body = r.json()
        except ValueError:
            body = None
        if not (isinstance(body, dict) and isinstance(body.get("error"), str)
                and isinstance(body.get("detail"), str)):
            w.failures.append(f"{a.name}: body is not {{error, detail}}: {r.text[:200]}")
    if await snapshot(w.conn) != before:
        w.failures.append(f"{a.name}: the database changed")
    if (w.function.call_count, w.chain.call_count) != calls:
        w.failures.append(f"{a.name}: the function or the chain was called")
    return r


def report(w: World) -> None:
    assert not w.failures, "\n".join(w.failures)


def routes(w: World) -> list[tuple[str, str]]:
    """(method, path template) of every route the app serves right now."""
    out = []
    for route in w.app.routes:
        if isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    out.append((method, route.path))
    return out


def fill(w: World, template: str) -> str:
    path = (template.replace("{queue_id}", str(w.processing.queue_id))
            .replace("{submission_id}", str(w.subs[0]))
            .replace("{assignment_id}", "hw-sec"))
    if path == "/api/marking/events":
        path += "?assignment_id=hw-sec"
    return path


def expired_token(job: Job, days: float = 15) -> str:
    with mock.patch("itsdangerous.timed.time") as clock:
        clock.time.return_value = time.time() - days * 86400
        return Tokens(SECRET).callback(job.queue_id, job.dispatch_seq, job.attempt)


def expired_events_token(assignment_id: str, days: float = 30) -> str:
    with mock.patch("itsdangerous.timed.time") as clock:
        clock.time.return_value = time.time() - days * 86400
        return Tokens(SECRET).events(assignment_id)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- credentials on every route ----------------------------------------------------


async def test_every_route_refuses_missing_and_wrong_credentials(world: World) -> None:
    w = world
    login = await w.client.post("/ai-queue/login", data={"password": SECRET})
    session_cookie = login.cookies.get("aiqueue_session")
    assert session_cookie, "the operator can log in"
    w.client.cookies.clear()
    wrong = {
        "no credentials": {},
        "wrong secret": {"authorization": "Bearer wrong-secret-0123456789abcdef"},
        "secret plus a character": {"authorization": f"Bearer {SECRET}x"},
        "secret minus a character": {"authorization": f"Bearer {SECRET[:-1]}"},
        "secret in upper case": {"authorization": f"Bearer {SECRET.upper()}"},
        "secret without a scheme": {"authorization": SECRET},
        "secret as Basic": {"authorization": "Basic "
                            + base64.b64encode(f"admin:{SECRET}".encode()).decode()},
        "secret as a cookie": {"cookie": f"aiqueue_session={SECRET}"},
        "an events token as bearer": {"authorization": f"Bearer {w.tokens.events('hw-sec')}"},
        "a callback token as bearer": {"authorization": f"Bearer {w.token(w.processing)}"},
        "a session cookie on the API": {"cookie": f"aiqueue_session={session_cookie}"},
        "cron secret": {"authorization": f"Bearer {CRON}"},
    }
    seen = set()
    for method, template in routes(w):
        path = fill(w, template)
        if (method, template) in PUBLIC or template == "/webhooks/ai-mark" \
                or template.startswith("/ai-queue/log"):
            continue  # public, token-per-item, or the login itself (tested below)
        api = template.startswith("/api/")
        for label, headers in wrong.items():
            if label == "cron secret" and (method, template) == ("GET",
                                                                "/api/marking/process-queue"):
                continue  # the one place the cron secret is accepted (next test)
            if label == "a session cookie on the API" and not api:
                continue  # a session is what the pages want
            # The API answers 401; pages send the browser to the login (or 401 for fetch()).
            expect = (401,) if api else (303, 401)
            await attack(w, Attack(f"{label} on {method} {template}", method, path, expect,
                                   headers=headers, error_body=api))
        seen.add(template)
    assert {"/api/marking/enqueue", "/api/marking/process-queue", "/api/marking/stats",
            "/api/marking/queue", "/api/marking/queue/{queue_id}/retry"} <= seen
    report(w)


async def test_the_cron_secret_works_only_on_get_process_queue(world: World) -> None:
    w = world
    cron = {"authorization": f"Bearer {CRON}"}
    await attack(w, Attack("cron secret on POST", "POST", "/api/marking/process-queue", (401,),
                           headers=cron))
    report(w)
    r = await w.client.get("/api/marking/process-queue", headers=cron)
    assert r.status_code == 200
    assert set(r.json()) >= {"claimed", "dispatched", "recovered", "pruned", "chained"}


async def test_public_routes_show_no_secret_and_no_content(world: World) -> None:
    w = world
    for path in ("/healthz", "/metrics"):
        r = await w.client.get(path, headers=AUTH if path == "/metrics" else {})
        assert r.status_code == 200
        for needle in (SECRET, CRON, CONTENT, "fine"):
            assert needle not in r.text, f"{needle!r} in {path}"
    assert (await w.client.get("/ai-queue/login")).status_code == 200


async def test_method_and_route_errors_are_json(world: World) -> None:
    w = world
    for a in [
        Attack("GET enqueue", "GET", "/api/marking/enqueue", (405,), headers=AUTH),
        Attack("PUT stats", "PUT", "/api/marking/stats", (405,), headers=AUTH),
        Attack("GET webhook", "GET", "/webhooks/ai-mark", (405,)),
        Attack("DELETE webhook", "DELETE", "/webhooks/ai-mark", (405,)),
        Attack("POST healthz", "POST", "/healthz", (405,)),
        Attack("unknown route", "GET", "/api/marking/nope", (404,), headers=AUTH),
        Attack("path traversal", "GET", "/api/marking/../../etc/passwd", (404,), headers=AUTH),
    ]:
        await attack(w, a)
    report(w)


# -- the webhook -------------------------------------------------------------------


async def test_webhook_refuses_bad_tokens_and_bodies_and_ignores_replays(world: World) -> None:
    w = world
    p, r, d = w.processing, w.retried, w.done

    def item(job: Job, token: str | None = None, **extra: Any) -> dict[str, Any]:
        body = {"queue_id": str(job.queue_id), "status": "completed",
                "result": {"score": 9, "max_score": 10, "feedback": "forged"}}
        if token is not None:
            body["token"] = token
        return body | extra

    good = w.token(p)
    other_secret = Tokens("another-secret-0123456789abcdef").callback(p.queue_id, 1, 1)
    events_salt = w.tokens.events(str(p.queue_id))
    refused = [
        ("no token", [item(p)], (401,)),
        ("empty token", [item(p, "")], (401,)),
        ("tampered token", [item(p, good[:-4] + ("AAAA" if not good.endswith("AAAA")
                                                  else "BBBB"))], (401,)),
        ("token of another row", [item(p, w.token(d))], (401,)),
        ("token of another row, that row's id", [item(d, good)], (401,)),
        ("expired token", [item(p, expired_token(p))], (401,)),
        ("token signed with another secret", [item(p, other_secret)], (401,)),
        ("events token", [item(p, events_salt)], (401,)),
        ("session token", [item(p, w.tokens.session("admin", "x"))], (401,)),
        ("non-ASCII token", [item(p, good + "\ud800")], (401,)),
        ("5000-char token", [item(p, "A" * 5000)], (401,)),
        ("SQL-looking token", [item(p, SQLISH)], (401,)),
        ("SQL-looking queue_id", [{**item(p, good), "queue_id": SQLISH}], (401,)),
        ("non-UUID queue_id", [{**item(p, good), "queue_id": "not-a-uuid"}], (401,)),
        ("queue_id of wrong type", [{**item(p, good), "queue_id": 5}], (422,)),
        ("unknown status", [item(p, good, status="done")], (422,)),
        ("result not an object", [item(p, good, result="nine")], (422,)),
        ("completed without result", [{**item(p, good), "result": None}], (422,)),
        ("usage not an object", [item(p, good, usage=[1, 2])], (422,)),
        ("retryable not a boolean", [item(p, good, status="failed", retryable="no")], (422,)),
        ("progress not an object", [item(p, good, status="progress", progress=7)], (422,)),
        ("NUL in the result", [item(p, good, result={"feedback": "a\u0000b"})], (422,)),
        ("unpaired surrogate in the result", [item(p, good, result={"f": "\ud800"})], (422,)),
        ("unpaired surrogate in usage", [item(p, good, usage={"model": "\udfff"})], (422,)),
        ("NUL in progress", [item(p, good, status="progress", progress={"m": "\u0000"})],
         (422,)),
        ("result nested 100 deep", [item(p, good, result=json.loads(
            '{"a":' * 100 + "1" + "}" * 100))], (422,)),
        ("an item that is not an object", [1], (422,)),
        ("an empty batch", [], (422,)),
        ("a bare string", "x", (422,)),
        ("1001 items", [item(p, good)] * 1001, (422,)),
    ]
    for name, body, expect in refused:
        await attack(w, Attack(f"webhook: {name}", "POST", "/webhooks/ai-mark", expect,
                               content=json.dumps(body)))
    raw = [
        ("no body", b"", (400,)),
        ("not JSON", b"status=completed", (400,)),
        ("truncated JSON", b'[{"queue_id": ', (400,)),
        ("NaN", b'[{"queue_id": "x", "status": "completed", "result": {"score": NaN}}]', (400,)),
        ("nested 100000 deep", nested(100_000).encode(), (400,)),
        ("nested 500 deep", nested(500).encode(), (422,)),
        ("2 MiB", b"[" + b'"x",' * 500_000 + b'"x"]', (413,)),
        ("invalid UTF-8", b'[{"queue_id": "\xff\xfe"}]', (400,)),
    ]
    for name, content, expect in raw:
        await attack(w, Attack(f"webhook: {name}", "POST", "/webhooks/ai-mark", expect,
                               content=content))

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b" " * 65536  # 2.5 MiB without a Content-Length

    await attack(w, Attack("webhook: 2.5 MiB streamed", "POST", "/webhooks/ai-mark", (413,),
                           content=chunks()))
    # Valid tokens that must change nothing: the contract answers 200 and counts them ignored.
    for name, body in [
        ("replayed completion of a completed row", [item(d, w.token(d))]),
        ("replayed failure of a completed row", [item(d, w.token(d), status="failed",
                                                      error="x")]),
        ("failure from a stale attempt", [item(r, w.token(r), status="failed", error="x")]),
        ("heartbeat from a stale attempt", [item(r, w.token(r), status="progress",
                                                 progress={"current": 1})]),
        ("a forged item next to a replay", [item(p, "forged"), item(d, w.token(d))]),
    ]:
        resp = await attack(w, Attack(f"webhook: {name}", "POST", "/webhooks/ai-mark", (200,),
                                      content=json.dumps(body)))
        if resp is not None and resp.status_code == 200:
            counts = resp.json()
            if counts["accepted"] != 0 or counts["ignored"] < 1:
                w.failures.append(f"webhook: {name}: counted {counts}")
    report(w)


# -- enqueue and the other API routes ----------------------------------------------


async def test_enqueue_refuses_malformed_oversized_and_hostile_bodies(world: World) -> None:
    w = world
    sub = str(w.subs[3])

    def body(**changes: Any) -> dict[str, Any]:
        return {"assignment_id": "hw-sec", "submission_ids": [sub], **changes}

    cases: list[tuple[str, Any, tuple[int, ...]]] = [
        ("an array", [sub], (422,)),
        ("a string", "hw-sec", (422,)),
        ("an empty object", {}, (422,)),
        ("assignment_id a number", body(assignment_id=7), (422,)),
        ("assignment_id empty", body(assignment_id="  "), (422,)),
        ("assignment_id 201 chars", body(assignment_id="a" * 201), (422,)),
        ("assignment_id with NUL", body(assignment_id="hw\u0000sec"), (422,)),
        ("assignment_id with an unpaired surrogate", body(assignment_id="hw\ud800"), (422,)),
        ("SQL-looking assignment_id and an unknown id",
         body(assignment_id=SQLISH, submission_ids=[str(uuid.uuid4())]), (422,)),
        ("submission_ids a string", body(submission_ids=sub), (422,)),
        ("submission_ids empty", body(submission_ids=[]), (422,)),
        ("submission_ids numbers", body(submission_ids=[1, 2]), (422,)),
        ("submission_ids objects", body(submission_ids=[{"id": sub}]), (422,)),
        ("non-UUID ids", body(submission_ids=[sub, "not-a-uuid"]), (422,)),
        ("SQL-looking ids", body(submission_ids=[SQLISH, "1 OR 1=1"]), (422,)),
        ("an unknown id among known ones", body(submission_ids=[sub, str(uuid.uuid4())]),
         (422,)),
        ("10,001 ids", body(submission_ids=[sub] * 10_001), (422,)),
        ("priority a string", body(priority="high"), (422,)),
        ("priority a boolean", body(priority=True), (422,)),
        ("priority a float", body(priority=1.5), (422,)),
        ("priority huge", body(priority=10**12), (422,)),
        ("payload an array", body(payload=[1]), (422,)),
        ("payload a string", body(payload="rubric"), (422,)),
        ("payload nested 40 deep", body(payload=json.loads('{"a":' * 40 + "1" + "}" * 40)),
         (422,)),
        ("payload with NUL", body(payload={"rubric": "a\u0000"}), (422,)),
        ("payload key with NUL", body(payload={"a\u0000": 1}), (422,)),
        ("payload with an unpaired surrogate", body(payload={"rubric": "\ud800"}), (422,)),
        ("payload over 64 KiB", body(payload={"rubric": "r" * 70_000}), (422,)),
    ]
    for name, payload, expect in cases:
        await attack(w, Attack(f"enqueue: {name}", "POST", "/api/marking/enqueue", expect,
                               headers=AUTH, content=json.dumps(payload)))
    raw = [
        ("no body", b"", (400,)),
        ("not JSON", b"{assignment_id: hw}", (400,)),
        ("a form", b"assignment_id=hw-sec&submission_ids=" + sub.encode(), (400,)),
        ("NaN priority", b'{"assignment_id": "a", "submission_ids": [], "priority": NaN}', (400,)),
        ("nested 100000 deep", nested(100_000).encode(), (400,)),
        ("over 1 MiB", json.dumps(body(payload={"r": "x" * 1_100_000})).encode(), (413,)),
        ("invalid UTF-8", b'{"assignment_id": "\xff"}', (400,)),
    ]
    for name, content, expect in raw:
        await attack(w, Attack(f"enqueue: {name}", "POST", "/api/marking/enqueue", expect,
                               headers=AUTH, content=content))
    report(w)
    r = await w.client.post("/api/marking/enqueue", headers=AUTH,
                            json=body(submission_ids=[sub, str(uuid.uuid4())]))
    assert "unknown_ids" in r.json()  # the 422 names what is wrong


async def test_other_api_routes_refuse_hostile_parameters(world: World) -> None:
    w = world
    ghost = uuid.uuid4()
    cases = [
        ("status unknown", "GET", "/api/marking/queue?status=bogus", (422,)),
        ("status SQL", "GET", f"/api/marking/queue?status={SQLISH}", (422,)),
        ("limit not a number", "GET", "/api/marking/queue?limit=ten", (422,)),
        ("limit zero", "GET", "/api/marking/queue?limit=0", (422,)),
        ("limit huge", "GET", "/api/marking/queue?limit=100000000", (422,)),
        ("offset negative", "GET", "/api/marking/queue?offset=-1", (422,)),
        ("assignment filter with NUL", "GET", "/api/marking/queue?assignment_id=a%00b", (422,)),
        ("retry of a non-UUID", "POST", "/api/marking/queue/not-a-uuid/retry", (404,)),
        ("retry of a SQL-looking id", "POST", "/api/marking/queue/1%20OR%201=1/retry", (404,)),
        ("retry of an unknown row", "POST", f"/api/marking/queue/{ghost}/retry", (404,)),
        ("retry of a processing row", "POST",
         f"/api/marking/queue/{w.processing.queue_id}/retry", (409,)),
        ("retry of a completed row", "POST", f"/api/marking/queue/{w.done.queue_id}/retry",
         (409,)),
    ]
    optional = [
        ("status of a non-UUID", "GET", "/api/marking/submissions/nope/status", (404,)),
        ("status of an unknown submission", "GET", f"/api/marking/submissions/{ghost}/status",
         (404,)),
        ("progress with NUL", "GET", "/api/marking/assignments/a%00b/progress", (422,)),
        ("cancel with NUL", "POST", "/api/marking/assignments/a%00b/cancel", (422,)),
        ("cancel with a 300-char id", "POST", f"/api/marking/assignments/{'a' * 300}/cancel",
         (422,)),
        ("events without an assignment", "GET", "/api/marking/events", (422,)),
        ("events with a forged token", "GET",
         "/api/marking/events?assignment_id=hw-sec&token=forged", (401,)),
        ("events with another assignment's token", "GET",
         f"/api/marking/events?assignment_id=hw-sec&token={w.tokens.events('hw-other')}",
         (401,)),
        ("events with an expired token", "GET",
         f"/api/marking/events?assignment_id=hw-sec&token={expired_events_token('hw-sec')}",
         (401,)),
    ]
    served = {t for _, t in routes(w)}

    def exists(path: str) -> bool:
        return any(re.fullmatch(re.sub(r"\{[a-z_]+\}", "[^/]+", t), path.split("?")[0])
                   for t in served)

    for name, method, path, expect in cases + optional:
        if not exists(path):
            continue  # that route is not built (yet)
        headers = {} if "token=" in path else AUTH
        await attack(w, Attack(name, method, path, expect, headers=headers))
    # A SQL-looking value where any string is fine matches nothing and changes nothing.
    for path in (f"/api/marking/queue?assignment_id={SQLISH}",
                 f"/api/marking/assignments/{SQLISH.replace('/', '')}/progress"):
        if path.startswith("/api/marking/assignments") and \
                "/api/marking/assignments/{assignment_id}/progress" not in served:
            continue
        await attack(w, Attack(f"SQL-looking string in {path}", "GET", path, (200,),
                               headers=AUTH))
    report(w)


# -- the operator pages -------------------------------------------------------------


async def test_pages_need_a_session_and_every_form_its_csrf_token(world: World) -> None:
    w = world
    await attack(w, Attack("wrong password", "POST", "/ai-queue/login", (401,),
                           headers={"content-type": "application/x-www-form-urlencoded"},
                           content=b"password=wrong-password", error_body=False))
    assert "aiqueue_session" not in w.client.cookies
    await attack(w, Attack("huge login form", "POST", "/ai-queue/login", (413,),
                           headers={"content-type": "application/x-www-form-urlencoded"},
                           content=b"password=" + b"x" * 100_000, error_body=False))
    posts = [(m, t) for m, t in routes(w) if m == "POST" and t.startswith(("/ai-queue",
                                                                            "/results"))
             and not t.startswith("/ai-queue/log")]
    login = await w.client.post("/ai-queue/login", data={"password": SECRET})
    assert login.status_code == 303 and "aiqueue_session" in w.client.cookies
    form = {"content-type": "application/x-www-form-urlencoded"}
    for method, template in posts:
        path = fill(w, template)
        for name, content in [("no CSRF token", b"assignment_id=hw-sec"),
                              ("a wrong CSRF token", b"csrf_token=forged&assignment_id=hw-sec"),
                              ("the session cookie as CSRF token",
                               b"csrf_token=" + (w.client.cookies.get("aiqueue_session") or "")
                               .encode())]:
            await attack(w, Attack(f"{name} on {template}", method, path, (401, 403),
                                   headers=form, content=content, error_body=False))
    report(w)


# -- secrets -------------------------------------------------------------------------


def test_secrets_are_compared_in_constant_time() -> None:
    assert "hmac.compare_digest" in inspect.getsource(tokens_module.same_secret)
    assert "same_secret" in inspect.getsource(http_module.require_bearer)
    # No secret, password, CSRF or token is ever compared with == anywhere in the app.
    import aiqueue

    package = inspect.getfile(aiqueue).rsplit("/", 1)[0]
    pattern = re.compile(r"(secret|password|csrf|token)\w*\s*[!=]=\s*(?!None)"
                         r"|[!=]=\s*[\w.]*(secret|password|csrf)", re.I)
    import pathlib

    offenders = [f"{path.name}:{n}" for path in pathlib.Path(package).rglob("*.py")
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if pattern.search(line) and "is None" not in line]
    assert offenders == []


async def test_bearer_checks_go_through_compare_digest(world: World,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    r = await world.client.get("/api/marking/stats",
                               headers={"authorization": "Bearer wrong-secret-0123456789abcdef"})
    assert r.status_code == 401
    assert (b"wrong-secret-0123456789abcdef", SECRET.encode()) in seen


async def test_no_secret_token_or_content_reaches_a_log_line(world: World,
                                                             sink: LogSink) -> None:
    """A whole flow plus a round of attacks: the logs carry ids and codes only."""
    w = world
    w.function.side_effect = None
    r = await w.client.post("/ai-queue/login", data={"password": SECRET})
    cookie = r.cookies.get("aiqueue_session") or ""
    await w.client.post("/ai-queue/login", data={"password": "wrong-" + SECRET})
    await w.client.get("/api/marking/stats", headers={"authorization": f"Bearer {SECRET}x"})
    await w.client.get("/api/marking/process-queue", headers={"authorization": f"Bearer {CRON}"})
    # Finish the processing row with its real token: the slot frees and the next row goes out.
    token_p = w.token(w.processing)
    await w.client.post("/webhooks/ai-mark", json=[{
        "queue_id": str(w.processing.queue_id), "token": token_p, "status": "completed",
        "result": {"score": 7, "max_score": 10, "feedback": f"You wrote {CONTENT}"},
        "usage": {"model": "m", "prompt_tokens": 1, "completion_tokens": 1}}])
    r = await w.client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-sec", "submission_ids": [str(w.subs[3]), str(w.subs[4])]})
    assert r.status_code == 202
    issued = [json.loads(c.request.content)["callback_token"] for c in w.function.calls]
    assert issued, "a row was dispatched"
    for call in w.function.calls:
        job = json.loads(call.request.content)
        await w.client.post("/webhooks/ai-mark", json=[{
            "queue_id": job["queue_id"], "token": job["callback_token"], "status": "failed",
            "error": f"the model could not read {CONTENT}"}])
    await w.client.post("/webhooks/ai-mark", json=[{
        "queue_id": str(w.done.queue_id), "token": "x" + token_p, "status": "completed",
        "result": {"feedback": CONTENT}}])
    needles = {"queue secret": SECRET, "cron secret": CRON, "session cookie": cookie,
               "events token": w.tokens.events("hw-sec"), "content": CONTENT,
               "callback token": token_p, **{f"issued token {i}": t for i, t in
                                             enumerate(issued)}}
    assert sink.lines, "the flow logged something"
    leaks = [f"{what} in: {line[:200]}" for line in sink.lines
             for what, needle in needles.items() if needle and needle in line]
    assert leaks == []
