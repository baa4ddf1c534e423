"""What the queue's rules need of their store, as Protocols: one port per rule module.

A rule takes `Runtime[ItsPort]` (aiqueue/runtime.py); the real Store
(aiqueue/db/store.py) satisfies every port, and the unit tests' in-memory
fake (tests/unit/fakes.py) satisfies LoopStore, the union the loop needs;
mypy checks both. A rule that asks its store for something new names the
method in its port here, and the fake gains it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from aiqueue.batch.ports import LaneStore
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
    Status,
)
from aiqueue.models.agreement import Review
from aiqueue.models.batch import OrphanAccount
from aiqueue.models.calibration import Release, Thresholds
from aiqueue.models.canary import CanaryBatch, CanaryJob, CanaryMarks, CanaryRun
from aiqueue.models.records import Retained
from aiqueue.settings.plan import ClaimPlan
from aiqueue.tracing import TraceStore


class ResultsStore(TraceStore, Protocol):
    """queue/results.py: apply a result once, note progress, put a row back, fail it."""

    async def complete(self, item: Completed, plan: ClaimPlan) -> bool: ...

    async def settle(self, items: Sequence[Completed], plan: ClaimPlan,
                     taker: UUID) -> list[tuple[bool, Job | None]]: ...

    async def heartbeat(self, queue_id: UUID, dispatch_seq: int, progress: Any) -> bool: ...

    async def refused(self, queue_id: UUID, dispatch_seq: int, *, kind: str, delay: float,
                      give_up: float, cap: int, plan: str | None = None,
                      window: float | None = None) -> Status | None: ...

    async def attempt_failed(
        self, queue_id: UUID, dispatch_seq: int, *, delay: float, retryable: bool,
        max_attempts: int, error: str, outcome: str, attempts: str | None = None,
    ) -> Status | None: ...


class CanaryStore(Protocol):
    """queue/canary.py, canary_send.py: drift canaries (docs/canaries.md)."""

    async def canary_start(self, kind: str, pool: str, trigger: str, lane: str, rows: int,
                           model: str | None, version: str | None, max_share: float,
                           lane_share: float) -> CanaryRun | None: ...

    async def canary_take(self, kind: str, pool: str, room: int, kinds: list[str],
                          plan: ClaimPlan, capped: bool) -> list[CanaryJob]: ...

    async def canary_answer(self, row_id: UUID, marks: dict[str, Any] | None,
                            usage: dict[str, Any] | None, error: str | None,
                            money: str | None) -> UUID | None: ...

    async def canary_timeouts(self, after_seconds: float) -> set[UUID]: ...

    async def canary_running(self) -> list[tuple[UUID, str, str, int]]: ...

    async def canary_rows(self, run_id: UUID) -> list[CanaryMarks]: ...

    async def canary_yardstick(self, kind: str) -> CanaryRun | None: ...

    async def canary_finish(self, run_id: UUID, exact: float | None, qwk: float | None,
                            model: str | None, version: str | None,
                            yardstick: CanaryRun | None, passed: bool | None, drop: float,
                            max_drop: float) -> CanaryRun | None: ...

    async def canary_accept(self, kind: str, actor: str | None) -> CanaryRun | None: ...

    async def canary_latest(self) -> list[CanaryRun]: ...

    async def canary_drift_open(self, kind: str) -> bool: ...

    async def canary_model_seen(self, kind: str, since: datetime,
                                yardstick: tuple[str | None, str | None],
                                last: tuple[str | None, str | None]
                                ) -> tuple[str | None, str | None] | None: ...

    async def canary_batch_runs(self) -> list[CanaryBatch]: ...

    async def canary_batch_take(self, run_id: UUID, tag: str) -> list[CanaryJob]: ...

    async def canary_batch_record(self, run_id: UUID, state: str, batch_id: str | None = None,
                                  files: list[str] | None = None) -> None: ...

    async def canary_fail_open(self, run_id: UUID, code: str) -> int: ...


class WebhookStore(ResultsStore, CanaryStore, Protocol):
    """queue/webhook.py receive_results, probes.record: a webhook batch's items."""

    async def record_probe_answer(self, probe_id: UUID, answer: str,
                                  detail: dict[str, Any]) -> bool: ...


class HandoutStore(ResultsStore, Protocol):
    """queue/handout.py: a dispatch's breaker and invocation id."""

    async def dispatch_accepted(self, pool: str = "default") -> None: ...

    async def set_dispatch_ref(self, queue_id: UUID, dispatch_seq: int, ref: str) -> None: ...

    async def breaker_failure(self, threshold: int, cooldown: float,
                              pool: str = "default") -> int: ...

    async def cache_key(self, queue_id: UUID, key_rpm: int) -> str: ...


class RecoveryStore(ResultsStore, Protocol):
    """queue/recovery.py: stuck rows, the platform's looks, when the step has work."""

    async def recent_processing_tail(self) -> float | None: ...

    async def recover_stuck(self, stuck_after: float, max_attempts: int, *,
                            heartbeat: float | None = None, bound: float | None = None,
                            ask: bool = False, attempts: str | None = None,
                            kinds: Sequence[str] | None = None,
                            others: Sequence[str] = ()) -> int: ...

    async def next_wakeup(self, plan: ClaimPlan, stuck_after: float, *,
                          heartbeat: float | None = None, bound: float | None = None,
                          ask: bool = False, look: float | None = None) -> float | None: ...

    async def take_lookups(self, quiet: float, bound: float, limit: int, hold: float, *,
                           kinds: Sequence[str] | None = None,
                           others: Sequence[str] = ()) -> list[Lookup]: ...

    async def platform_waits(self, queue_id: UUID, dispatch_seq: int, said: str,
                             again_in: float, bound: float) -> None: ...

    async def platform_said(self, queue_id: UUID, dispatch_seq: int, said: str) -> None: ...


class ScheduleStore(Protocol):
    """queue/schedule.py: expiry, and when scheduled rows and expiries come due."""

    async def expire_rows(self) -> int: ...

    async def next_scheduled(self) -> float | None: ...

    async def next_expiry(self) -> float | None: ...


class AlertStore(Protocol):
    """notify/alerts.py and budget.py: open and resolve alerts, list the open ones; budget
    warnings and the groups near a cap."""

    async def evaluate_alerts(self, *, backlog: float, stalled: float, failures_min: int,
                              failure_rate: float, p95: float = 600.0,
                              at: datetime | None = None
                              ) -> list[tuple[str, str]]: ...

    async def open_alerts(self) -> list[OpenAlert]: ...

    async def budget_warnings(self, money: str | None, at: datetime | None = None
                              ) -> list[tuple[str, str, str, float]]: ...

    async def budget_near(self, money: str | None) -> list[NearCap]: ...


class DeliveryStore(Protocol):
    """notify/delivery.py: the outbox's deliveries."""

    async def claim_deliveries(self, limit: int, lease_seconds: float) -> list[Delivery]: ...

    async def delivery_succeeded(self, event_id: UUID, outcome: str) -> bool: ...

    async def delivery_failed(self, event_id: UUID, attempt: int, outcome: str, *,
                              delay: float, window: float, stop: bool) -> DeliveryState | None: ...

    async def prune_outbox(self, keep_seconds: float, window: float) -> int: ...

    async def next_delivery_due(self) -> float | None: ...

    async def outbox_entries(self, limit: int) -> list[OutboxEntry]: ...


class OvernightStore(LaneStore, ResultsStore, Protocol):
    """queue/overnight.py: the lane's statements, and its results applied as callbacks."""

    async def batch_prune(self, older_than: float) -> None: ...
    async def batch_next_look(self) -> float | None: ...
    async def batch_orphans(self, batch_pools: Sequence[str]) -> list[OrphanAccount]: ...
    async def batch_abandon_open(self, batch_id: int, error: str) -> bool: ...


class CalibrationStore(Protocol):
    """queue/calibration.py: release a run's held rows, sweep the gates, read reviews."""

    async def calibration_release(self, run_id: UUID, actor: str | None) -> Release: ...

    async def calibration_sweep(self) -> list[tuple[UUID, Thresholds]]: ...

    async def agreement_reviews(self, *, assignment_id: str | None = None,
                                group: str | None = None, kind: str | None = None,
                                model: str | None = None, since: datetime | None = None,
                                run_id: UUID | None = None, calibration_only: bool = False
                                ) -> list[tuple[Review, str | None]]: ...


class FallbackStore(Protocol):
    """queue/fallback.py: whether pools are down; a kind's rows to its fallback and back."""

    async def pools_down(self, pools: Sequence[str]
                         ) -> dict[str, tuple[bool, float | None, float | None]]: ...

    async def fallback_move(self, moves: str) -> int: ...


class LoopStore(HandoutStore, RecoveryStore, ScheduleStore, AlertStore, DeliveryStore,
                OvernightStore, WebhookStore, CalibrationStore, FallbackStore, Protocol):
    """queue/loop.py, housekeeping.py, hold.py: claim and hand out, tidy, wait out a hold."""

    async def claim(self, plan: ClaimPlan) -> Job | None: ...

    async def can_claim(self, plan: ClaimPlan) -> bool: ...

    async def cron_called(self) -> None: ...

    async def flow_state(self, cap: int, window_seconds: float,
                         pool: str | None = None) -> FlowState: ...

    async def prune(self, older_than_seconds: float) -> int: ...

    async def retain(self, ended_seconds: float, history_seconds: float, *,
                     completed_seconds: float | None = None, batch: int = 5000,
                     every_seconds: float = 60.0) -> Retained: ...
