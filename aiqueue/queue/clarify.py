"""A teacher answers a marker's question once; the answer marks what asked it, and after.

The answer becomes a marking note of the assignment's payload (a new payload
version): `{"marking_notes": [{"question_id", "question", "answer"}]}`.  The
rows that asked are marked again under it, and the assignment's rows not yet
dispatched go under it.  The note is kept by the rubric it belongs to (the
payload without its notes), so an enqueue of that rubric later, for the next
class, carries it and the marker is not asked again (docs/review-holds.md).
"""

from __future__ import annotations

from uuid import UUID

from aiqueue import logs
from aiqueue.errors import AlreadyAnswered, NotFound
from aiqueue.queue import enqueue
from aiqueue.queue.holds import rubric_sha256, with_notes
from aiqueue.runtime import Runtime
from aiqueue.wire import EnqueueRequest, payload_json
from aiqueue.wire.holds import Clarified, ClarifyRequest


async def clarify(rt: Runtime, body: ClarifyRequest, actor: str | None) -> Clarified:
    """POST /api/marking/clarify: record the answer once, then mark under it."""
    asked = await rt.store.asked_question(body.assignment_id, body.question_id)
    if asked is None:
        raise NotFound("no row of this assignment asked that question")
    if asked.answered:
        raise AlreadyAnswered("this question was answered already")
    info = await rt.store.assignment_info(body.assignment_id)
    base = info.payload if info is not None and info.payload else asked.payload
    rubric = rubric_sha256(base)
    note = {"question_id": str(body.question_id), "question": asked.question or "",
            "answer": body.answer}
    payload = with_notes(base, [*await rt.store.rubric_notes(rubric), note])
    text = payload_json(payload)  # 422 (too large) before anything is written
    done = await rt.store.answer_question(body.question_id, body.assignment_id, rubric, note,
                                          actor, payload)
    if done is None:  # another answer won the race
        raise AlreadyAnswered("this question was answered already")
    remarked = await _mark_again(rt, body.assignment_id, asked.askers, text)
    logs.event("clarified", assignment_id=body.assignment_id, question_id=body.question_id,
               remarked=remarked, moved=done.moved)
    return Clarified(question_id=body.question_id, payload_version=done.payload_version,
                     remarked=remarked, moved=done.moved, answered_at=done.answered_at)


async def _mark_again(rt: Runtime, assignment_id: str, submissions: tuple[UUID, ...],
                      payload: str) -> int:
    """Enqueue the askers again under the answered payload (rows still waiting are skipped:
    the answer moved them already)."""
    if not submissions:
        return 0
    request = EnqueueRequest(assignment_id, list(submissions), 0, payload, remark=True)
    answer, _ = await enqueue.enqueue(rt, request)
    return answer.enqueued
