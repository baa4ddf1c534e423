"""docs/deploying/index.md on databases prepared as Supabase and Neon prepare one (tests/roles.py).

- the doctor's lockdown check passes there and names the platform's own roles as a note;
- it warns when another role can read the host's own `submissions`;
- it judges the app's own powers: a runtime role passes, the owner warns, a superuser,
  a BYPASSRLS role and a member of pg_read_all_data or neon_superuser fail;
- the walk of "done when": after `migrate up` and a Mark All run as the runtime role,
  no API role reaches any queue table or `submissions`, the host's `ai_prompts` is
  unchanged, and the doctor's report is clean.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
import respx

from aiqueue.doctor.checks import check_schema
from aiqueue.doctor.report import Check, Doctor
from aiqueue.doctor.roles import check_lockdown, check_role, check_submissions
from aiqueue.runtime import Runtime
from aiqueue.web.app import create_app
from tests.conftest import AUTH, FN, add_submissions, app_client, make_settings
from tests.integration.doctor_kit import fake_function, knows_probes
from tests.integration.lockdown_kit import HOST_AI_OBJECTS, HOST_NOW, probe
from tests.roles import (
    NEON_SUPERUSER,
    SUPABASE_PLATFORM,
    SUPABASE_ROLES,
    RuntimeDb,
    as_user,
    ensure_role,
    runtime_database,
)

HOST_SUBMISSIONS = """
CREATE TABLE submissions (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
                          assignment_id text NOT NULL, content text NOT NULL DEFAULT '');
"""


@pytest.fixture
async def supabase(pg_admin: str) -> AsyncIterator[RuntimeDb]:
    async with runtime_database(pg_admin, platform="supabase", host_sql=HOST_AI_OBJECTS) as db:
        yield db


async def role_checks(dsn: str) -> dict[str, Check]:
    """The doctor's database checks, with DATABASE_URL logging in through `dsn`."""
    settings = make_settings(dsn)
    rt = await Runtime.create(settings, dsn)
    try:
        doc = Doctor(settings, rt)
        await check_schema(doc)
        for check in (check_lockdown, check_submissions, check_role):
            await check(doc)
    finally:
        await rt.close()
    return {c.name: c for c in doc.report.checks}


async def test_on_supabase_the_lockdown_passes_and_names_the_platform_roles(
    supabase: RuntimeDb
) -> None:
    checks = await role_checks(supabase.runtime_dsn)
    lockdown = checks["lockdown"]
    assert lockdown.status == "pass", lockdown.detail
    assert "note" in lockdown.detail
    for role in SUPABASE_PLATFORM:
        assert role in lockdown.detail
    for role in SUPABASE_ROLES:
        assert role not in lockdown.detail
    assert (checks["submissions"].status, checks["role"].status) == ("pass", "pass")
    assert supabase.role in checks["role"].detail


async def login_role(admin_dsn: str, name: str, options: str, grants: str) -> str:
    """A LOGIN role with `options` and the GRANT `grants` (with {name}); its DSN."""
    admin = await asyncpg.connect(admin_dsn)
    try:
        await ensure_role(admin, name, f"LOGIN PASSWORD 'pw-{name}' {options}")
        await admin.execute(grants.format(name=f'"{name}"'))
    finally:
        await admin.close()
    return as_user(admin_dsn, name, f"pw-{name}")


async def test_the_apps_own_powers(supabase: RuntimeDb) -> None:
    tag = supabase.role.removeprefix("aiqueue_rt_")
    bypass, reader = f"aiqueue_bypass_{tag}", f"aiqueue_reader_{tag}"
    found = {
        "runtime": (await role_checks(supabase.runtime_dsn))["role"],
        "owner": (await role_checks(supabase.owner_dsn))["role"],
        "superuser": (await role_checks(supabase.admin_dsn))["role"],
        # Each holds the runtime role's rights too, so only its extra power differs.
        "bypassrls": (await role_checks(await login_role(
            supabase.admin_dsn, bypass, "BYPASSRLS", f'GRANT "{supabase.role}" TO {{name}}'
        )))["role"],
        # A member that must SET ROLE to read everything (INHERIT FALSE, PostgreSQL 16):
        # as powerful, but it shows in no other database's lockdown check meanwhile
        # (roles belong to the whole server, which parallel sessions share).
        "read_all": (await role_checks(await login_role(
            supabase.admin_dsn, reader, "", f'GRANT "{supabase.role}" TO {{name}};'
            " GRANT pg_read_all_data TO {name} WITH INHERIT FALSE")))["role"],
    }
    admin = await asyncpg.connect(supabase.admin_dsn)
    try:
        await admin.execute(f'DROP ROLE "{bypass}"; DROP ROLE "{reader}"')
    finally:
        await admin.close()
    assert {k: c.status for k, c in found.items()} == {
        "runtime": "pass", "owner": "warn", "superuser": "fail", "bypassrls": "fail",
        "read_all": "fail"}
    assert "the queue's owner" in found["owner"].detail
    assert found["owner"].fix is not None and "--runtime-role" in found["owner"].fix
    assert "a superuser" in found["superuser"].detail
    assert "BYPASSRLS" in found["bypassrls"].detail
    assert "pg_read_all_data" in found["read_all"].detail


async def test_on_neon_a_member_of_neon_superuser_fails(pg_admin: str) -> None:
    async with runtime_database(pg_admin, platform="neon") as db:
        # The owner, made as Neon's console makes roles: a member of neon_superuser.
        as_owner = (await role_checks(db.owner_dsn))["role"]
        as_runtime = await role_checks(db.runtime_dsn)
    assert as_owner.status == "fail"
    assert NEON_SUPERUSER in as_owner.detail
    assert as_owner.fix is not None and "create the app's role with SQL" in as_owner.fix
    assert as_runtime["role"].status == "pass"
    assert as_runtime["lockdown"].status == "pass", as_runtime["lockdown"].detail


async def test_the_doctor_warns_when_the_hosts_submissions_are_readable(pg_admin: str) -> None:
    # Made by the owner after Supabase's default privileges: anon & co hold ALL on it.
    async with runtime_database(pg_admin, platform="supabase",
                                host_sql=HOST_SUBMISSIONS) as db:
        opened = (await role_checks(db.runtime_dsn))["submissions"]
        owner = await asyncpg.connect(db.owner_dsn)
        try:
            await owner.execute("ALTER TABLE submissions ENABLE ROW LEVEL SECURITY")
            walled = (await role_checks(db.runtime_dsn))["submissions"]
            await owner.execute("CREATE POLICY own ON submissions FOR SELECT TO authenticated"
                                " USING (true)")
            policy = (await role_checks(db.runtime_dsn))["submissions"]
            await owner.execute("REVOKE ALL ON submissions FROM anon, authenticated, "
                                "service_role")
            closed = (await role_checks(db.runtime_dsn))["submissions"]
            lockdown = (await role_checks(db.runtime_dsn))["lockdown"]
        finally:
            await owner.close()
    assert opened.status == "warn"
    assert opened.detail.startswith("student answers are readable by `anon`")
    assert "`authenticated`" in opened.detail and "`service_role`" in opened.detail
    assert opened.fix is not None and "REVOKE ALL ON submissions FROM anon" in opened.fix
    # Row-level security without a policy stops anon and authenticated; service_role
    # bypasses it, and a policy lets authenticated in again.
    assert walled.status == "warn" and "`anon`" not in walled.detail
    assert "`service_role`" in walled.detail and "`authenticated`" not in walled.detail
    assert "`authenticated`" in policy.detail and "policy" in policy.detail
    assert closed.status == "pass"
    assert lockdown.status == "pass"


async def test_after_mark_all_no_api_role_reaches_the_queue_or_submissions(
    supabase: RuntimeDb
) -> None:
    owner = await asyncpg.connect(supabase.owner_dsn)
    su = await asyncpg.connect(supabase.admin_dsn)
    try:
        ids = await add_submissions(owner, 3, content="a student essay")
        host_before = [tuple(r) for r in await owner.fetch(HOST_NOW)]
        app = create_app(make_settings(supabase.runtime_dsn))
        async with app_client(app) as client:
            with respx.mock(assert_all_called=False) as mock:
                mock.route(host="app.test").pass_through()
                mock.post(FN).mock(side_effect=fake_function(client, knows_probes))
                marked = await client.post("/api/marking/enqueue", headers=AUTH, json={
                    "assignment_id": "hw-1", "submission_ids": [str(i) for i in ids]})
                report = (await client.get("/api/marking/doctor", headers=AUTH)).json()
        assert marked.status_code == 202 and marked.json()["enqueued"] == 3
        assert await owner.fetchval("SELECT count(*) FROM ai_marking_queue") == 3
        for role in (*SUPABASE_ROLES, "authenticator"):
            found = await probe(su, role)
            assert found.allowed == [], f"{role} may: {found.allowed}"
        assert [tuple(r) for r in await owner.fetch(HOST_NOW)] == host_before
        assert await owner.fetchval("SELECT prompt FROM ai_prompts") == "Summarise the essay"
    finally:
        await owner.close()
        await su.close()
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["lockdown"]["status"] == "pass"
    assert all(role in checks["lockdown"]["detail"] for role in SUPABASE_PLATFORM)
    assert {checks[k]["status"] for k in ("submissions", "role", "function", "probe")} == {
        "pass"}
    assert report["ok"] is True
