"""The doctor on a real deployment's traps (docs/deploying/index.md): a cron that stopped calling, a
probe callback the app rejects because the two sides hold different secrets, and a
LISTEN that fails (its fix names Supavisor's session mode)."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest
import respx

from aiqueue.doctor.checks import check_function, check_pooler
from aiqueue.doctor.report import Doctor
from aiqueue.doctor.roles import check_cron
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.web.app import create_app
from tests.conftest import FN, app_client, make_settings
from tests.integration.doctor_kit import fake_function, knows_probes

CRON = "cron-secret-0123456789abcdef"
OTHER = "another-secret-0123456789abcdef"


async def run(settings: Settings, *checks: Any, probe_timeout: float = 30.0) -> Doctor:
    assert settings.database_url
    rt = await Runtime.create(settings, settings.database_url)
    try:
        doc = Doctor(settings, rt, probe_timeout)
        doc.schema_current = True
        for check in checks:
            await check(doc)
    finally:
        await rt.close()
    return doc


def found(doc: Doctor, name: str) -> tuple[str, str, str | None]:
    c = next(c for c in doc.report.checks if c.name == name)
    return c.status, c.detail, c.fix


async def test_the_doctor_warns_when_the_cron_has_not_called_in_3_periods(
    db_url: str, conn: asyncpg.Connection
):
    on_vercel = make_settings(db_url, on_vercel=True, cron_secrets=(CRON,))
    never = found(await run(on_vercel, check_cron), "cron")
    app = create_app(on_vercel)
    async with app_client(app) as client:
        with respx.mock(assert_all_called=False) as mock:
            mock.post(FN).mock(return_value=httpx.Response(202))
            called = await client.get("/api/marking/process-queue",
                                      headers={"authorization": f"Bearer {CRON}"})
    assert called.status_code == 200
    assert await conn.fetchval("SELECT now() - cron_called_at < interval '1 minute'"
                               " FROM ai_queue_control")
    recent = found(await run(on_vercel, check_cron), "cron")
    # vercel.json calls every minute: 2 minutes is fine, 4 is more than 3 periods.
    await conn.execute("UPDATE ai_queue_control SET cron_called_at = now() - interval '2 min'")
    late_ok = found(await run(on_vercel, check_cron), "cron")
    await conn.execute("UPDATE ai_queue_control SET cron_called_at = now() - interval '4 min'")
    late = found(await run(on_vercel, check_cron), "cron")
    off_vercel = found(await run(make_settings(db_url), check_cron), "cron")
    assert never[0] == "warn" and "never called" in never[1]
    assert recent[0] == "pass" and "schedule `* * * * *`" in recent[1]
    assert late_ok[0] == "pass"
    assert late[0] == "warn" and "4 min ago, more than 3 periods" in late[1]
    assert late[2] is not None and "Hobby plan runs a cron at most once a day" in late[2]
    # Off Vercel a cron that once called is still watched (the CLI beside a deployment).
    assert off_vercel[0] == "warn"
    await conn.execute("UPDATE ai_queue_control SET cron_called_at = NULL")
    assert found(await run(make_settings(db_url), check_cron), "cron")[0] == "skip"


def forward_to(client: httpx.AsyncClient) -> Any:
    """respx side effect: hand a request for app.test to the in-process app."""
    async def forward(request: httpx.Request) -> httpx.Response:
        answer = await client.request(request.method, request.url.path,
                                      content=request.content, headers=request.headers)
        return httpx.Response(answer.status_code, content=answer.content,
                              headers=answer.headers)
    return forward


@pytest.mark.parametrize(("app_secret", "says"), [
    (OTHER, "the two sides hold different secrets"),
    (None, "the function cannot reach the app"),
])
async def test_a_rejected_probe_callback_names_the_secrets(
    db_url: str, app_secret: str | None, says: str
):
    doctor = make_settings(db_url)
    app = create_app(doctor.with_overrides(queue_secrets=(app_secret,)) if app_secret
                     else doctor)
    async with app_client(app) as client:
        with respx.mock(assert_all_called=False) as mock:
            mock.route(host="app.test").mock(side_effect=forward_to(client))
            # The function calls back only when the app shares the doctor's secret; a
            # function that lost its callback otherwise (the second case).
            calls_back = knows_probes if app_secret else (lambda d: None)
            mock.post(FN).mock(side_effect=fake_function(client, calls_back))
            doc = await run(doctor, check_function, probe_timeout=1.0)
    status, detail, fix = found(doc, "probe")
    assert status == "fail" and says in detail, detail
    assert fix is not None
    if app_secret:
        assert "MARKING_QUEUE_SECRET" in fix and "APP_BASE_URL" not in fix
    else:
        assert "APP_BASE_URL" in fix


async def test_a_listen_that_fails_names_supavisors_session_mode(db_url: str):
    broken = db_url.replace("postgres:@", "nobody_here:@", 1)
    assert broken != db_url
    doc = await run(make_settings(db_url, database_direct_url=broken), check_pooler)
    status, detail, fix = found(doc, "listen")
    assert status == "fail" and "DATABASE_DIRECT_URL" in detail
    assert fix is not None and "session mode, port 5432" in fix and "IPv6" in fix
