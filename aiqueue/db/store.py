"""The queue's PostgreSQL gateway: every query class in one object (LISTEN: listener.py).

Each sql/*.sql file has its own query class in this package, one method per
named statement (a method has its statement's name); the
rules are typed against the ports they use (aiqueue/ports.py), which this
Store satisfies. To add a query: write its named block in the .sql file, then
a method on that file's class; a new .sql file gets a new class, listed here.
"""

from __future__ import annotations

from aiqueue.db.alerts import AlertQueries
from aiqueue.db.batch import BatchQueries
from aiqueue.db.batch_intent import BatchIntentQueries
from aiqueue.db.batch_watch import BatchWatchQueries
from aiqueue.db.calibration import CalibrationQueries
from aiqueue.db.canary import CanaryQueries
from aiqueue.db.doctor import DoctorQueries
from aiqueue.db.enqueue import EnqueueQueries
from aiqueue.db.erasure import ErasureQueries
from aiqueue.db.fallback import FallbackQueries
from aiqueue.db.gateway import connect_pool, queries
from aiqueue.db.holds import HoldQueries
from aiqueue.db.live import LiveQueries
from aiqueue.db.monitor import MonitorQueries
from aiqueue.db.one_row import OneRowQueries
from aiqueue.db.outbox import OutboxQueries
from aiqueue.db.queue import QueueQueries
from aiqueue.db.records import RecordsQueries
from aiqueue.db.recovery import RecoveryQueries
from aiqueue.db.remark import RemarkQueries
from aiqueue.db.results import ResultsQueries
from aiqueue.db.review import ReviewQueries
from aiqueue.db.rows import RowQueries
from aiqueue.db.schedule import ScheduleQueries
from aiqueue.db.security import SecurityQueries
from aiqueue.db.traces import TraceQueries
from aiqueue.db.usage import UsageQueries
from aiqueue.db.warnings import WarningQueries

__all__ = ["Store", "connect_pool", "queries"]


class Store(
    EnqueueQueries,    # enqueue.sql: the enqueue and its dry run
    QueueQueries,      # queue.sql: claim, settle, fail, wake up
    RowQueries,        # rows.sql: operator actions, rows, control, stats
    OneRowQueries,     # one_row.sql: one row from the outside
    RecoveryQueries,   # recovery.sql
    RemarkQueries,     # remark.sql: a rubric changes, re-mark what it changed
    ScheduleQueries,   # schedule.sql: expiry, scheduled rows
    AlertQueries,      # alerts.sql
    WarningQueries,    # warnings.sql: budget warnings, groups near a cap
    FallbackQueries,   # fallback.sql: pools down, rows moved to a fallback and back
    OutboxQueries,     # outbox.sql
    BatchQueries,      # batch.sql
    BatchIntentQueries,  # batch_intent.sql
    BatchWatchQueries,  # batch_watch.sql
    LiveQueries,       # live.sql
    MonitorQueries,    # monitor.sql
    ResultsQueries,    # results.sql
    ReviewQueries,     # review.sql
    HoldQueries,       # holds.sql: held results, the marker's questions, answers
    UsageQueries,      # usage.sql: the usage report, the /metrics counters
    CalibrationQueries,  # calibration.sql: the gate, agreement's reviews
    CanaryQueries,     # canary.sql: drift canaries
    RecordsQueries,    # records.sql: retention, the export, replay
    ErasureQueries,    # erasure.sql: one student's data, erased
    SecurityQueries,   # security.sql (lockdown.sql: migrate runs it)
    DoctorQueries,     # doctor.sql
    TraceQueries,      # traces.sql: each job's trace (docs/tracing.md)
):
    """Queue persistence: all query classes over one bounded pool (db/pool.py)."""
