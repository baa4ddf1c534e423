"""A re-mark's statements of sql/remark.sql (docs/remark.md): its plan, and its one
transaction (the plan, the enqueue's rows, the debounce, the record)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from aiqueue.answers import AnswerKey
from aiqueue.db.calls import Rollback
from aiqueue.db.enqueue import LostRace, enqueue_in
from aiqueue.db.gateway import Gateway
from aiqueue.errors import Conflict
from aiqueue.models import Enqueued
from aiqueue.models.remark import RemarkDefaults, Remarked, RemarkPlan

# How often a re-mark runs when it keeps losing a race for a live row (as the enqueue).
_REMARK_RUNS = 5


class RemarkQueries(Gateway):
    """The re-mark: one method per named query of sql/remark.sql."""

    async def remark_plan(self, assignment_id: str, payload: str, include_reviewed: bool,
                          only: Sequence[UUID] | None = None) -> RemarkPlan:
        """What a re-mark under `payload` would do to each submission; writes nothing."""
        rows = await self._fetch("remark_plan", assignment_id, payload, include_reviewed,
                                 None if only is None else list(only), page=True)
        return RemarkPlan.of([(r["id"], r["plan"]) for r in rows])

    async def remark_defaults(self, assignment_id: str) -> RemarkDefaults:
        row = await self._fetchrow("remark_defaults", assignment_id)
        if row is None:
            return RemarkDefaults()
        return RemarkDefaults(kind=row["kind"], group=row["group_key"], priority=row["priority"])

    async def row_payload_version(self, queue_id: UUID) -> str | None:
        """The version of the payload a row is marked under (None: the empty payload)."""
        version: str | None = await self._fetchval("row_payload_version", queue_id, page=True)
        return version

    async def current_payload(self, assignment_id: str) -> dict[str, Any] | None:
        """The assignment's current payload: its newest re-mark's, else its newest row's."""
        text = await self._fetchval("current_payload", assignment_id)
        return None if text is None else dict(json.loads(text))

    async def remark(self, assignment_id: str, payload: str, *, include_reviewed: bool,
                     debounce_seconds: float, defaults: RemarkDefaults, pool: str,
                     answer_key: AnswerKey | None, only: Sequence[UUID] | None = None,
                     actor: str = "api") -> Remarked:
        """The re-mark, atomically: plan, enqueue the plan's submissions as a re-marking
        enqueue of `payload` would (rows beside a live row of another payload), supersede
        what an edit within `debounce_seconds` made stale, and record it (409 after a few
        lost races)."""
        asked = remark_args(assignment_id, payload, include_reviewed=include_reviewed,
                            debounce_seconds=debounce_seconds, defaults=defaults, pool=pool,
                            answer_key=answer_key, only=only, actor=actor)
        for _ in range(_REMARK_RUNS):
            done = await self.db.write(lambda conn: remark_in(conn, self.sql, asked), page=True)
            if isinstance(done, Remarked):
                return done
            # The run rolled back; the next one plans again.
        raise Conflict("the submissions' live rows kept changing; try again")


def remark_args(assignment_id: str, payload: str, *, include_reviewed: bool,
                debounce_seconds: float, defaults: RemarkDefaults, pool: str,
                answer_key: AnswerKey | None, only: Sequence[UUID] | None,
                actor: str) -> _Asked:
    """A re-mark's arguments as remark_in takes them (also a teacher's answer's re-mark of
    the rows that asked, db/holds.py)."""
    # The enqueue's arguments after the ids (sql/enqueue.sql: enqueue); its rows go live.
    tail = (assignment_id, defaults.priority, payload, defaults.group or assignment_id,
            True, defaults.kind or "mark", pool, None, None,
            answer_key and answer_key.inner_pad, answer_key and answer_key.outer_pad,
            bool(answer_key and answer_key.loose), "live")
    return _Asked(assignment_id, payload, include_reviewed, debounce_seconds,
                  None if only is None else list(only), actor, tail)


@dataclass(frozen=True)
class _Asked:
    """A re-mark's arguments, as its transaction takes them."""

    assignment_id: str
    payload: str
    include_reviewed: bool
    debounce_seconds: float
    only: list[UUID] | None
    actor: str
    enqueue_tail: tuple[Any, ...]


# What remark_args builds, by a name other modules may use.
RemarkArgs = _Asked


async def remark_in(conn: asyncpg.Connection, sql: dict[str, str], a: _Asked
                    ) -> Remarked | LostRace:
    """The re-mark's transaction (db.write runs it; Rollback undoes a lost race).  Its
    rows go in before the debounce cancels the stale ones, so they join the same run and
    the run does not end in between."""
    await conn.execute(sql["remark_lock"], a.assignment_id)
    rows = await conn.fetch(sql["remark_plan"], a.assignment_id, a.payload,
                            a.include_reviewed, a.only)
    plan = RemarkPlan.of([(r["id"], r["plan"]) for r in rows])
    outcome = Enqueued(queue_ids=[])
    if plan.remark:
        added = await enqueue_in(conn, sql, (list(plan.remark), *a.enqueue_tail), None,
                                 len(plan.remark), None, None)
        if isinstance(added, LostRace):
            raise Rollback(added)
        assert isinstance(added, Enqueued), "no key and no unknown id: its rows went in"
        outcome = added
    superseded = int(await conn.fetchval(sql["remark_supersede"], a.assignment_id, a.payload,
                                         a.debounce_seconds, a.only, a.actor))
    await conn.execute(sql["remark_record"], a.assignment_id, a.payload, outcome.run_id,
                       len(outcome.queue_ids), superseded, a.actor)
    return Remarked(plan=plan, queue_ids=outcome.queue_ids, same_answers=outcome.same_answers,
                    superseded=superseded, run_id=outcome.run_id)
