"""Review holds and the teacher's answers: one method per named query of sql/holds.sql."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from aiqueue.answers import AnswerKey
from aiqueue.db.calls import Rollback
from aiqueue.db.enqueue import LostRace
from aiqueue.db.gateway import Gateway
from aiqueue.db.remark import RemarkArgs, remark_args, remark_in
from aiqueue.errors import Conflict
from aiqueue.models.holds import Answered, AskedQuestion, Hold
from aiqueue.models.remark import RemarkDefaults

# How often an answer's re-mark runs when it keeps losing a race for a live row.
_RUNS = 5


@dataclass(frozen=True)
class Answer:
    """A teacher's answer as its transaction takes it: the question, the note it becomes,
    the rubric it belongs to, the payload it makes, who gave it and who asked."""

    question_id: UUID
    assignment_id: str
    rubric_sha256: bytes
    note: dict[str, Any]
    payload: str
    actor: str
    askers: Sequence[UUID]


class HoldQueries(Gateway):
    """The teacher's list of held results; a question's askers; an answer, once."""

    async def review_needed(self, assignment_id: str, limit: int) -> list[Hold]:
        rows = await self._fetch("review_needed", assignment_id, limit, page=True)
        return [Hold.from_row(r) for r in rows]

    async def asked_question(self, assignment_id: str, question_id: UUID) -> AskedQuestion | None:
        """The question as its rows asked it; None when no row of the assignment asked it."""
        row = await self._fetchrow("asked_question", assignment_id, question_id)
        return AskedQuestion.from_row(row) if row and row["payload"] is not None else None

    async def rubric_notes(self, rubric_sha256: bytes) -> list[dict[str, Any]]:
        """Every note answered under a rubric, oldest first."""
        rows = await self._fetch("rubric_notes", rubric_sha256)
        return [json.loads(r["note"]) for r in rows]

    async def answer_question(self, a: Answer, *, defaults: RemarkDefaults, pool: str,
                              answer_key: AnswerKey | None) -> Answered | None:
        """The answer, once, in one transaction with what it changes: the assignment's rows
        not yet dispatched go under the new payload, and its askers are re-marked under it
        (db/remark.py's re-mark, limited to them).  None: answered already."""
        remark = remark_args(a.assignment_id, a.payload, include_reviewed=False,
                             debounce_seconds=0.0, defaults=defaults, pool=pool,
                             answer_key=answer_key, only=a.askers, actor=a.actor)
        for _ in range(_RUNS):
            done = await self.db.write(lambda conn: _answer_in(conn, self.sql, a, remark),
                                       page=True)
            if not isinstance(done, LostRace):
                return done
        raise Conflict("the submissions' live rows kept changing; try again")


async def _answer_in(conn: asyncpg.Connection, sql: dict[str, str], a: Answer,
                     remark: RemarkArgs) -> Answered | None:
    """The answer's transaction: the once-only record and the waiting rows moved, then the
    askers' re-mark (it takes the assignment's re-mark lock first, so two answers, or an
    answer and a re-mark, take turns)."""
    await conn.execute(sql["remark_lock"], a.assignment_id)
    row = await conn.fetchrow(sql["answer_question"], a.question_id, a.assignment_id,
                              a.rubric_sha256, json.dumps(a.note), a.actor, a.payload)
    if row is None:
        return None
    done = await remark_in(conn, sql, remark)
    if isinstance(done, LostRace):
        raise Rollback(done)
    return Answered(row["answered_at"], row["payload_version"], int(row["moved"]),
                    len(done.queue_ids), done.run_id)
