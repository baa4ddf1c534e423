"""What the doctor says about the tables over time: the month partitions made ahead, and
the record's dead rows and heap-only updates (docs/operating/data-protection.md,
docs/performance.md)."""

from __future__ import annotations

from aiqueue.doctor.report import Doctor
from aiqueue.doctor.text import Finding
from aiqueue.models.records import HostFill, MonthsAhead, TableHealth

# Dead rows above this share of a table (and at least DEAD_ROWS of them) mean
# autovacuum is behind: every scan of the table reads them too.
DEAD_SHARE = 0.2
DEAD_ROWS = 10_000
# Below this share of heap-only updates (with UPDATES_SEEN updates seen), most
# updates write every index of the row again.
HOT_SHARE = 0.5
UPDATES_SEEN = 1_000


def months_finding(tables: list[MonthsAhead]) -> Finding:
    """Is next month's partition there for every history table, and the default empty?"""
    missing = [t.table for t in tables if not t.ready]
    stray = [t for t in tables if t.default_rows > 0]
    if missing:
        return ("warn", f"next month's partition is missing for {', '.join(missing)}: its rows "
                        "would go to the default partition, and its month could not be dropped "
                        "whole",
                "the housekeeping makes it (it runs with each process step and the cron); "
                "check that the cron calls the app, see docs/operating/data-protection.md")
    if stray:
        held = ", ".join(f"{t.table} about {t.default_rows:,}" for t in stray)
        return ("warn", f"rows no month holds, in the default partition: {held}",
                "the housekeeping moves them into their month when it makes that month; "
                "see docs/operating/data-protection.md")
    months = ", ".join(f"{t.table} {t.months}" for t in tables)
    return "pass", f"next month's partitions are ready (partitions: {months})", None


def health_finding(t: TableHealth) -> Finding:
    """One table's dead rows and share of heap-only (HOT) updates."""
    hot = t.hot_share
    said = (f"{t.table}: {t.live:,} rows, {t.dead:,} dead ({t.dead_share:.0%}), "
            f"{t.bytes / 2**20:,.1f} MiB; HOT updates "
            + ("none yet" if hot is None else f"{hot:.0%} of {t.updates:,}"))
    if t.dead >= DEAD_ROWS and t.dead_share > DEAD_SHARE:
        return ("warn", f"{said}: autovacuum is behind",
                f"look at autovacuum's settings for {t.table} (docs/performance.md)")
    if hot is not None and t.updates >= UPDATES_SEEN and hot < HOT_SHARE:
        return ("warn", f"{said}: most updates rewrite every index",
                "see docs/performance.md on which columns the indexes name")
    return "pass", said, None


def fill_finding(fill: HostFill | None) -> tuple[str, str] | None:
    """Submissions' pages full, so a result's update of a row writes every index again:
    (what was seen, what to do); None when its updates are mostly heap-only or few."""
    if fill is None or fill.fillfactor < 100 or fill.updates < UPDATES_SEEN:
        return None
    hot = fill.hot_updates / fill.updates
    if hot >= HOT_SHARE:
        return None
    return (f"submissions' pages are full (fillfactor 100): {hot:.0%} of its {fill.updates:,} "
            "updates were heap-only, the rest wrote every index of the table again",
            "ALTER TABLE submissions SET (fillfactor = 80) leaves room on new pages for a "
            "result's update; it blocks no read or write (docs/operating/doctor.md)")


def record_finding(tables: list[TableHealth]) -> Finding:
    """One line for the record and the state tables: each table's figures, the worst status."""
    if not tables:
        return "skip", "no statistics for the record's tables yet", None
    found = [health_finding(t) for t in tables]
    worst = next((f for f in found if f[0] == "warn"), None)
    detail = "; ".join(f[1] for f in found)
    return ("warn", detail, worst[2]) if worst else ("pass", detail, None)


async def check_storage(doc: Doctor) -> None:
    """The month partitions ahead, and the record's bloat and HOT share."""
    if doc.rt is None or not doc.schema_current:
        doc.add("partitions", "skip", "not checked: the database is unreachable or behind")
        doc.add("record", "skip", "not checked: the database is unreachable or behind")
        return
    doc.add("partitions", *months_finding(await doc.rt.store.months_ahead()))
    doc.add("record", *record_finding(await doc.rt.store.table_health()))
