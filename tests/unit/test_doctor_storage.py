"""The doctor's words on the month partitions and the record's dead rows and HOT share."""

from __future__ import annotations

from aiqueue.doctor.storage import health_finding, months_finding, record_finding
from aiqueue.models.records import MonthsAhead, TableHealth

READY = [MonthsAhead("ai_marking_attempts", True, 3, 0),
         MonthsAhead("ai_marking_events", True, 2, 0)]


def test_ready_months_pass_and_say_how_many():
    status, detail, fix = months_finding(READY)
    assert status == "pass" and fix is None
    assert "ai_marking_attempts 3" in detail


def test_a_missing_next_month_warns_and_names_the_table():
    status, detail, fix = months_finding([READY[0], MonthsAhead("ai_marking_events", False, 1, 0)])
    assert status == "warn" and "ai_marking_events" in detail
    assert "ai_marking_attempts" not in detail
    assert fix is not None and "cron" in fix


def test_rows_in_the_default_warn():
    status, detail, _ = months_finding([MonthsAhead("ai_marking_results", True, 2, 1500)])
    assert status == "warn" and "about 1,500" in detail


def test_a_table_with_few_dead_rows_and_hot_updates_passes():
    table = TableHealth("ai_marking_queue", 9000, 1000, 5000, 4000, 2**21)
    status, detail, _ = health_finding(table)
    assert status == "pass"
    assert "1,000 dead (10%)" in detail and "HOT updates 80% of 5,000" in detail


def test_autovacuum_behind_warns():
    status, detail, _ = health_finding(TableHealth("ai_marking_queue", 30000, 20000, 0, 0, 0))
    assert status == "warn" and "autovacuum is behind" in detail and "none yet" in detail


def test_few_hot_updates_warn_once_enough_were_seen():
    assert health_finding(TableHealth("t", 10, 0, 999, 0, 0))[0] == "pass"
    assert health_finding(TableHealth("t", 10, 0, 1000, 100, 0))[0] == "warn"


def test_the_record_line_takes_the_worst_table():
    good = TableHealth("ai_marking_queue", 10, 0, 10, 10, 0)
    bad = TableHealth("ai_marking_ready", 30000, 20000, 0, 0, 0)
    assert record_finding([good])[0] == "pass"
    status, detail, fix = record_finding([good, bad])
    assert status == "warn" and "ai_marking_queue" in detail and "ai_marking_ready" in detail
    assert fix is not None
    assert record_finding([])[0] == "skip"


def test_full_submissions_pages_are_named_once_enough_updates_were_seen():
    from aiqueue.doctor.storage import fill_finding
    from aiqueue.models.records import HostFill

    assert fill_finding(None) is None
    assert fill_finding(HostFill(100, 999, 0)) is None
    assert fill_finding(HostFill(100, 1000, 600)) is None
    assert fill_finding(HostFill(80, 1000, 100)) is None  # set already: left to the host
    seen, fix = fill_finding(HostFill(100, 1000, 430)) or ("", "")
    assert "43% of its 1,000 updates" in seen
    assert "ALTER TABLE submissions SET (fillfactor = 80)" in fix
