"""An in-memory stand-in for the Store's loop methods (unit tests do no I/O).

FakeStore implements aiqueue.ports.LoopStore, as the real Store does; mypy
checks both (see `_both_satisfy_the_protocol`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from aiqueue.db.store import Store
from aiqueue.errors import StoreError
from aiqueue.flow import FlowState
from aiqueue.models import (
    Completed,
    Delivery,
    DeliveryState,
    Job,
    Lookup,
    NearCap,
    OpenAlert,
    OutboxEntry,
    QueueId,
    Status,
    SubmissionId,
)
from aiqueue.models.agreement import Review
from aiqueue.models.batch import BatchRow, BatchState, LaneBatch, LineFailure, OrphanAccount
from aiqueue.models.calibration import Release, Thresholds
from aiqueue.models.canary import CanaryBatch, CanaryJob, CanaryMarks, CanaryRun
from aiqueue.models.records import Retained
from aiqueue.ports import LoopStore
from aiqueue.settings.plan import ClaimPlan
from aiqueue.tracing import JobTrace


class QuietParts:
    """The parts of LoopStore the unit tests leave idle: nothing scheduled, no alerts,
    an empty outbox, no batch lane. Each call is still recorded."""

    calls: list[tuple[str, tuple[Any, ...]]]
    # Jobs' traces (aiqueue/tracing): kept only while a test's tracer is on.
    traces: dict[QueueId, JobTrace]

    async def heartbeat(self, queue_id: UUID, dispatch_seq: int, progress: Any) -> bool:
        self.calls.append(("heartbeat", (queue_id, dispatch_seq)))
        return True

    async def next_expiry(self) -> float | None:
        return None

    async def open_alerts(self) -> list[OpenAlert]:
        return []

    async def budget_warnings(self, money: str | None, at: datetime | None = None
                              ) -> list[tuple[str, str, str, float]]:
        return []

    async def budget_near(self, money: str | None) -> list[NearCap]:
        return []

    async def pools_down(self, pools: Sequence[str]
                         ) -> dict[str, tuple[bool, float | None, float | None]]:
        return {}

    async def fallback_move(self, moves: str) -> int:
        return 0

    async def record_probe_answer(self, probe_id: UUID, answer: str,
                                  detail: dict[str, Any]) -> bool:
        self.calls.append(("record_probe_answer", (probe_id, answer)))
        return True

    async def cron_called(self) -> None:
        self.calls.append(("cron_called", ()))

    # -- drift canaries: none declared, none run -------------------------------

    async def canary_start(self, kind: str, pool: str, trigger: str, lane: str, rows: int,
                           model: str | None, version: str | None, max_share: float,
                           lane_share: float) -> CanaryRun | None:
        return None

    async def canary_take(self, kind: str, pool: str, room: int, kinds: list[str],
                          plan: ClaimPlan, capped: bool) -> list[CanaryJob]:
        return []

    async def canary_answer(self, row_id: UUID, marks: dict[str, Any] | None,
                            usage: dict[str, Any] | None, error: str | None,
                            money: str | None) -> UUID | None:
        return None

    async def canary_timeouts(self, after_seconds: float) -> set[UUID]:
        return set()

    async def canary_running(self) -> list[tuple[UUID, str, str, int]]:
        return []

    async def canary_rows(self, run_id: UUID) -> list[CanaryMarks]:
        return []

    async def canary_yardstick(self, kind: str) -> CanaryRun | None:
        return None

    async def canary_finish(self, run_id: UUID, exact: float | None, qwk: float | None,
                            model: str | None, version: str | None,
                            yardstick: CanaryRun | None, passed: bool | None, drop: float,
                            max_drop: float) -> CanaryRun | None:
        return None

    async def canary_accept(self, kind: str, actor: str | None) -> CanaryRun | None:
        return None

    async def canary_latest(self) -> list[CanaryRun]:
        return []

    async def canary_drift_open(self, kind: str) -> bool:
        return False

    async def canary_model_seen(self, kind: str, since: datetime,
                                yardstick: tuple[str | None, str | None],
                                last: tuple[str | None, str | None]
                                ) -> tuple[str | None, str | None] | None:
        return None

    async def canary_batch_runs(self) -> list[CanaryBatch]:
        return []

    async def canary_batch_take(self, run_id: UUID, tag: str) -> list[CanaryJob]:
        return []

    async def canary_batch_record(self, run_id: UUID, state: str, batch_id: str | None = None,
                                  files: list[str] | None = None) -> None:
        return None

    async def canary_fail_open(self, run_id: UUID, code: str) -> int:
        return 0

    # -- the calibration gate: no gated run ------------------------------------

    async def calibration_release(self, run_id: UUID, actor: str | None) -> Release:
        self.calls.append(("calibration_release", (run_id, actor)))
        return Release(0, None, False)

    async def calibration_sweep(self) -> list[tuple[UUID, Thresholds]]:
        return []

    async def agreement_reviews(self, *, assignment_id: str | None = None, group: str | None = None,
                      kind: str | None = None, model: str | None = None,
                      since: datetime | None = None, run_id: UUID | None = None,
                      calibration_only: bool = False) -> list[tuple[Review, str | None]]:
        return []

    # -- the outbox: nothing to deliver --------------------------------------

    async def claim_deliveries(self, limit: int, lease_seconds: float) -> list[Delivery]:
        return []

    async def delivery_succeeded(self, event_id: UUID, outcome: str) -> bool:
        return True

    async def delivery_failed(self, event_id: UUID, attempt: int, outcome: str, *,
                              delay: float, window: float, stop: bool) -> DeliveryState | None:
        return None

    async def prune_outbox(self, keep_seconds: float, window: float) -> int:
        return 0

    async def next_delivery_due(self) -> float | None:
        return None

    async def outbox_entries(self, limit: int) -> list[OutboxEntry]:
        return []

    # -- the batch lane: no batches -------------------------------------------

    async def batch_open(self, pool: str, provider: str, model: str, limit: int,
                         money: str | None = None, base_url: str | None = None,
                         key_env: str | None = None) -> list[BatchRow]:
        return []

    async def batch_submitted(self, batch_id: int, provider_batch_id: str,
                              files: Sequence[str], look_in: float) -> bool:
        return False

    async def batch_release(self, batch_id: int, queue_ids: Sequence[UUID] | None = None
                            ) -> int:
        return 0

    async def batch_abandon(self, batch_id: int, error: str) -> bool:
        return False

    async def batches_stale(self, pool: str, older_than: float) -> list[LaneBatch]:
        return []

    async def batches_due(self, pool: str, lease: float) -> list[LaneBatch]:
        return []

    async def batch_rows(self, batch_id: int) -> list[BatchRow]:
        return []

    async def batch_lines(self, batch_id: int) -> list[BatchRow]:
        return []

    async def batch_lines_failed(self, failures: Sequence[LineFailure], max_attempts: int,
                                 window: float, attempts: str | None = None) -> int:
        return 0

    async def batch_fallback(self, batch_id: int) -> int:
        return 0

    async def batch_mark(self, batch_id: int, state: BatchState, files: Sequence[str],
                         look_in: float) -> None:
        return None

    async def batch_live_seconds(self) -> float | None:
        return None

    async def batch_prune(self, older_than: float) -> None:
        return None

    async def batch_next_look(self) -> float | None:
        return None

    async def batch_orphans(self, batch_pools: Sequence[str]) -> list[OrphanAccount]:
        return []  # no batch was ever packed here

    async def batch_abandon_open(self, batch_id: int, error: str) -> bool:
        return False

    async def batch_add(self, pool: str, batch_id: int, limit: int, money: str | None = None
                        ) -> list[BatchRow]:
        return []

    async def batch_held(self, batch_id: int) -> set[UUID]:
        return set()

    async def batch_tag(self, batch_id: int) -> str:
        return f"aiqueue-fake-{batch_id}"

    async def batch_intent(self, batch_id: int, lines: int, files: Sequence[str]) -> bool:
        return False

    async def batch_unsure(self, batch_id: int, error: str) -> None:
        return None

    async def batch_clear(self, batch_id: int, error: str, files: Sequence[str],
                          look_in: float) -> bool:
        return False

    async def batch_withdrawn(self, batch_id: int, provider_batch_id: str,
                              files: Sequence[str]) -> None:
        return None

    async def batch_backlog(self, pool: str) -> tuple[int, int | None]:
        return 0, None

    async def batch_known(self, pool: str) -> set[str]:
        return set()

    async def batch_pending(self, batch_id: int) -> tuple[int, datetime | None]:
        return 0, None

    async def keep_traces(self, traces: Mapping[QueueId, JobTrace]) -> None:
        self.traces.update(traces)

    async def job_traces(self, queue_ids: Sequence[QueueId]) -> dict[QueueId, JobTrace]:
        return {q: self.traces[q] for q in queue_ids if q in self.traces}


@dataclass
class FakeStore(QuietParts):
    """Records what the loop asked of the store; hands out prepared jobs."""

    jobs: list[Job] = field(default_factory=list)
    claimable_after: bool = False  # what the claim reports as `more`
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    traces: dict[QueueId, JobTrace] = field(default_factory=dict)
    failures: int = 0
    recovered: int = 0  # what recovery reports
    recovery: dict[str, Any] = field(default_factory=dict)  # its last thresholds
    lookups: list[Lookup] = field(default_factory=list)  # dispatches to ask the platform about
    settle_fails: bool = False
    ref_fails: bool = False  # set_dispatch_ref raises StoreError
    p95: float | None = None  # the recent p95 processing time recovery reads
    hold_until: datetime | None = None  # a refusal's hold on every pool
    wakeup_in: float | None = None  # seconds until the step has work (next_wakeup)
    scheduled_in: float | None = None  # seconds until a scheduled row comes due

    async def flow_state(self, cap: int, window_seconds: float,
                         pool: str | None = None) -> FlowState:
        self.calls.append(("flow_state", (cap, window_seconds, pool)))
        return FlowState(cap, self.hold_until, 0, 0, 0, 0)

    async def next_wakeup(self, plan: ClaimPlan, stuck_after: float, *,
                          heartbeat: float | None = None, bound: float | None = None,
                          ask: bool = False, look: float | None = None) -> float | None:
        self.calls.append(("next_wakeup", (plan, stuck_after)))
        return self.wakeup_in

    async def next_scheduled(self) -> float | None:
        self.calls.append(("next_scheduled", ()))
        return self.scheduled_in

    async def recent_processing_tail(self) -> float | None:
        self.calls.append(("recent_processing_tail", ()))
        return self.p95

    async def recover_stuck(self, stuck_after: float, max_attempts: int, *,
                            heartbeat: float | None = None, bound: float | None = None,
                            ask: bool = False, attempts: str | None = None,
                            kinds: Sequence[str] | None = None,
                            others: Sequence[str] = ()) -> int:
        self.calls.append(("recover_stuck", (stuck_after, max_attempts)))
        self.recovery = {"heartbeat": heartbeat, "bound": bound, "ask": ask}
        return self.recovered

    async def take_lookups(self, quiet: float, bound: float, limit: int, hold: float, *,
                           kinds: Sequence[str] | None = None,
                           others: Sequence[str] = ()) -> list[Lookup]:
        self.calls.append(("take_lookups", (quiet, bound, limit, hold)))
        taken, self.lookups = self.lookups[:limit], self.lookups[limit:]
        return taken

    async def platform_waits(self, queue_id: UUID, dispatch_seq: int, said: str,
                             again_in: float, bound: float) -> None:
        self.calls.append(("platform_waits", (queue_id, dispatch_seq, said, again_in, bound)))

    async def platform_said(self, queue_id: UUID, dispatch_seq: int, said: str) -> None:
        self.calls.append(("platform_said", (queue_id, dispatch_seq, said)))

    async def prune(self, older_than_seconds: float) -> int:
        self.calls.append(("prune", (older_than_seconds,)))
        return 0

    async def retain(self, ended_seconds: float, history_seconds: float, *,
                     completed_seconds: float | None = None, batch: int = 5000,
                     every_seconds: float = 60.0) -> Retained:
        self.calls.append(("retain", (ended_seconds, history_seconds)))
        return Retained(ran=True, ended=0, results=0, attempts=0)

    async def expire_rows(self) -> int:
        self.calls.append(("expire_rows", ()))
        return 0

    async def evaluate_alerts(self, *, backlog: float, stalled: float, failures_min: int,
                              failure_rate: float, p95: float = 600.0,
                              at: datetime | None = None
                              ) -> list[tuple[str, str]]:
        self.calls.append(("evaluate_alerts", (backlog, stalled, failures_min, failure_rate)))
        return []

    async def claim(self, plan: ClaimPlan) -> Job | None:
        self.calls.append(("claim", (plan,)))
        if not self.jobs:
            return None
        return replace(self.jobs.pop(0), more=self.claimable_after)

    async def can_claim(self, plan: ClaimPlan) -> bool:
        self.calls.append(("can_claim", (plan,)))
        return self.claimable_after

    async def dispatch_accepted(self, pool: str = "default") -> None:
        self.calls.append(("dispatch_accepted", ()))

    async def refused(self, queue_id: UUID, dispatch_seq: int, *, kind: str, delay: float,
                      give_up: float, cap: int, plan: str | None = None,
                      window: float | None = None) -> Status | None:
        kw = {"kind": kind, "delay": delay, "give_up": give_up, "cap": cap, "window": window}
        self.calls.append(("refused", (queue_id, dispatch_seq, kw)))
        return "pending"

    async def attempt_failed(
        self, queue_id: UUID, dispatch_seq: int, *, delay: float, retryable: bool,
        max_attempts: int, error: str, outcome: str, attempts: str | None = None,
    ) -> Status | None:
        kw = {"delay": delay, "retryable": retryable, "max_attempts": max_attempts,
              "error": error, "outcome": outcome}
        self.calls.append(("attempt_failed", (queue_id, dispatch_seq, kw)))
        return "pending"

    async def set_dispatch_ref(self, queue_id: UUID, dispatch_seq: int, ref: str) -> None:
        self.calls.append(("set_dispatch_ref", (queue_id, dispatch_seq, ref)))
        if self.ref_fails:
            raise StoreError("the database went away")

    async def cache_key(self, queue_id: UUID, key_rpm: int) -> str:
        self.calls.append(("cache_key", (queue_id, key_rpm)))
        return f"sharded:{queue_id}"

    async def breaker_failure(self, threshold: int, cooldown: float,
                              pool: str = "default") -> int:
        self.failures += 1
        self.calls.append(("breaker_failure", (threshold, cooldown)))
        return self.failures

    async def complete(self, item: Completed, plan: ClaimPlan) -> bool:
        self.calls.append(("complete", (item.queue_id, item.dispatch_seq, item.result,
                                        item.usage)))
        return True

    async def settle(self, items: Sequence[Completed], plan: ClaimPlan,
                     taker: UUID) -> list[tuple[bool, Job | None]]:
        self.calls.append(("settle", tuple((i.queue_id, i.dispatch_seq, i.result, i.usage)
                                           for i in items)))
        if self.settle_fails:
            raise StoreError("database error: DeadlockDetectedError")
        return [(True, await self.claim(plan)) for _ in items]

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def args_of(self, name: str) -> tuple[Any, ...]:
        return next(args for n, args in self.calls if n == name)


def _both_satisfy_the_protocol(real: Store, fake: FakeStore) -> list[LoopStore]:
    """Never called: mypy checks that both stores implement what the loop needs."""
    return [real, fake]


def make_job(attempt: int = 1, payload: dict[str, Any] | None = None) -> Job:
    return Job(
        queue_id=QueueId(uuid.uuid4()),
        submission_id=SubmissionId(uuid.uuid4()),
        assignment_id="hw-7",
        attempt=attempt,
        dispatch_seq=attempt,
        payload_json=json.dumps({"rubric": "r", "max_score": 10} if payload is None else payload),
        content="the student's answer",
    )
