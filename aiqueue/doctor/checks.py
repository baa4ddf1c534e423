"""`aiqueue doctor` (docs/operating/doctor.md): checks the deployment the settings point at.

One line per check, each failure with its fix.  The same report is the CLI's,
`GET /api/marking/doctor`'s and the Setup panel's on /ai-queue.  The wording of
each finding lives in text.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiqueue.db.doctor import code_schema_version, detect_pooler, listen_works
from aiqueue.doctor.batch import check_batch_keys
from aiqueue.doctor.report import Doctor, Report
from aiqueue.doctor.roles import check_cron, check_lockdown, check_role, check_submissions
from aiqueue.doctor.storage import check_storage
from aiqueue.doctor.text import cache_finding, function_finding, probe_finding
from aiqueue.errors import StoreError
from aiqueue.queue import probes
from aiqueue.runtime import Runtime, unknown_zone
from aiqueue.settings import Settings
from aiqueue.settings.kinds import DEFAULT_KIND
from aiqueue.settings.safety import is_local_url

LISTEN_TIMEOUT_SECONDS = 5.0
# Where LISTEN and migrations can go (docs/deploying/index.md).  Supabase's direct host is
# IPv6-only and Vercel has no IPv6, so from Vercel only Supavisor's session mode works.
SESSION_HINT = ("Supabase: Supavisor's session mode, port 5432 on "
                "aws-0-<region>.pooler.supabase.com, user postgres.<ref>; the direct host "
                "db.<ref>.supabase.co is IPv6-only and Vercel has no IPv6. Neon: the host "
                "without -pooler")


async def run_doctor(settings: Settings, rt: Runtime | None = None, *,
                     probe_timeout: float = probes.PROBE_TIMEOUT_SECONDS) -> Report:
    """Every check in order; a Runtime is made (and closed) here when none is given."""
    own = rt is None
    doc = Doctor(settings, rt, probe_timeout)
    doc.add("settings", "pass", f"valid (dispatch: {settings.dispatch_target})")
    if own:
        doc.rt = await _connect(doc)
    try:
        for name, check in CHECKS:
            try:
                await check(doc)
            except StoreError as exc:
                doc.add(name, "fail", f"the database failed during this check: {exc.detail}",
                        "run the doctor again; if it persists, check the database")
    finally:
        if own and doc.rt is not None:
            await doc.rt.close()
    return doc.report


async def _connect(doc: Doctor) -> Runtime | None:
    """The doctor's own Runtime, or None with the database line saying why."""
    url = doc.settings.database_url
    detail = "DATABASE_URL is not set"
    if url:
        try:
            return await Runtime.create(doc.settings, url)
        except StoreError as exc:
            detail = f"DATABASE_URL: {exc.detail}"
    doc.add("database", "fail", detail,
            "check DATABASE_URL (host, port, user, password, database name) and that the "
            "server accepts connections from here")
    return None


async def check_schema(doc: Doctor) -> None:
    rt = doc.rt
    if rt is None:
        doc.add("schema", "skip", "not checked: the database is unreachable")
        return
    try:
        found = await rt.store.schema_version()
    except StoreError as exc:
        doc.add("database", "fail", f"DATABASE_URL answered with an error: {exc.detail}",
                "check the database user's rights (docs/deploying/index.md, step 2)")
        return
    doc.add("database", "pass", "reachable through DATABASE_URL")
    expected = code_schema_version()
    if found is None:
        doc.add("schema", "fail", "DATABASE_URL's role may not read aiqueue_migrations: "
                                  "the schema cannot be checked",
                "run `python -m aiqueue migrate up --runtime-role ROLE` as the owner, "
                "naming this role")
        return
    if found < expected:
        doc.add("schema", "fail", f"the database has schema {found}, this code needs {expected}",
                "run `python -m aiqueue migrate up --runtime-role ROLE` as the database owner "
                "(docs/deploying/index.md, step 2)")
    elif found > expected:
        doc.add("schema", "pass", f"schema {found}, newer than this code's {expected}: "
                                  "deploy the newer code")
    else:
        doc.add("schema", "pass", f"current (migration {found})")
    doc.schema_current = found >= expected


async def check_pooler(doc: Doctor) -> None:
    """Is a transaction pooler in the way?  Then a session URL must carry LISTEN."""
    s = doc.settings
    if doc.rt is None or not s.database_url:
        doc.add("pooler", "skip", "not checked: the database is unreachable")
        return
    direct = s.database_direct_url or s.database_url
    direct_set = direct != s.database_url
    try:
        found = await detect_pooler(s.database_url)
    except StoreError as exc:
        doc.add("pooler", "fail", f"could not look behind DATABASE_URL: {exc.detail}")
        return
    prepared = _prepared(doc, found.pooled)
    if not found.pooled:
        doc.add("pooler", "pass",
                f"no transaction pooler in the way ({found.evidence}); {prepared}")
    elif not direct_set:
        doc.add("pooler", "fail",
                f"DATABASE_URL goes through a transaction pooler ({found.evidence}) and "
                f"DATABASE_DIRECT_URL is not set: live events fall back to polling; {prepared}",
                f"set DATABASE_DIRECT_URL to a session connection ({SESSION_HINT})")
        return
    else:
        doc.add("pooler", "pass", f"DATABASE_URL goes through a transaction pooler "
                                  f"({found.evidence}); DATABASE_DIRECT_URL is set; {prepared}")
    await _check_listen(doc, direct, direct_set)


def _prepared(doc: Doctor, pooled: bool) -> str:
    """DATABASE_PREPARED_STATEMENTS: which the instance chose, and why (the pooler's line)."""
    assert doc.rt is not None
    choice = doc.rt.store.prepared_statements()
    if choice is None:
        return "prepared statements not chosen yet (no connection was opened)"
    said = f"prepared statements {'on' if choice.on else 'off'} ({choice.why})"
    if choice.on and pooled and doc.settings.database_prepared_statements == "auto":
        # A pooler on the database's own port: the first lost statement turns them off.
        return said + ", but a transaction pooler is in the way: the first statement it " \
                      "loses turns them off for the instance (logged once, the request " \
                      "answered); DATABASE_PREPARED_STATEMENTS=off skips that"
    if choice.on and pooled:
        # Only a PgBouncer 1.21+ with max_prepared_statements keeps them there.
        return said + ": the pooler must keep them (PgBouncer 1.21+ with " \
                      "max_prepared_statements), else set DATABASE_PREPARED_STATEMENTS=auto"
    return said


async def _check_listen(doc: Doctor, direct: str, direct_set: bool) -> None:
    s = doc.settings
    name = "DATABASE_DIRECT_URL" if direct_set else "DATABASE_URL"
    assert s.database_url
    try:
        if direct_set and (await detect_pooler(direct)).pooled:
            doc.add("listen", "fail", "DATABASE_DIRECT_URL also goes through a transaction "
                                      "pooler: LISTEN cannot work there",
                    f"point DATABASE_DIRECT_URL at a session connection ({SESSION_HINT})")
            return
        heard = await listen_works(direct, s.database_url, LISTEN_TIMEOUT_SECONDS)
    except StoreError as exc:
        doc.add("listen", "fail", f"cannot connect through {name}: {exc.detail}",
                f"check {name}; it must be a session connection ({SESSION_HINT})")
        return
    if heard:
        doc.add("listen", "pass", f"LISTEN through {name} hears a NOTIFY sent through "
                                  "DATABASE_URL: live events are pushed")
    else:
        doc.add("listen", "fail", f"LISTEN through {name} heard no NOTIFY within "
                                  f"{LISTEN_TIMEOUT_SECONDS:g} s: live events fall back to polling",
                f"set DATABASE_DIRECT_URL to a session connection to the same database "
                f"({SESSION_HINT})")


async def check_function(doc: Doctor) -> None:
    """The function is reachable with its credentials: the probe's dispatch answers 2xx."""
    if doc.rt is None:
        doc.add("function", "skip", "not checked: the database is unreachable (the probe "
                                    "needs it for the answer)")
        return
    if not doc.schema_current:
        doc.add("function", "skip", "not checked until the schema is current (the probe's "
                                    "answer is recorded in it)")
        return
    # Every kind's function (docs/concepts.md), probed at once: the default kind's
    # lines keep their names, another kind's say which (`function:essay`).
    kinds = sorted(doc.settings.queue.kinds)
    rt = doc.rt
    results = await asyncio.gather(*(
        probes.run_probe(rt, doc.probe_timeout, doc.settings.target(k)) for k in kinds))
    for kind, result in zip(kinds, results, strict=True):
        suffix = "" if kind == DEFAULT_KIND else f":{kind}"
        target = doc.settings.target(kind)
        status, detail, fix = function_finding(target, result.sent, doc.settings.aws_env_names)
        doc.add(f"function{suffix}", status, detail, fix)
        if status == "pass":
            status, detail, fix = probe_finding(target, result)
            doc.add(f"probe{suffix}", status, detail, fix)
        else:
            doc.add(f"probe{suffix}", "skip", "not run: the function did not take the probe")


async def check_vercel(doc: Doctor) -> None:
    s = doc.settings
    if not s.on_vercel:
        doc.add("vercel", "skip", "not on Vercel (VERCEL is unset)")
        return
    problems, fixes = [], []
    if is_local_url(s.app_base_url) and not s.vercel_dev:
        problems.append(f"APP_BASE_URL is a local address ({s.app_base_url})")
        fixes.append("set APP_BASE_URL to the production URL")
    if not s.cron_secrets:
        problems.append("CRON_SECRET is not set: Vercel Cron's safety net is refused")
        fixes.append("set CRON_SECRET (16+ random characters) and redeploy")
    if problems:
        doc.add("vercel", "fail", "; ".join(problems), "; ".join(fixes))
    else:
        where = "vercel dev" if s.vercel_dev else s.app_base_url
        doc.add("vercel", "pass", f"APP_BASE_URL {where}, CRON_SECRET set")


async def check_prompt_cache(doc: Doctor) -> None:
    """Each pool's recent prompt prefixes against its min_tokens (docs/prompt-cache.md)."""
    if doc.rt is None or not doc.schema_current:
        doc.add("prompt_cache", "skip", "not checked: the database is unreachable or behind")
        return
    seen = await doc.rt.store.prompt_prefixes()
    for name, pool in sorted(doc.settings.queue.pools.items()):
        if pool.prompt_cache.on:
            suffix = "" if name == "default" else f":{name}"
            status, detail, fix = cache_finding(name, pool.prompt_cache.min_tokens,
                                                seen.get(name))
            doc.add(f"prompt_cache{suffix}", status, detail, fix)


async def check_canaries(doc: Doctor) -> None:
    """Each declared canary kind against the teacher-reviewed results it can draw from
    (docs/canaries.md): fewer than its `rows` is a warning that names the kind."""
    kinds = sorted((k for k in doc.settings.queue.kinds.values() if k.canary is not None),
                   key=lambda k: k.name)
    if not kinds:
        return  # nothing declared, nothing to say
    if doc.rt is None or not doc.schema_current:
        doc.add("canary", "skip", "not checked: the database is unreachable or behind")
        return
    for kind in kinds:
        assert kind.canary is not None
        wanted = kind.canary.rows
        found = await doc.rt.store.canary_reviewed(kind.name, wanted)
        name = f"canary:{kind.name}"
        if found >= wanted:
            doc.add(name, "pass", f"kind {kind.name}: {found} teacher-reviewed results to "
                                  f"re-mark (rows = {wanted})")
        else:
            doc.add(name, "warn", f"kind {kind.name} declares a canary of {wanted} rows but "
                                  f"has {found} teacher-reviewed results to draw from",
                    "accept or adjust more of the kind's marks (teacher page), or lower "
                    f"kinds.{kind.name}.canary.rows in aiqueue.toml")
async def check_timezone(doc: Doctor) -> None:
    """QUEUE_TIMEZONE and each pool's `timezone` are known to the database too (no line
    while every zone is UTC, which every database knows)."""
    if all(zone == "UTC" for _, zone in doc.settings.zones):
        return
    if doc.rt is None:
        doc.add("timezone", "skip", "not checked: the database is unreachable")
        return
    found = await unknown_zone(doc.rt.store, doc.settings)
    if found is not None:
        doc.add("timezone", "fail", found.detail,
                f"set {found.setting} to a zone listed by `SELECT name FROM pg_timezone_names`")
        return
    named = ", ".join(f"{setting} {zone}" for setting, zone in doc.settings.zones)
    doc.add("timezone", "pass", f"known to the database: {named}")


Step = Callable[[Doctor], Awaitable[None]]
# The checks in the order they print (a name for the line when one breaks down).
# ("lockdown", check_lockdown) is the slot of docs/deploying/databases.md's check; roles.py holds
# it and docs/deploying/index.md's (who reads submissions, the app's own powers, the cron).
CHECKS: list[tuple[str, Step]] = [
    ("schema", check_schema), ("timezone", check_timezone), ("pooler", check_pooler),
    ("lockdown", check_lockdown),
    ("submissions", check_submissions), ("role", check_role),
    ("function", check_function), ("vercel", check_vercel), ("cron", check_cron),
    ("batch", check_batch_keys),
    ("prompt_cache", check_prompt_cache), ("canary", check_canaries),
    ("partitions", check_storage),
]
