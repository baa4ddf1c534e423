"""Rotating MARKING_QUEUE_SECRET and CRON_SECRET: the new value goes in front, the old
one keeps working until it is removed; callbacks and sessions in flight survive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx
import respx

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Job
from aiqueue.settings import load_settings
from aiqueue.tokens import Tokens
from aiqueue.web.app import create_app
from tests.conftest import PASSWORD, add_submissions, make_settings, mocked_function
from tests.plans import plan_of

OLD = "old-secret-0123456789abcdef"
NEW = "new-secret-fedcba9876543210"
OLD_CRON, NEW_CRON = "old-cron-secret-0123", "new-cron-secret-4567"


@asynccontextmanager
async def app_with(db_url: str, secrets: tuple[str, ...], crons: tuple[str, ...] = ()
                   ) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(db_url, queue_secrets=secrets, admin_password=secrets[0],
                             cron_secrets=crons)
    app = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as client:
        yield client
    await app.state.aiqueue.close()


def bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


async def dispatched_job(db_url: str, conn: asyncpg.Connection) -> Job:
    """A row dispatched before the rotation: its callback token is signed with OLD."""
    subs = await add_submissions(conn, 1, "hw-rot")
    store = Store(await connect_pool(db_url, max_size=1))
    try:
        await store.enqueue(subs, "hw-rot", 0, {})
        job = await store.claim(plan_of(0, 5))
    finally:
        await store.close()
    assert job is not None
    return job


async def test_a_callback_signed_with_the_old_secret_is_accepted_after_rotating(
    db_url: str, conn: asyncpg.Connection, function: respx.Route
) -> None:
    job = await dispatched_job(db_url, conn)
    token = Tokens((OLD,)).callback(job.queue_id, job.dispatch_seq, job.attempt)
    item = {"queue_id": str(job.queue_id), "token": token, "status": "completed",
            "result": {"score": 3, "max_score": 5, "feedback": "ok"}}
    # Rotated but the old value not yet removed: the result is applied.
    async with app_with(db_url, (NEW, OLD)) as client:
        r = await client.post("/webhooks/ai-mark", json=[item])
    assert r.status_code == 200 and r.json()["accepted"] == 1, r.text
    assert await conn.fetchval("SELECT status FROM ai_marking_queue WHERE queue_id = $1",
                               job.queue_id) == "completed"
    # Once the old value is removed, its tokens are refused.
    async with app_with(db_url, (NEW,)) as client:
        r = await client.post("/webhooks/ai-mark", json=[item])
    assert r.status_code == 401


async def test_new_tokens_are_signed_with_the_newest_secret(db_url: str) -> None:
    async with app_with(db_url, (NEW, OLD)) as client:
        r = await client.post("/ai-queue/login", data={"password": NEW})
        cookie = r.cookies["aiqueue_session"]
    assert Tokens((NEW,)).verify_session(cookie, max_age=60) is not None
    assert Tokens((OLD,)).verify_session(cookie, max_age=60) is None


async def test_a_session_from_before_the_rotation_survives_it(db_url: str) -> None:
    async with app_with(db_url, (OLD,)) as client:
        r = await client.post("/ai-queue/login", data={"password": OLD})
        assert r.status_code == 303
        cookie = r.cookies["aiqueue_session"]
    with mocked_function():
        async with app_with(db_url, (NEW, OLD)) as client:
            client.cookies.set("aiqueue_session", cookie)
            assert (await client.get("/ai-queue")).status_code == 200
        async with app_with(db_url, (NEW,)) as client:
            client.cookies.set("aiqueue_session", cookie)
            r = await client.get("/ai-queue")
            assert r.status_code == 303 and r.headers["location"].startswith("/ai-queue/login")


async def test_the_old_bearer_works_until_it_is_removed(db_url: str) -> None:
    async with app_with(db_url, (NEW, OLD), (NEW_CRON, OLD_CRON)) as client:
        for secret in (NEW, OLD):
            assert (await client.get("/api/marking/stats", headers=bearer(secret))
                    ).status_code == 200
        with mocked_function():
            for secret in (NEW_CRON, OLD_CRON):
                r = await client.get("/api/marking/process-queue", headers=bearer(secret))
                assert r.status_code == 200, r.text
    async with app_with(db_url, (NEW,), (NEW_CRON,)) as client:
        assert (await client.get("/api/marking/stats", headers=bearer(OLD))).status_code == 401
        assert (await client.get("/api/marking/stats", headers=bearer(NEW))).status_code == 200
        r = await client.get("/api/marking/process-queue", headers=bearer(OLD_CRON))
        assert r.status_code == 401


@asynccontextmanager
async def app_from_env(db_url: str, env: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its secrets read from `env` as a deployment would set them."""
    loaded = load_settings({"MARKING_QUEUE_SECRET": NEW, **env})
    fields = ("queue_secrets", "cron_secrets", "admin_password")
    settings = make_settings(db_url, **{f: getattr(loaded, f) for f in fields})
    app = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as client:
        yield client
    await app.state.aiqueue.close()


async def test_vercel_cron_keeps_working_during_a_cron_secret_rotation(db_url: str) -> None:
    # Vercel Cron sends `Bearer <CRON_SECRET>` with the variable's whole value.
    async with app_from_env(db_url, {"CRON_SECRET": f"{NEW_CRON} {OLD_CRON}"}) as client:
        with mocked_function():
            for sent in (f"{NEW_CRON} {OLD_CRON}", NEW_CRON, OLD_CRON):
                r = await client.get("/api/marking/process-queue", headers=bearer(sent))
                assert r.status_code == 200, (sent, r.text)
        for wrong in (f"{OLD_CRON} {NEW_CRON}", f"{NEW_CRON} x", f"{NEW_CRON}{OLD_CRON}"):
            r = await client.get("/api/marking/process-queue", headers=bearer(wrong))
            assert r.status_code == 401, wrong
        # The whole cron value is the cron's, not a queue bearer.
        r = await client.get("/api/marking/stats", headers=bearer(f"{NEW_CRON} {OLD_CRON}"))
        assert r.status_code == 401


async def test_changing_the_admin_password_ends_every_session(db_url: str) -> None:
    first, second = PASSWORD, PASSWORD + "-changed"
    async with app_from_env(db_url, {"AI_QUEUE_ADMIN_PASSWORD": first}) as client:
        r = await client.post("/ai-queue/login", data={"password": first})
        assert r.status_code == 303
        cookie = r.cookies["aiqueue_session"]
    with mocked_function():
        async with app_from_env(db_url, {"AI_QUEUE_ADMIN_PASSWORD": first}) as client:
            client.cookies.set("aiqueue_session", cookie)
            assert (await client.get("/ai-queue")).status_code == 200
        for env in ({"AI_QUEUE_ADMIN_PASSWORD": second}, {}):
            async with app_from_env(db_url, env) as client:
                client.cookies.set("aiqueue_session", cookie)
                r = await client.get("/ai-queue")
                assert r.status_code == 303 and r.headers["location"].startswith("/ai-queue/login")
