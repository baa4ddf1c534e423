"""Drift canaries (docs/canaries.md): one method per named query of sql/canary.sql."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models.canary import CanaryBatch, CanaryJob, CanaryMarks, CanaryRun
from aiqueue.settings.plan import ClaimPlan


class CanaryQueries(Gateway):
    """Start, send, record and judge canary runs; list them."""

    async def canary_start(self, kind: str, pool: str, trigger: str, lane: str, rows: int,
                           model: str | None, version: str | None, max_share: float,
                           lane_share: float) -> CanaryRun | None:
        """The new run (maybe skipped, saying why); None when one is running."""
        found = await self._write("canary_start", kind, pool, trigger, lane, rows, model,
                                  version, max_share, lane_share)
        return CanaryRun.from_row(found[0]) if found else None

    async def canary_take(self, kind: str, pool: str, room: int, kinds: list[str],
                          plan: ClaimPlan, capped: bool) -> list[CanaryJob]:
        """Kind's canary rows to send now (none while a row of the pool is due)."""
        rows = await self._write("canary_take", kind, pool, room, kinds, plan.json, capped)
        return [CanaryJob.from_row(r) for r in rows]

    async def canary_answer(self, row_id: UUID, marks: dict[str, Any] | None,
                            usage: dict[str, Any] | None, error: str | None,
                            money: str | None) -> UUID | None:
        """Record a row's answer once; its run's id when it was new."""
        found = await self._write_val(
            "canary_answer", row_id, None if marks is None else json.dumps(marks),
            None if usage is None else json.dumps(usage), error, money, idempotent=True)
        return found if isinstance(found, UUID) else None

    async def canary_timeouts(self, after_seconds: float) -> set[UUID]:
        rows = await self._write("canary_timeouts", after_seconds, idempotent=True)
        return {r["run_id"] for r in rows}

    async def canary_running(self) -> list[tuple[UUID, str, str, int]]:
        """(run_id, kind, lane, open rows) of each running canary."""
        rows = await self._fetch("canary_running")
        return [(r["run_id"], r["kind"], r["lane"], int(r["open"])) for r in rows]

    async def canary_rows(self, run_id: UUID) -> list[CanaryMarks]:
        return [CanaryMarks.from_row(r) for r in await self._fetch("canary_rows", run_id)]

    async def canary_yardstick(self, kind: str) -> CanaryRun | None:
        row = await self._fetchrow("canary_yardstick", kind)
        return CanaryRun.from_row(row) if row else None

    async def canary_finish(self, run_id: UUID, exact: float | None, qwk: float | None,
                            model: str | None, version: str | None,
                            yardstick: CanaryRun | None, passed: bool | None, drop: float,
                            max_drop: float) -> CanaryRun | None:
        """The run's verdict written once (None: it was already), with its drift alert."""
        found = await self._write(
            "canary_finish", run_id, exact, qwk, model, version,
            yardstick.run_id if yardstick else None, yardstick.exact if yardstick else None,
            yardstick.qwk if yardstick else None, passed, drop, max_drop)
        return CanaryRun.from_row(found[0]) if found else None

    async def canary_accept(self, kind: str, actor: str | None) -> CanaryRun | None:
        found = await self._write("canary_accept", kind, actor)
        return CanaryRun.from_row(found[0]) if found else None

    async def canary_runs(self, kind: str | None, limit: int) -> list[CanaryRun]:
        rows = await self._fetch("canary_runs", kind, limit, page=True)
        return [CanaryRun.from_row(r) for r in rows]

    async def canary_latest(self) -> list[CanaryRun]:
        return [CanaryRun.from_row(r) for r in await self._fetch("canary_latest", page=True)]

    async def canary_drift_open(self, kind: str) -> bool:
        return bool(await self._fetchval("canary_drift_open", kind))

    async def canary_model_seen(self, kind: str, since: datetime,
                                yardstick: tuple[str | None, str | None],
                                last: tuple[str | None, str | None]
                                ) -> tuple[str | None, str | None] | None:
        """A result's (model, function version) since `since` unlike both pairs, or None."""
        row = await self._fetchrow("canary_model_seen", kind, since, *yardstick, *last)
        return (row["model"], row["function_version"]) if row else None

    async def canary_reviewed(self, kind: str, rows: int) -> int:
        return int(await self._fetchval("canary_reviewed", kind, rows, page=True))

    async def canary_batch_runs(self) -> list[CanaryBatch]:
        return [CanaryBatch.from_row(r) for r in await self._fetch("canary_batch_runs")]

    async def canary_batch_take(self, run_id: UUID, tag: str) -> list[CanaryJob]:
        rows = await self._write("canary_batch_take", run_id, tag)
        return [CanaryJob.from_row(r) for r in rows]

    async def canary_batch_record(self, run_id: UUID, state: str, batch_id: str | None = None,
                                  files: list[str] | None = None) -> None:
        await self._write("canary_batch_record", run_id, state, batch_id, files,
                          idempotent=True)

    async def canary_fail_open(self, run_id: UUID, code: str) -> int:
        return len(await self._write("canary_fail_open", run_id, code, idempotent=True))
