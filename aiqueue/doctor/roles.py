"""The doctor's checks of who may do what, and of the cron.

- lockdown: no role but the owner and the runtime role reaches the queue; the
  platform's own roles (which no migration can lock out) are named as a note;
- submissions: the host's own `submissions` keeps its owner's grants, so the
  doctor warns when another role can read student answers;
- role: the app's own powers (a superuser, BYPASSRLS or a read-all/write-all
  membership fails; the queue's owner warns);
- cron: on Vercel, the cron has called within 3 periods of its schedule.
"""

from __future__ import annotations

import json

from aiqueue.doctor.report import Doctor
from aiqueue.doctor.storage import fill_finding
from aiqueue.doctor.text import Finding
from aiqueue.errors import StoreError
from aiqueue.models import AppRole
from aiqueue.paths import VERCEL_JSON

PROCESS_PATH = "/api/marking/process-queue"
# vercel.json's shipped schedule: every minute.
DEFAULT_CRON = "* * * * *"
CRON_PERIODS_LATE = 3
RUNTIME_FIX = ("create a role for the app with SQL (CREATE ROLE aiqueue_app LOGIN PASSWORD "
               "'…'), run `python -m aiqueue migrate up --runtime-role aiqueue_app` as the "
               "owner, and point DATABASE_URL at aiqueue_app "
               "(docs/deploying/index.md, step 2)")


def _not_ready(doc: Doctor, name: str) -> bool:
    if doc.rt is None or not doc.schema_current:
        doc.add(name, "skip", "not checked until the database answers with a current schema")
        return True
    return False


async def check_lockdown(doc: Doctor) -> None:
    """No role but the owner and the runtime role reaches the queue."""
    if _not_ready(doc, "lockdown"):
        return
    assert doc.rt is not None
    try:
        found = await doc.rt.store.queue_exposures()
        platform = await doc.rt.store.platform_roles()
    except StoreError as exc:
        doc.add("lockdown", "fail", f"could not read the privileges ({exc.code})",
                "run the doctor with a role that may read the catalog (the owner or the "
                "runtime role)")
        return
    note = ""
    if platform:
        note = ("; note: the platform's own roles reach every table by design and no "
                f"migration can lock them out: {', '.join(platform)}")
    if not found:
        doc.add("lockdown", "pass", f"only the owner and the runtime role reach the queue{note}")
        return
    shown = "; ".join(f"{e.role}: {e.privilege} on {e.kind} {e.object}" for e in found[:5])
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    fix = ("run `python -m aiqueue migrate up` as the owner: every `up` re-applies the "
           "lockdown (see docs/deploying/databases.md)")
    wide = sorted({e.role for e in found} & set(await doc.rt.store.wide_members()))
    if wide:
        fix += (f"; {', '.join(wide)} reach every table through pg_read_all_data or "
                "pg_write_all_data (on Neon: neon_superuser), which no migration takes away: "
                "revoke that membership, or drop the role if nothing needs it")
    doc.add("lockdown", "fail", f"other roles reach the queue: {shown}{more}{note}", fix)


async def check_submissions(doc: Doctor) -> None:
    """The host's `submissions` keeps its grants, and room on its pages for a result's
    update; warn when others can read it or its updates rewrite every index."""
    if _not_ready(doc, "submissions"):
        return
    assert doc.rt is not None
    try:
        readers = await doc.rt.store.submissions_readers()
        fill = fill_finding(await doc.rt.store.submissions_fill())
    except StoreError as exc:
        doc.add("submissions", "skip", f"could not read the privileges ({exc.code})")
        return
    if not readers:
        if fill:
            doc.add("submissions", "warn", "only the owner and the runtime role can read "
                                           f"submissions; {fill[0]}", fill[1])
            return
        doc.add("submissions", "pass", "only the owner and the runtime role can read "
                                       "submissions")
        return
    names = ", ".join(f"`{r.role}`" for r in readers)
    how = " (a row-level security policy lets them)" if any(r.row_security for r in readers) \
        else ""
    doc.add("submissions", "warn",
            f"student answers are readable by {names}{how}: submissions is the host's own "
            "table, so `migrate up` keeps the privileges its owner gave it",
            f"if they need no access: REVOKE ALL ON submissions FROM "
            f"{', '.join(r.role for r in readers)}; or turn on row-level security with "
            "policies that fit (ALTER TABLE submissions ENABLE ROW LEVEL SECURITY)")


async def check_role(doc: Doctor) -> None:
    """The app's own powers, as DATABASE_URL logs in."""
    if doc.rt is None:
        doc.add("role", "skip", "not checked: the database is unreachable")
        return
    if doc.settings.embedded_database:
        doc.add("role", "skip", "the embedded development database (DATABASE_URL unset): the "
                                "app connects as its superuser, on this machine only")
        return
    try:
        me = await doc.rt.store.app_role()
    except StoreError as exc:
        doc.add("role", "skip", f"could not read the app's role ({exc.code})")
        return
    if me is None:
        doc.add("role", "skip", "could not read the app's role")
        return
    status, detail, fix = role_finding(me)
    doc.add("role", status, detail, fix)


def role_finding(me: AppRole) -> Finding:
    """fail: it reaches every table, locked or not; warn: the owner; pass: a runtime role."""
    powers = (["a superuser"] if me.superuser else []) + \
        (["BYPASSRLS"] if me.bypassrls else []) + \
        [f"a member of {r}" for r in me.wide_roles]
    if powers:
        fix = RUNTIME_FIX
        if "neon_superuser" in me.wide_roles:
            fix += ("; on Neon a role made in the console or the API is a member of "
                    "neon_superuser, so create the app's role with SQL")
        return ("fail", f"the app connects as `{me.role}`, which is {', '.join(powers)}: it "
                        "reads and writes every table whatever the lockdown says", fix)
    if me.owner:
        return ("warn", f"the app connects as `{me.role}`, the queue's owner "
                        f"(`{me.owner_role}`): it may alter, drop and truncate the queue's "
                        "tables and submissions", RUNTIME_FIX)
    if me.runtime_role and me.role != me.runtime_role:
        return ("pass", f"the app connects as `{me.role}` (no superuser, no BYPASSRLS, no "
                        f"read-all membership); the recorded runtime role is "
                        f"`{me.runtime_role}`", None)
    return ("pass", f"the app connects as `{me.role}`, the runtime role: no superuser, no "
                    "BYPASSRLS, no read-all or write-all membership", None)


async def check_cron(doc: Doctor) -> None:
    """On Vercel, the cron called within 3 periods of its schedule."""
    s = doc.settings
    if _not_ready(doc, "cron"):
        return
    assert doc.rt is not None
    last = await doc.rt.store.cron_last_call()
    if not s.on_vercel and last is None:
        doc.add("cron", "skip", "not on Vercel (VERCEL is unset) and no cron has called: the "
                                "in-process ticker of `serve` is the safety net")
        return
    schedule = cron_schedule()
    period = cron_period_seconds(schedule or DEFAULT_CRON)
    fix = (f"check the project's Cron Jobs on Vercel (vercel.json's crons must name "
           f"{PROCESS_PATH}) and that CRON_SECRET is set; Vercel's Hobby plan runs a cron "
           "at most once a day, so there the schedule must be daily")
    if s.on_vercel and schedule is None:
        doc.add("cron", "warn", f"vercel.json has no cron for {PROCESS_PATH}: nothing "
                                "restarts a broken chain", fix)
        return
    every = f"schedule `{schedule or DEFAULT_CRON}`, every {_span(period)}"
    if last is None:
        doc.add("cron", "warn", f"the cron has never called GET {PROCESS_PATH} ({every})", fix)
    elif last > CRON_PERIODS_LATE * period:
        doc.add("cron", "warn", f"the cron last called {_span(last)} ago, more than "
                                f"{CRON_PERIODS_LATE} periods ({every})", fix)
    else:
        doc.add("cron", "pass", f"the cron last called {_span(last)} ago ({every})")


def cron_schedule() -> str | None:
    """The schedule of vercel.json's cron for the process endpoint (None: none found)."""
    try:
        crons = json.loads(VERCEL_JSON.read_text()).get("crons") or []
    except (OSError, ValueError):
        return DEFAULT_CRON  # not bundled: assume the shipped file
    for cron in crons:
        if isinstance(cron, dict) and str(cron.get("path", "")).split("?")[0] == PROCESS_PATH:
            return str(cron.get("schedule", DEFAULT_CRON))
    return None


def cron_period_seconds(schedule: str) -> float:
    """The longest gap between two runs of a cron schedule, roughly (minute to month)."""
    fields = schedule.split()
    if len(fields) != 5:
        return 86400.0
    minute, hour, dom, _month, dow = fields
    if minute == "*":
        return 60.0
    if hour == "*":
        return 60.0 * _step(minute, 60)
    if dom == "*" and dow == "*":
        return 3600.0 * _step(hour, 24)
    if dom == "*":
        return 7 * 86400.0
    return 31 * 86400.0


def _step(field: str, whole: int) -> int:
    """`*/n` → n; a list of n values → about whole/n; a single value → whole."""
    if field.startswith("*/") and field[2:].isdigit():
        return max(1, int(field[2:]))
    if "," in field:
        return max(1, whole // len(field.split(",")))
    return whole


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"
